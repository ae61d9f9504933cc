// Package loader carries out a place.Plan: it maps or opens the model's
// files, creates the weight contexts and buffers, moves every byte to its
// device by the path the load mode calls for, validates, releases what is
// no longer needed, and returns a Model whose tensors live on their devices
// until Close.
//
// The paths, as in llama.cpp's load_all_data:
//   - mmap: a tensor inside a buffer made from the mapping costs nothing
//     (zero copy);
//   - host buffer: the file is read straight into the tensor;
//   - device buffer: through a ring of pinned staging buffers with
//     asynchronous uploads and events, or, when the device cannot, one
//     synchronous copy per chunk.
//
// With mmap, llama.cpp copies the tensors that cannot stay in the mapping
// out of it; ggload reads them from the file as it does without mmap. The
// bytes are the same, from the same page cache, but no page of the mapping
// is faulted in for them: a fault reads at most the disk's readahead
// window (128 KiB on most disks), and the pages would count in the
// process's resident set.
//
// Every device loads at once: each has its own pipeline (its
// staging ring and stream, its bounce buffers, its RPC connection) on a
// goroutine of its own, host memory shares one fed by parallel readers, and
// the first failure, or a cancelled context, stops them all before the
// load frees what it made. Options.Sequential loads one device after
// another instead. Fresh destination memory is prepared off the critical
// path: the CPU's weight buffers, and a software device's buffers that live
// in this process (lavapipe's, its host buffer type's included), get
// transparent huge pages and are faulted in by a goroutine ahead of the
// writes (on Linux).
//
// During a load no native call reads the mapped file. Go reads the file
// into memory the process owns: the tensor's own host memory, the pinned
// staging ring for devices that upload asynchronously, or a bounce buffer
// for everything else, the buffer types that repack what they are given
// (CPU_REPACK and the CPU's other extra buffer types, split buffers and the
// meta device's buffers of split mode tensor; set whole, as they require)
// and RPC servers included. Only then does native code see them. Row
// validation (CheckTensors) of zero-copy tensors runs on copies Go makes
// out of the mapping, with faults turned into errors
// (debug.SetPanicOnFault), and Verify reads host memory in Go. So a file
// truncated while it loads gives an error naming the file and the tensor,
// never a SIGBUS in native code; and a file that changed during the load
// (shrank, grew, was written to) fails the load, since the weights read may
// mix old and new bytes.
//
// The exception is zero copy itself: zero-copy and lazy tensors stay in the
// file's mapping, and the backends read it when computing. Truncating a
// file that a loaded model maps is then fatal (SIGBUS in native code), as
// it is in llama.cpp. Model.CheckFile tells a long-running program that a
// file changed (size, modification time, replaced at its path), and
// Model.Verify compares the weights themselves with the file.
//
// What a change to a file's bytes can go unseen by: the load and CheckFile
// compare size and modification time, so a same-sized write that sets the
// time back (cp -p, rsync into the file, touch -d) or, on filesystems with
// coarse timestamps, one within the tick of the previous write is not
// seen. Verify then sees it for every tensor copied into a buffer that can
// be read back, but not for zero-copy tensors (the mapping shows the new
// bytes, which then equal the file's: the model computes with them) nor
// for tensors in write-only buffers (CPU_REPACK). CheckTensors sees new
// bytes only when they are invalid (NaN or Inf values or scales).
//
// Weights sent to an RPC server are confirmed before the load succeeds: a
// sample of every tensor is read back and compared with what was sent (the
// pinned protocol has no command that reports what a buffer holds, and
// SET_TENSOR has no reply). The reads of a device go out at once, ahead
// of their replies, so that confirming costs one round trip, not one per
// tensor. Under -sm tensor a window of every server's slice is read back
// the same way.
//
// RPC servers get their weights from the guard in front of them, which
// speaks the protocol itself (requests byte for byte as ggml's client
// makes them, without its copies). A server with a file cache
// (ggml-rpc-server -c) is asked for each weight above 10 MiB by its hash
// first, as llama.cpp does; the hashes are worked out on other cores while
// the data of other tensors is on the wire, and kept in a hash index in
// the user cache (Options.HashIndex), so that the next load of the same
// file asks for them without hashing, spread among the other tensors'
// sets and without waiting for the answers (the server reads its cache
// while the link carries the rest), and reads only what the cache misses.
// The window a confirmation compares is read from the file as it is then.
// Under -sm tensor the guards send each server its slice of a tensor; a
// slice above 10 MiB is asked for by its hash in the same way, from the
// index where it knows the slice's bytes, before the tensor is read: a
// tensor whose slices the caches all set is not read at all.
//
// Memory. Beyond the weights, a load holds staging rings, bounce and
// direct-read buffers while it runs: MemoryOf bounds them, per part, for a
// plan and options, and the Memory type says what each mode takes. Bounce
// and direct-read buffers are mapped outside Go's heap and unmapped when
// the load ends. Under an address-space limit (ulimit -v), a load whose
// bound, with 256 MiB for threads and the Go runtime, does not fit is
// refused before anything is allocated, with an error wrapping
// ggml.ErrOutOfMemory: near such a limit a thread's creation or the Go
// heap's growth would otherwise end the process.
//
// Long-running programs. glibc keeps what native code frees (host and
// software-device buffers, staging memory, the backends' own allocations)
// in its arenas, one per thread that allocated, for the next allocation;
// once a large buffer has been freed it also raises the size below which
// it serves allocations from those arenas. Loading and closing models then
// makes the resident size grow, though nothing leaks. Model.Close and
// Runtime.Close hand that memory back at once (ggml.ReleaseFreedMemory,
// malloc_trim), so that the resident size returns after Close with no
// setting; a program that frees native memory by other ways can call it
// too. malloc_trim leaves the pages at the top of every arena but the
// first thread's, where a freed buffer merges, so the loader also drops
// the pages of the memory it knows to be plain memory of the process (the
// CPU's weight buffers, a software device's staging slots) just before
// they are freed, by whichever Close frees them. MALLOC_ARENA_MAX=2
// (fewer arenas) and MALLOC_TRIM_THRESHOLD_ (give back sooner) bound what
// glibc keeps between calls.
//
// Faults are errors: a file that shrank, a mapping that cannot be read, an
// allocation a device refuses, an RPC server that fails or answers garbage,
// a cancelled context all end the load with an error that names the tensor,
// device or file, and free everything the load had made.
//
// Errors. Every error of Load and of a Model's methods is an *Error: what
// was being done (Op) and where, the file, the tensor and the offset of
// its data, the device and buffer type, for errors.As. It wraps its cause,
// for errors.Is: the sentinels ErrCanceled, ErrFileChanged (ErrTruncated
// when the file shrank, which is also gguf.ErrTruncated, as a file cut
// short before it was opened is), ErrInvalidData, ErrMismatch, ErrPanicked
// and ErrClosed, gguf.ErrClosed (a model closed before the load), ggml's
// (ggml.ErrOutOfMemory, ggml.ErrRPCFailed, ...), and the *ggml.Error or
// *httpsrc.Error of the call that failed below.
package loader
