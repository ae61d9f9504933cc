//go:build !linux

package llamaserver

import "os/exec"

// dieWithParent does nothing where the kernel has no parent-death
// signal: the tests' cleanups stop the server.
func dieWithParent(cmd *exec.Cmd) {}
