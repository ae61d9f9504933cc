//go:build !unix

package loader

import "io/fs"

// statIdentity: no inode here to know a file by, so no index.
func statIdentity(st fs.FileInfo) (fileIdentity, bool) { return fileIdentity{}, false }
