package ojson

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DumpOptions are nlohmann's dump parameters.
type DumpOptions struct {
	// Indent below 0 writes everything on one line without spaces; 0 or
	// more puts each element on its own line, indented by Indent
	// IndentChars a level.
	Indent     int
	IndentChar byte // ' ' when 0
	// EnsureASCII writes every code point past 0x7E as \uXXXX.
	EnsureASCII bool
	// Replace writes U+FFFD for bytes that are not UTF-8 (nlohmann's
	// error_handler_t::replace); without it they are an error (strict).
	Replace bool
}

// UTF8Error is nlohmann's type_error 316: a string holds bytes that are
// not UTF-8.
type UTF8Error struct {
	Msg string
}

func (e *UTF8Error) Error() string { return "[json.exception.type_error.316] " + e.Msg }

// Dump writes the value as nlohmann's dump(indent) does; a string that is
// not UTF-8 is an error, as there.
func (v Value) Dump(indent int) (string, error) {
	return v.DumpWith(DumpOptions{Indent: indent})
}

// DumpSafe writes the value as common_json::dump_safe does: bytes that are
// not UTF-8 become U+FFFD.
func (v Value) DumpSafe(indent int) string {
	s, _ := v.DumpWith(DumpOptions{Indent: indent, Replace: true})
	return s
}

// String is DumpSafe(-1).
func (v Value) String() string { return v.DumpSafe(-1) }

// DumpWith writes the value with the options.
func (v Value) DumpWith(o DumpOptions) (string, error) {
	if o.IndentChar == 0 {
		o.IndentChar = ' '
	}
	d := dumper{o: o}
	if err := d.value(v, 0); err != nil {
		return "", err
	}
	return d.b.String(), nil
}

type dumper struct {
	o DumpOptions
	b strings.Builder
}

func (d *dumper) indent(n int) {
	for range n {
		d.b.WriteByte(d.o.IndentChar)
	}
}

func (d *dumper) value(v Value, cur int) error {
	pretty := d.o.Indent >= 0
	switch v.kind {
	case Null:
		d.b.WriteString("null")
	case Bool:
		if v.b {
			d.b.WriteString("true")
		} else {
			d.b.WriteString("false")
		}
	case Int:
		d.b.WriteString(strconv.FormatInt(v.i, 10))
	case Uint:
		d.b.WriteString(strconv.FormatUint(v.u, 10))
	case Float:
		d.b.WriteString(FormatFloat(v.f))
	case String:
		d.b.WriteByte('"')
		if err := d.escaped(v.s); err != nil {
			return err
		}
		d.b.WriteByte('"')
	case Array:
		if len(v.arr) == 0 {
			d.b.WriteString("[]")
			return nil
		}
		d.b.WriteByte('[')
		next := cur + d.o.Indent
		for i, e := range v.arr {
			if i > 0 {
				d.b.WriteByte(',')
			}
			if pretty {
				d.b.WriteByte('\n')
				d.indent(next)
			}
			if err := d.value(e, next); err != nil {
				return err
			}
		}
		if pretty {
			d.b.WriteByte('\n')
			d.indent(cur)
		}
		d.b.WriteByte(']')
	case Object:
		if len(v.obj.list) == 0 {
			d.b.WriteString("{}")
			return nil
		}
		d.b.WriteByte('{')
		next := cur + d.o.Indent
		for i, m := range v.obj.list {
			if i > 0 {
				d.b.WriteByte(',')
			}
			if pretty {
				d.b.WriteByte('\n')
				d.indent(next)
			}
			d.b.WriteByte('"')
			if err := d.escaped(m.Key); err != nil {
				return err
			}
			d.b.WriteString(`":`)
			if pretty {
				d.b.WriteByte(' ')
			}
			if err := d.value(m.Value, next); err != nil {
				return err
			}
		}
		if pretty {
			d.b.WriteByte('\n')
			d.indent(cur)
		}
		d.b.WriteByte('}')
	}
	return nil
}

// Quote is s as a JSON string, as nlohmann writes it (bad UTF-8
// replaced).
func Quote(s string) string {
	d := dumper{o: DumpOptions{Indent: -1, Replace: true}}
	d.b.WriteByte('"')
	_ = d.escaped(s)
	d.b.WriteByte('"')
	return d.b.String()
}

