// Package unicode is llama.cpp's src/unicode.cpp in Go: UTF-8 decoding and
// encoding with the pin's handling of invalid input, the code point flags of
// src/unicode-data.cpp (as generated tables), NFD, lower-casing, the GPT-2
// byte-to-text map, and unicode_regex_split, the pre-tokenizer that cuts text
// into words with the custom splitters and, for every other pattern, a
// backtracking matcher that behaves like libstdc++'s std::regex.
//
// The package owns the Unicode data and the regex semantics; it knows
// nothing of vocabularies or tokens. Its tables are generated from the
// pinned source tree by internal/gen (go generate).
package unicode

//go:generate go run ./internal/gen
