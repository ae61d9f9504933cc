//go:build !linux

package testenv

import "syscall"

// childAttr: only Linux kills a child when its parent dies; elsewhere the
// test's cleanup stops the helper.
func childAttr() *syscall.SysProcAttr { return nil }
