// Package vocab is llama.cpp's llama_vocab (src/llama-vocab.cpp of the
// pinned release) in Go: the vocabulary of a GGUF file, loaded from its
// metadata alone, and the tokenizers that turn text into token ids and back
// with the same ids and bytes as llama_tokenize, llama_token_to_piece and
// llama_detokenize.
//
// Load reads every tokenizer key the pin reads, applies the same defaults
// per vocabulary type and pre-tokenizer, detects special tokens by their
// text, builds the end-of-generation set, the special-token cache (in the
// pin's order) and the piece cache. It refuses what llama.cpp refuses (an
// unknown tokenizer or pre-tokenizer, a key of the wrong type, arrays
// shorter than the token list, duplicate token texts) with an error naming
// the file, the key and the reason.
//
// Every vocabulary type of the pin is implemented: SPM (with byte
// fallback), BPE (with each pre-tokenizer, its byte encoding, and the
// hybriddna and whitespace variants), WPM, UGM (with the precompiled
// character map), RWKV, PLaMo-2 and the test type. The Unicode tables and
// the pre-tokenizer split come from package vocab/internal/unicode.
//
// A Vocab is immutable after Load; its methods are safe for concurrent use.
// Tokenize reuses per-call work buffers through a pool.
package vocab
