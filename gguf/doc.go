// Package gguf reads and writes GGUF files, the model format of ggml and
// llama.cpp, in pure Go.
//
// The reader accepts exactly the files that ggml's own gguf.cpp (of the
// pinned release) accepts and refuses the rest with a *FormatError that
// carries the byte offset of the fault and wraps a sentinel for errors.Is.
// A file that ends before what its header says it holds wraps
// ErrTruncated, wherever it is cut, beside a more specific sentinel
// (ErrTooLarge, ErrOutOfBounds) where one applies.
// Sizes read from a file are never trusted: every allocation is bounded by
// what the rest of the file can hold, every sum is overflow-checked, and no
// input makes it panic. A count or a length reserves memory only as the
// entries or bytes it counts are read, never what it claims: a sparse file
// or a reader whose size is not its bytes claims what it likes. Large
// arrays (tokenizer vocabularies) are decoded only when asked for.
//
// Keys, names and strings of a file are text of any bytes. The errors that
// quote them escape them and cut them short; Printable does the same for a
// program that shows them on a terminal.
//
// A model may be split over several files; OpenModel and OpenSplits merge
// them into one weights index (name → file, absolute offset, size) ordered by
// layer number, then name, as llama.cpp orders its loads.
//
// The package needs no native library; it imports only package ggml's
// pure-Go type traits.
package gguf
