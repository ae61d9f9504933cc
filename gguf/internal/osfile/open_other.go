//go:build !unix

package osfile

import "os"

// open opens path; Open refuses what is not a regular file from its stat.
func open(path string) (*os.File, error) { return os.Open(path) }

// readable: a read of a handle not open for reading fails with its own
// error.
func readable(*os.File) error { return nil }
