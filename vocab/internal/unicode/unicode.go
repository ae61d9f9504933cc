// Port of llama.cpp src/unicode.cpp (v0.5.0): code point flags, case maps
// and UTF-8 conversions (the tables are generated from
// src/unicode-data.cpp).

package unicode

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Flags is a code point's flags, llama.cpp's unicode_cpt_flags: one bit for
// each general category the pre-tokenizers use and helper bits for
// whitespace, case and NFD.
type Flags uint16

// The bits of Flags, with unicode_cpt_flags' values.
const (
	Undefined      Flags = 0x0001 // no category
	Number         Flags = 0x0002 // \p{N}
	Letter         Flags = 0x0004 // \p{L}
	Separator      Flags = 0x0008 // \p{Z}
	AccentMark     Flags = 0x0010 // \p{M}
	Punctuation    Flags = 0x0020 // \p{P}
	Symbol         Flags = 0x0040 // \p{S}
	Control        Flags = 0x0080 // \p{C}
	MaskCategories Flags = 0x00FF // the category bits
	Whitespace     Flags = 0x0100 // \s as llama.cpp's table has it
	Lowercase      Flags = 0x0200 // the lower-case side of a case mapping
	Uppercase      Flags = 0x0400 // the upper-case side of a case mapping
	NFDBase        Flags = 0x0800 // the base code point of an NFD decomposition
)

// IsUndefined reports whether f has no category.
func (f Flags) IsUndefined() bool { return f&Undefined != 0 }

// IsNumber reports whether f is in \p{N}.
func (f Flags) IsNumber() bool { return f&Number != 0 }

// IsLetter reports whether f is in \p{L}.
func (f Flags) IsLetter() bool { return f&Letter != 0 }

// IsSeparator reports whether f is in \p{Z}.
func (f Flags) IsSeparator() bool { return f&Separator != 0 }

// IsAccentMark reports whether f is in \p{M}.
func (f Flags) IsAccentMark() bool { return f&AccentMark != 0 }

// IsPunctuation reports whether f is in \p{P}.
func (f Flags) IsPunctuation() bool { return f&Punctuation != 0 }

// IsSymbol reports whether f is in \p{S}.
func (f Flags) IsSymbol() bool { return f&Symbol != 0 }

// IsControl reports whether f is in \p{C}.
func (f Flags) IsControl() bool { return f&Control != 0 }

// IsWhitespace reports whether f has the whitespace bit.
func (f Flags) IsWhitespace() bool { return f&Whitespace != 0 }

// IsLowercase reports whether f has the lower-case bit.
func (f Flags) IsLowercase() bool { return f&Lowercase != 0 }

// IsUppercase reports whether f has the upper-case bit.
func (f Flags) IsUppercase() bool { return f&Uppercase != 0 }

// IsNFD reports whether f has the NFD bit.
func (f Flags) IsNFD() bool { return f&NFDBase != 0 }

// CategoryFlag returns f's category bits, as unicode_cpt_flags::category_flag.
func (f Flags) CategoryFlag() Flags { return f & MaskCategories }

// maxCodepoints is the size of llama.cpp's flag table (MAX_CODEPOINTS).
const maxCodepoints = 0x110000

type flagRange struct {
	start uint32
	flags Flags
}

type cptPair struct{ from, to uint32 }

type nfdRange struct{ first, last, nfd uint32 }

// flagTable is a two-level table of the flags of every code point below
// maxCodepoints: blocks of 256 code points, identical blocks shared.
type flagTable struct {
	index  [maxCodepoints >> 8]uint16
	blocks []Flags
}

var (
	flagsOnce sync.Once
	flags     *flagTable
)

// table builds the flags of every code point as unicode_cpt_flags_array
// does, once, and returns them.
func table() *flagTable {
	flagsOnce.Do(func() {
		all := make([]Flags, maxCodepoints)
		for i := range all {
			all[i] = Undefined
		}
		for i := 1; i < len(flagRanges); i++ {
			lo, hi := flagRanges[i-1].start, flagRanges[i].start
			for c := lo; c < hi && c < maxCodepoints; c++ {
				all[c] = flagRanges[i-1].flags
			}
		}
		for _, c := range whitespaceCpts {
			all[c] |= Whitespace
		}
		for _, p := range lowercaseMap {
			all[p.to] |= Lowercase
		}
		for _, p := range uppercaseMap {
			all[p.to] |= Uppercase
		}
		for _, r := range nfdRanges {
			all[r.nfd] |= NFDBase
		}
		t := &flagTable{}
		seen := map[[256]Flags]uint16{}
		for b := range t.index {
			var blk [256]Flags
			copy(blk[:], all[b<<8:])
			k, ok := seen[blk]
			if !ok {
				k = uint16(len(t.blocks) >> 8)
				seen[blk] = k
				t.blocks = append(t.blocks, blk[:]...)
			}
			t.index[b] = k
		}
		flags = t
	})
	return flags
}

