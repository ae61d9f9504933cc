package testenv

import "github.com/ggload/ggload/bindings"

// HaveRPCServer reports whether a ggml-rpc-server can be started, and if
// not, why.
func HaveRPCServer() (bool, string) {
	if _, err := bindings.FindRPCServer(); err != nil {
		return false, err.Error()
	}
	return true, ""
}
