//go:build !unix

package sample

import "testing"

// cpuPerOp reports nothing where getrusage is not to be had.
func cpuPerOp(b *testing.B) func() { return func() {} }