// of returns the flags of cpt, Undefined past the table.
func (t *flagTable) of(cpt uint32) Flags {
	if cpt >= maxCodepoints {
		return Undefined
	}
	return t.blocks[int(t.index[cpt>>8])<<8|int(cpt&0xFF)]
}

// FlagsOf returns the flags of the code point cpt, as
// unicode_cpt_flags_from_cpt: Undefined for a value past U+10FFFF.
func FlagsOf(cpt uint32) Flags { return table().of(cpt) }

// FlagsOfUTF8 returns the flags of the first code point of s, as
// unicode_cpt_flags_from_utf8: Undefined for an empty string and for a
// first sequence that does not decode.
func FlagsOfUTF8(s string) Flags {
	if s == "" {
		return Undefined
	}
	cpt, _, err := CptFromUTF8(s, 0)
	if err != nil {
		return Undefined
	}
	return FlagsOf(cpt)
}

// LenUTF8 returns the length of the UTF-8 sequence that the byte b starts,
// from its high four bits, as unicode_len_utf8: 1 for ASCII and for
// continuation bytes.
func LenUTF8(b byte) int {
	return int(lenUTF8[b>>4])
}

var lenUTF8 = [16]uint8{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}

// ErrInvalidUTF8 is the error of CptFromUTF8 for a byte sequence that does
// not decode.
var ErrInvalidUTF8 = errors.New("unicode: invalid UTF-8")

// CptFromUTF8 decodes the code point at byte offset off of s as
// unicode_cpt_from_utf8 does and returns it with the offset after it. Like
// the C++ it checks only the lead byte's form and that the continuation
// bytes are there and are 10xxxxxx: overlong forms, surrogates and values
// up to 0x1FFFFF decode. Where the C++ throws it returns ErrInvalidUTF8
// wrapped with the offset, and next is off.
func CptFromUTF8(s string, off int) (cpt uint32, next int, err error) {
	if off < 0 || off >= len(s) {
		return 0, off, fmt.Errorf("%w: offset %d outside %d bytes", ErrInvalidUTF8, off, len(s))
	}
	c, n := decode(s, off)
	if n == 0 {
		return 0, off, fmt.Errorf("%w: byte 0x%02X at offset %d", ErrInvalidUTF8, s[off], off)
	}
	return c, off + n, nil
}

// decode is CptFromUTF8 without the error value: n is 0 where the
// sequence does not decode.
func decode(s string, i int) (uint32, int) {
	b0 := s[i]
	switch {
	case b0 < 0x80:
		return uint32(b0), 1
	case b0&0x40 == 0:
		return 0, 0
	case b0&0x20 == 0:
		if i+1 >= len(s) || s[i+1]&0xC0 != 0x80 {
			return 0, 0
		}
		return uint32(b0&0x1F)<<6 | uint32(s[i+1]&0x3F), 2
	case b0&0x10 == 0:
		if i+2 >= len(s) || s[i+1]&0xC0 != 0x80 || s[i+2]&0xC0 != 0x80 {
			return 0, 0
		}
		return uint32(b0&0x0F)<<12 | uint32(s[i+1]&0x3F)<<6 | uint32(s[i+2]&0x3F), 3
	case b0&0x08 == 0:
		if i+3 >= len(s) || s[i+1]&0xC0 != 0x80 || s[i+2]&0xC0 != 0x80 || s[i+3]&0xC0 != 0x80 {
			return 0, 0
		}
		return uint32(b0&0x07)<<18 | uint32(s[i+1]&0x3F)<<12 | uint32(s[i+2]&0x3F)<<6 | uint32(s[i+3]&0x3F), 4
	}
	return 0, 0
}

// CptsFromUTF8 decodes s as unicode_cpts_from_utf8: every sequence that
// does not decode becomes U+FFFD and consumes one byte.
func CptsFromUTF8(s string) []uint32 {
	return appendCpts(make([]uint32, 0, len(s)), s)
}

func appendCpts(dst []uint32, s string) []uint32 {
	for i := 0; i < len(s); {
		if s[i] < 0x80 {
			dst = append(dst, uint32(s[i]))
			i++
			continue
		}
		c, n := decode(s, i)
		if n == 0 {
			c, n = 0xFFFD, 1
		}
		dst = append(dst, c)
		i += n
	}
	return dst
}

