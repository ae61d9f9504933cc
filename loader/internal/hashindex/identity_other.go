//go:build !unix

package hashindex

import "io/fs"

// statIdentity: no inode here to know a file by, so no index.
func statIdentity(st fs.FileInfo) (Identity, bool) { return Identity{}, false }
