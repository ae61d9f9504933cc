// Package hashindex keeps the hashes of a model file's tensors between
// loads: the RPC hash index. An RPC server with a file cache
// (ggml-rpc-server -c) is asked for each weight above 10 MiB by the FNV-1a
// hash of its bytes before they are sent, and working that hash out means
// reading and hashing the whole tensor, at about 1 GB/s a core. The index
// keeps those hashes in the user cache, so that the next load of the same
// file asks the server first and reads only what it misses.
//
// An index belongs to one file, known by its Identity: device, inode,
// size, modification and change times, and a sampled content check (the
// first 64 KiB, the last 4 KiB, and 32 pages of 4 KiB spread evenly,
// hashed). An entry is trusted only when the identity of the file being
// loaded is the index's. A file rewritten in place changes its change time
// (which no program can set back); where a filesystem keeps no change time
// or a file is restored with its old one, the samples catch a rewrite that
// touches any of them, but not a change confined to bytes between them
// with the size and both times kept. A hash taken from a stale entry asks
// the server for bytes the file no longer has: the loader's read-back
// confirmation of every tensor (a window of its bytes, read from the file
// as it is now) catches most such loads.
//
// Files are written whole to a temporary name and renamed, so a reader
// sees an old index or a new one, never half of one; an index that is
// truncated, corrupt (a checksum covers it) or of another version, or a
// temporary left by a crashed process, is ignored. Two processes that load
// at once each merge what is on disk before writing, so at worst one's new
// entries are lost and taken again next time. The directory holds at most
// maxFiles indexes (the oldest are dropped) of at most maxEntries entries
// each.
//
// Only unix systems have an inode to know a file by; elsewhere Open gives
// no index.
package hashindex