// AppendUTF8 appends the UTF-8 encoding of cpt to dst as
// unicode_cpt_to_utf8 writes it (surrogates included). For a value past
// U+10FFFF, where the C++ throws, it returns dst unchanged; ValidCpt tells
// such values apart.
func AppendUTF8(dst []byte, cpt uint32) []byte {
	switch {
	case cpt <= 0x7F:
		return append(dst, byte(cpt))
	case cpt <= 0x7FF:
		return append(dst, 0xC0|byte(cpt>>6&0x1F), 0x80|byte(cpt&0x3F))
	case cpt <= 0xFFFF:
		return append(dst, 0xE0|byte(cpt>>12&0x0F), 0x80|byte(cpt>>6&0x3F), 0x80|byte(cpt&0x3F))
	case cpt <= 0x10FFFF:
		return append(dst, 0xF0|byte(cpt>>18&0x07), 0x80|byte(cpt>>12&0x3F), 0x80|byte(cpt>>6&0x3F), 0x80|byte(cpt&0x3F))
	}
	return dst
}

// ValidCpt reports whether unicode_cpt_to_utf8 encodes cpt (it throws for
// values past U+10FFFF).
func ValidCpt(cpt uint32) bool { return cpt <= 0x10FFFF }

// CptToUTF8 returns the UTF-8 encoding of cpt as AppendUTF8 writes it: ""
// for a value past U+10FFFF.
func CptToUTF8(cpt uint32) string {
	if cpt < 0x80 {
		return asciiStrings[cpt]
	}
	var b [4]byte
	return string(AppendUTF8(b[:0], cpt))
}

var asciiStrings = func() (t [128]string) {
	for i := range t {
		t[i] = string(rune(i))
	}
	return
}()

// NFD maps every code point of cpts to the first code point of its
// canonical decomposition, as unicode_cpts_normalize_nfd does (one code
// point out for each in: the marks are dropped).
func NFD(cpts []uint32) []uint32 {
	out := make([]uint32, len(cpts))
	for i, c := range cpts {
		// the last range whose first is at most c; the table starts at 0.
		k := sort.Search(len(nfdRanges), func(j int) bool { return nfdRanges[j].first > c }) - 1
		if r := nfdRanges[k]; r.first <= c && c <= r.last {
			out[i] = r.nfd
		} else {
			out[i] = c
		}
	}
	return out
}

// ToLower returns the lower-case mapping of cpt in llama.cpp's table, or
// cpt where it has none, as unicode_tolower.
func ToLower(cpt uint32) uint32 {
	if cpt < 0x80 {
		if 'A' <= cpt && cpt <= 'Z' {
			return cpt + 'a' - 'A'
		}
		return cpt
	}
	k := sort.Search(len(lowercaseMap), func(j int) bool { return lowercaseMap[j].from >= cpt })
	if k < len(lowercaseMap) && lowercaseMap[k].from == cpt {
		return lowercaseMap[k].to
	}
	return cpt
}

// IsHan reports whether cpt is in one of the CJK ideograph blocks that
// unicode_cpt_is_han lists.
func IsHan(cpt uint32) bool {
	switch {
	case cpt >= 0x4E00 && cpt <= 0x9FFF,
		cpt >= 0x3400 && cpt <= 0x4DBF,
		cpt >= 0x20000 && cpt <= 0x2A6DF,
		cpt >= 0x2A700 && cpt <= 0x2B73F,
		cpt >= 0x2B740 && cpt <= 0x2B81F,
		cpt >= 0x2B820 && cpt <= 0x2CEAF,
		cpt >= 0x2CEB0 && cpt <= 0x2EBEF,
		cpt >= 0xF900 && cpt <= 0xFAFF,
		cpt >= 0x2F800 && cpt <= 0x2FA1F:
		return true
	}
	return false
}

// byteText is GPT-2's byte-to-text map: the printable bytes stand for
// themselves, the others for U+0100 onwards in byte order.
var byteText, textByte = func() ([256]string, map[string]byte) {
	var t [256]string
	m := make(map[string]byte, 256)
	printable := func(b int) bool {
		return b >= 0x21 && b <= 0x7E || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF
	}
	n := 0
	for b := 0; b < 256; b++ {
		c := uint32(b)
		if !printable(b) {
			c = uint32(256 + n)
			n++
		}
		t[b] = CptToUTF8(c)
		m[t[b]] = byte(b)
	}
	return t, m
}()

// ByteToUTF8 returns the text that stands for byte b in the GPT-2 byte
// encoding, as unicode_byte_to_utf8.
func ByteToUTF8(b byte) string { return byteText[b] }

// UTF8ToByte returns the byte that the text s stands for in the GPT-2 byte
// encoding, as unicode_utf8_to_byte; false where s stands for none (where
// the C++ map lookup throws).
func UTF8ToByte(s string) (byte, bool) {
	b, ok := textByte[s]
	return b, ok
}
