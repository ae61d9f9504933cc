//go:build !unix

package osfile

import "os"

// open opens path; Open refuses what is not a regular file from its stat.
func open(path string) (*os.File, error) { return os.Open(path) }
