package testenv

import (
	"os"
	"testing"
)

// Main runs a test binary's tests, stops the ggml-rpc-servers they started
// and exits with their code. Every test package's TestMain is a call to it
// (cmd/ggload's first serves the cases where its binary stands in for
// ggload).
func Main(m *testing.M) {
	code := m.Run()
	KillAll()
	os.Exit(code)
}
