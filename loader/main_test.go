package loader_test

import (
	"testing"

	"github.com/ggload/ggload/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m)
}
