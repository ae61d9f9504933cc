package gguf_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ggload/ggload/gguf"
)

// terminalSafe says why s could act on a terminal: a control character
// (C0, DEL, C1), a format character, or bytes that are not UTF-8.
func terminalSafe(s string) string {
	if !utf8.ValidString(s) {
		return "invalid UTF-8"
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) {
			return fmt.Sprintf("the character %U", r)
		}
	}
	return ""
}

func TestPrintable(t *testing.T) {
	long := strings.Repeat("a", 1000)
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"blk.0.attn_q.weight", -1, "blk.0.attn_q.weight"},
		{"▁the 日本語 👍 \ufffd", -1, "▁the 日本語 👍 \ufffd"},
		{"back\\slash", -1, "back\\slash"},
		{"", 0, ""},
		// C0, DEL, C1 and the escape sequences they start
		{"\x1b]0;pwned\x07", -1, `\x1b]0;pwned\a`},
		{"\x1b[31mred\x1b[0m", -1, `\x1b[31mred\x1b[0m`},
		{"\x1b]8;;http://x\x1b\\link", -1, `\x1b]8;;http://x\x1b\link`},
		{"a\nb\tc\rd\x00e\x7f", -1, `a\nb\tc\rd\x00e\x7f`},
		{"\u009b31m\u009d0;t", -1, `\u009b31m\u009d0;t`},
		// bytes that are not UTF-8 (0x9b alone is CSI to an 8-bit terminal)
		{"\x9b31m\xff\xfe", -1, `\x9b31m\xff\xfe`},
		// invisible and reordering characters
		{"abc\u202edef", -1, `abc\u202edef`},
		{"zero\u200bwidth\ufeff", -1, `zero\u200bwidth\ufeff`},
		{"line\u2028sep", -1, `line\u2028sep`},
		{"\U000f0000", -1, `\U000f0000`},
		// bounded: cut before the character or escape that would pass
		// the bound, never inside one
		{long, 10, "aaaaaaaaaa…(1000 bytes)"},
		{long, 1000, long},
		{"日本語", 4, "日…(9 bytes)"},
		{"ab\x1b", 4, "ab…(3 bytes)"},
		{"ab\x1b", 6, `ab\x1b`},
		{"abc", 0, "…(3 bytes)"},
	} {
		if got := gguf.Printable(c.in, c.max); got != c.want {
			t.Errorf("Printable(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
	// every byte value, and every character of the first planes, comes
	// out terminal-safe
	var all strings.Builder
	for b := 0; b < 256; b++ {
		all.WriteByte(byte(b))
	}
	for r := rune(0); r < 0x30000; r++ {
		all.WriteRune(r)
	}
	if why := terminalSafe(gguf.Printable(all.String(), -1)); why != "" {
		t.Errorf("Printable left %s", why)
	}
}

// Errors quote a file's keys, names and strings escaped and cut: a key of
// 1 MiB full of escape sequences makes an error of a few hundred bytes
// with no control character in it.
func TestErrorsBoundFileText(t *testing.T) {
	esc := "\x1b]0;pwned\x07\x1b[2J\r\x9b"
	big := esc + strings.Repeat("k", 1<<20)
	name := "blk.0\x1b[31m\u202e"
	for _, c := range []struct {
		name string
		data []byte
		want error
	}{
		{"duplicate key of 1 MiB", header(0, 2).str(big).u32(4).u32(1).str(big).u32(4).u32(1).Bytes(), gguf.ErrDuplicateKey},
		{"key of 1 MiB, bad type", header(0, 1).str(big).u32(99).Bytes(), gguf.ErrValueType},
		{"key of 1 MiB, file ends", header(0, 1).str(big).Bytes(), gguf.ErrTruncated},
		{"key, no value", header(0, 1).str(esc).u32(4).Bytes(), gguf.ErrTruncated},
		{"key, no string", header(0, 1).str(esc).u32(8).Bytes(), gguf.ErrTruncated},
		{"array, no length", header(0, 1).str(esc).u32(9).u32(4).Bytes(), gguf.ErrTruncated},
		{"array, nested", header(0, 1).str(esc).u32(9).u32(9).u64(1).Bytes(), gguf.ErrValueType},
		{"array, string cut", header(0, 1).str(esc).u32(9).u32(8).u64(2).str("a").u64(1).Bytes(), gguf.ErrTooLarge},
		{"array, no string", header(0, 1).str(esc).u32(9).u32(8).u64(2).str("a long first string").Bytes(), gguf.ErrTruncated},
		{"tensor, no dimensions", header(1, 0).str(name).Bytes(), gguf.ErrTruncated},
		{"tensor, 5 dimensions", header(1, 0).str(name).u32(5).Bytes(), gguf.ErrShape},
		{"tensor, no type", header(1, 0).str(name).u32(1).u64(32).Bytes(), gguf.ErrTruncated},
		{"tensor, bad type", header(1, 0).str(name).u32(1).u64(32).u32(99).u64(0).Bytes(), gguf.ErrTensorType},
		{"tensor, duplicate", header(2, 0).str(name).u32(1).u64(4).u32(0).u64(0).str(name).u32(1).u64(4).u32(0).u64(32).Bytes(), gguf.ErrDuplicateName},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(c.data)
			if !errors.Is(err, c.want) {
				t.Fatalf("want %v, got %.300q", c.want, err)
			}
			msg := err.Error()
			if len(msg) > 512 {
				t.Fatalf("an error of %d bytes: %.300q", len(msg), msg)
			}
			if why := terminalSafe(msg); why != "" {
				t.Fatalf("the error holds %s: %q", why, msg)
			}
			if strings.Contains(c.name, "1 MiB") && !strings.Contains(msg, fmt.Sprintf("…(%d bytes)", len(big))) {
				t.Errorf("the error does not say the key's length: %s", msg)
			}
		})
	}
}
