package loader_test

import (
	"os"
	"testing"

	"github.com/ggload/ggload/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.KillAll()
	os.Exit(code)
}
