// Port of llama.cpp tools/server/server-common.cpp (validate_utf8,
// server_tokens::get_common_prefix) and common/common.h
// (string_find_partial_stop) (v0.5.0).

package serve

import "strings"

// ValidUTF8Len is validate_utf8: the length of text without a
// multi-byte character cut at its end (the whole length where none is),
// where a streamed piece may be cut.
func ValidUTF8Len[T string | []byte](text T) int {
	n := len(text)
	for i := 1; i <= 4 && i <= n; i++ {
		c := text[n-i]
		switch {
		case c&0xE0 == 0xC0:
			if i < 2 {
				return n - i
			}
		case c&0xF0 == 0xE0:
			if i < 3 {
				return n - i
			}
		case c&0xF8 == 0xF0:
			if i < 4 {
				return n - i
			}
		}
	}
	return n
}

// findPartialStop is string_find_partial_stop: where a beginning of stop
// (the longest) ends text, -1 where none does.
func findPartialStop(text, stop string) int {
	if text == "" || stop == "" {
		return -1
	}
	last := text[len(text)-1]
	for l := min(len(text), len(stop)); l > 0; l-- {
		if stop[l-1] == last && strings.HasSuffix(text, stop[:l]) {
			return len(text) - l
		}
	}
	return -1
}

// commonPrefix is server_tokens::get_common_prefix (text tokens).
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