// escaped writes s as nlohmann's dump_escaped does, decoding UTF-8 with the
// same automaton so that a bad byte is found, and replaced, where nlohmann
// finds and replaces it.
func (d *dumper) escaped(s string) error {
	var state uint8
	var cp uint32
	undumped := 0
	var out []byte // the code point under way, written once it is whole
	flush := func() {
		d.b.Write(out)
		out = out[:0]
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch decodeUTF8(&state, &cp, c) {
		case utf8Accept:
			switch cp {
			case 0x08:
				out = append(out, '\\', 'b')
			case 0x09:
				out = append(out, '\\', 't')
			case 0x0A:
				out = append(out, '\\', 'n')
			case 0x0C:
				out = append(out, '\\', 'f')
			case 0x0D:
				out = append(out, '\\', 'r')
			case 0x22:
				out = append(out, '\\', '"')
			case 0x5C:
				out = append(out, '\\', '\\')
			default:
				if cp <= 0x1F || (d.o.EnsureASCII && cp >= 0x7F) {
					if cp <= 0xFFFF {
						out = fmt.Appendf(out, "\\u%04x", cp)
					} else {
						out = fmt.Appendf(out, "\\u%04x\\u%04x", uint16(0xD7C0+(cp>>10)), uint16(0xDC00+(cp&0x3FF)))
					}
				} else {
					// the code point's bytes before this one are in
					// out already, where EnsureASCII does not hold
					out = append(out, c)
				}
			}
			flush()
			undumped = 0
		case utf8Reject:
			if !d.o.Replace {
				return &UTF8Error{Msg: fmt.Sprintf("invalid UTF-8 byte at index %d: 0x%02X", i, c)}
			}
			if undumped > 0 {
				i--
			}
			out = out[:0] // the bytes of the code point begun
			d.replacement()
			undumped = 0
			state = utf8Accept
		default:
			if !d.o.EnsureASCII {
				out = append(out, c)
			}
			undumped++
		}
	}
	if state != utf8Accept {
		if !d.o.Replace {
			return &UTF8Error{Msg: fmt.Sprintf("incomplete UTF-8 string; last byte: 0x%02X", s[len(s)-1])}
		}
		d.replacement()
		return nil
	}
	flush()
	return nil
}

func (d *dumper) replacement() {
	if d.o.EnsureASCII {
		d.b.WriteString(`\ufffd`)
	} else {
		d.b.WriteString("\xEF\xBF\xBD")
	}
}

const (
	utf8Accept = 0
	utf8Reject = 1
)

// utf8d is Björn Höhrmann's UTF-8 decoding automaton, as nlohmann's
// serializer holds it: a byte's class, then the transitions.
var utf8d = [400]uint8{
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
	7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
	8, 8, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
	0xA, 0x3, 0x3, 0x3, 0x3, 0x3, 0x3, 0x3, 0x3, 0x3, 0x3, 0x3, 0x3, 0x4, 0x3, 0x3,
	0xB, 0x6, 0x6, 0x6, 0x5, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8,
	0x0, 0x1, 0x2, 0x3, 0x5, 0x8, 0x7, 0x1, 0x1, 0x1, 0x4, 0x6, 0x1, 0x1, 0x1, 0x1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1,
	1, 2, 1, 1, 1, 1, 1, 2, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 2, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 3, 1, 1, 1, 1, 1, 1,
	1, 3, 1, 1, 1, 1, 1, 3, 1, 3, 1, 1, 1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
}

func decodeUTF8(state *uint8, cp *uint32, b byte) uint8 {
	t := utf8d[b]
	if *state != utf8Accept {
		*cp = uint32(b&0x3f) | *cp<<6
	} else {
		*cp = uint32(0xFF>>t) & uint32(b)
	}
	*state = utf8d[256+int(*state)*16+int(t)]
	return *state
}

// FormatFloat writes f as nlohmann's dump writes a float: null for NaN
// and the infinities, else the Grisu2 digits laid out as %g-like text with
// at least one decimal (1.0, 0.001, 1e-05, 1.5e+300).
func FormatFloat(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	var buf [64]byte
	return string(appendFloat(buf[:0], f))
}

func appendFloat(dst []byte, f float64) []byte {
	if math.Signbit(f) {
		f = -f
		dst = append(dst, '-')
	}
	if f == 0 {
		return append(dst, '0', '.', '0')
	}
	digits, exp := grisu2(f)
	return formatBuffer(dst, digits, exp, -4, 15)
}

// formatBuffer lays out v = digits × 10^exp as nlohmann's format_buffer
// does, fixed between 10^minExp and 10^maxExp, else with an exponent.
func formatBuffer(dst, digits []byte, exp, minExp, maxExp int) []byte {
	k := len(digits)
	n := k + exp
	switch {
	case k <= n && n <= maxExp:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
		return append(dst, '.', '0')
	case 0 < n && n <= maxExp:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		return append(dst, digits[n:]...)
	case minExp < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	dst = append(dst, digits[0])
	if k > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	e := n - 1
	if e < 0 {
		dst = append(dst, '-')
		e = -e
	} else {
		dst = append(dst, '+')
	}
	switch {
	case e < 10:
		dst = append(dst, '0', byte('0'+e))
	case e < 100:
		dst = append(dst, byte('0'+e/10), byte('0'+e%10))
	default:
		dst = append(dst, byte('0'+e/100), byte('0'+e/10%10), byte('0'+e%10))
	}
	return dst
}
