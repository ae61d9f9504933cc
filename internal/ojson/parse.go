package ojson

import (
	"fmt"
	"math"
	"strconv"
)

// SyntaxError is a text that is not JSON, said as nlohmann's parser says
// it: Error() is its exception's what(), "[json.exception.parse_error.101]
// parse error at line 1, column 5: syntax error while parsing value -
// invalid literal; last read: 'tru,'".
type SyntaxError struct {
	ID     int    // nlohmann's exception id: 101, or 406 for a number overflow
	Offset int64  // bytes read when the error was found
	Line   int    // 1-based
	Column int    // bytes read on that line
	Msg    string // the message after the position
}

func (e *SyntaxError) Error() string {
	if e.ID == 406 {
		return "[json.exception.out_of_range.406] " + e.Msg
	}
	return fmt.Sprintf("[json.exception.parse_error.%d] parse error at line %d, column %d: %s", e.ID, e.Line, e.Column, e.Msg)
}

// MaxDepth bounds the nesting Parse accepts, where nlohmann has no bound
// but the stack: deeper input is refused rather than risked.
const MaxDepth = 10000

// Parse reads one JSON text as nlohmann's ordered_json::parse does: strict
// RFC 8259 (no comments, no trailing commas), an optional UTF-8 BOM,
// integers as Int or Uint where they fit and as Float otherwise, a NUL
// byte taken as the end of the input, duplicate keys keeping their first
// place and their last value.
func Parse(text []byte) (Value, error) {
	p := parser{lx: lexer{in: text}}
	return p.parse()
}

// ParseString is Parse of a string.
func ParseString(text string) (Value, error) { return Parse([]byte(text)) }

type token uint8

const (
	tUninitialized token = iota
	tTrue
	tFalse
	tNull
	tString
	tUnsigned
	tInteger
	tFloat
	tBeginArray
	tBeginObject
	tEndArray
	tEndObject
	tNameSep
	tValueSep
	tParseError
	tEnd
	tLiteralOrValue
)

func (t token) name() string {
	switch t {
	case tUninitialized:
		return "<uninitialized>"
	case tTrue:
		return "true literal"
	case tFalse:
		return "false literal"
	case tNull:
		return "null literal"
	case tString:
		return "string literal"
	case tUnsigned, tInteger, tFloat:
		return "number literal"
	case tBeginArray:
		return "'['"
	case tBeginObject:
		return "'{'"
	case tEndArray:
		return "']'"
	case tEndObject:
		return "'}'"
	case tNameSep:
		return "':'"
	case tValueSep:
		return "','"
	case tParseError:
		return "<parse error>"
	case tEnd:
		return "end of input"
	case tLiteralOrValue:
		return "'[', '{', or a literal"
	}
	return "unknown token"
}

const eof = -1

// lexer is nlohmann's lexer over a byte slice: the same reads and unreads,
// so that positions and "last read" texts are its.
type lexer struct {
	in      []byte
	pos     int // next byte of in
	current int
	unget_  bool

	total, lineChars, lines int

	tokenString []byte // what was read since the last string or number began
	buf         []byte // a string's or a number's bytes
	errMsg      string

	vInt   int64
	vUint  uint64
	vFloat float64
}

func (l *lexer) get() int {
	l.total++
	l.lineChars++
	if l.unget_ {
		l.unget_ = false
	} else if l.pos < len(l.in) {
		l.current = int(l.in[l.pos])
		l.pos++
	} else {
		l.current = eof
	}
	if l.current != eof {
		l.tokenString = append(l.tokenString, byte(l.current))
	}
	if l.current == '\n' {
		l.lines++
		l.lineChars = 0
	}
	return l.current
}

func (l *lexer) unget() {
	l.unget_ = true
	l.total--
	if l.lineChars == 0 {
		if l.lines > 0 {
			l.lines--
		}
	} else {
		l.lineChars--
	}
	if l.current != eof {
		l.tokenString = l.tokenString[:len(l.tokenString)-1]
	}
}

func (l *lexer) reset() {
	l.buf = l.buf[:0]
	l.tokenString = append(l.tokenString[:0], byte(l.current))
}

// lastRead is get_token_string: control bytes written as <U+XXXX>.
func (l *lexer) lastRead() string {
	var out []byte
	for _, c := range l.tokenString {
		if c <= 0x1F {
			out = fmt.Appendf(out, "<U+%04X>", c)
		} else {
			out = append(out, c)
		}
	}
	return string(out)
}

func (l *lexer) scan() token {
	if l.total == 0 {
		if l.get() == 0xEF {
			if !(l.get() == 0xBB && l.get() == 0xBF) {
				l.errMsg = "invalid BOM; must be 0xEF 0xBB 0xBF if given"
				return tParseError
			}
		} else {
			l.unget()
		}
	}
	for {
		l.get()
		if c := l.current; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			break
		}
	}
	switch c := l.current; c {
	case '[':
		return tBeginArray
	case ']':
		return tEndArray
	case '{':
		return tBeginObject
	case '}':
		return tEndObject
	case ':':
		return tNameSep
	case ',':
		return tValueSep
	case 't':
		return l.literal("true", tTrue)
	case 'f':
		return l.literal("false", tFalse)
	case 'n':
		return l.literal("null", tNull)
	case '"':
		return l.scanString()
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return l.scanNumber()
	case 0, eof:
		return tEnd
	}
	l.errMsg = "invalid literal"
	return tParseError
}

func (l *lexer) literal(text string, t token) token {
	for i := 1; i < len(text); i++ {
		if l.get() != int(text[i]) {
			l.errMsg = "invalid literal"
			return tParseError
		}
	}
	return t
}

var controlNames = [32]string{"NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "HT", "LF", "VT", "FF", "CR", "SO", "SI",
	"DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS", "GS", "RS", "US"}

func (l *lexer) codepoint() int {
	cp := 0
	for _, shift := range [4]uint{12, 8, 4, 0} {
		c := l.get()
		switch {
		case c >= '0' && c <= '9':
			cp += (c - 0x30) << shift
		case c >= 'A' && c <= 'F':
			cp += (c - 0x37) << shift
		case c >= 'a' && c <= 'f':
			cp += (c - 0x57) << shift
		default:
			return -1
		}
	}
	return cp
}

// inRange adds the current byte, then reads one byte per range and checks
// it (next_byte_in_range).
func (l *lexer) inRange(ranges ...int) bool {
	l.buf = append(l.buf, byte(l.current))
	for i := 0; i < len(ranges); i += 2 {
		c := l.get()
		if ranges[i] <= c && c <= ranges[i+1] {
			l.buf = append(l.buf, byte(c))
		} else {
			l.errMsg = "invalid string: ill-formed UTF-8 byte"
			return false
		}
	}
	return true
}

func (l *lexer) scanString() token {
	l.reset()
	for {
		c := l.get()
		switch {
		case c == eof:
			l.errMsg = "invalid string: missing closing quote"
			return tParseError
		case c == '"':
			return tString
		case c == '\\':
			if !l.escape() {
				return tParseError
			}
		case c <= 0x1F:
			l.errMsg = controlMessage(c)
			return tParseError
		case c <= 0x7F:
			l.buf = append(l.buf, byte(c))
		case c >= 0xC2 && c <= 0xDF:
			if !l.inRange(0x80, 0xBF) {
				return tParseError
			}
		case c == 0xE0:
			if !l.inRange(0xA0, 0xBF, 0x80, 0xBF) {
				return tParseError
			}
		case (c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF:
			if !l.inRange(0x80, 0xBF, 0x80, 0xBF) {
				return tParseError
			}
		case c == 0xED:
			if !l.inRange(0x80, 0x9F, 0x80, 0xBF) {
				return tParseError
			}
		case c == 0xF0:
			if !l.inRange(0x90, 0xBF, 0x80, 0xBF, 0x80, 0xBF) {
				return tParseError
			}
		case c >= 0xF1 && c <= 0xF3:
			if !l.inRange(0x80, 0xBF, 0x80, 0xBF, 0x80, 0xBF) {
				return tParseError
			}
		case c == 0xF4:
			if !l.inRange(0x80, 0x8F, 0x80, 0xBF, 0x80, 0xBF) {
				return tParseError
			}
		default:
			l.errMsg = "invalid string: ill-formed UTF-8 byte"
			return tParseError
		}
	}
}

func controlMessage(c int) string {
	m := fmt.Sprintf("invalid string: control character U+%04X (%s) must be escaped to \\u%04X", c, controlNames[c], c)
	switch c {
	case 0x08:
		m += ` or \b`
	case 0x09:
		m += ` or \t`
	case 0x0A:
		m += ` or \n`
	case 0x0C:
		m += ` or \f`
	case 0x0D:
		m += ` or \r`
	}
	return m
}

func (l *lexer) escape() bool {
	switch l.get() {
	case '"':
		l.buf = append(l.buf, '"')
	case '\\':
		l.buf = append(l.buf, '\\')
	case '/':
		l.buf = append(l.buf, '/')
	case 'b':
		l.buf = append(l.buf, '\b')
	case 'f':
		l.buf = append(l.buf, '\f')
	case 'n':
		l.buf = append(l.buf, '\n')
	case 'r':
		l.buf = append(l.buf, '\r')
	case 't':
		l.buf = append(l.buf, '\t')
	case 'u':
		cp1 := l.codepoint()
		cp := cp1
		if cp1 == -1 {
			l.errMsg = `invalid string: '\u' must be followed by 4 hex digits`
			return false
		}
		if 0xD800 <= cp1 && cp1 <= 0xDBFF {
			if !(l.get() == '\\' && l.get() == 'u') {
				l.errMsg = "invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"
				return false
			}
			cp2 := l.codepoint()
			if cp2 == -1 {
				l.errMsg = `invalid string: '\u' must be followed by 4 hex digits`
				return false
			}
			if !(0xDC00 <= cp2 && cp2 <= 0xDFFF) {
				l.errMsg = "invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"
				return false
			}
			cp = cp1<<10 + cp2 - 0x35FDC00
		} else if 0xDC00 <= cp1 && cp1 <= 0xDFFF {
			l.errMsg = "invalid string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"
			return false
		}
		switch {
		case cp < 0x80:
			l.buf = append(l.buf, byte(cp))
		case cp <= 0x7FF:
			l.buf = append(l.buf, byte(0xC0|cp>>6), byte(0x80|cp&0x3F))
		case cp <= 0xFFFF:
			l.buf = append(l.buf, byte(0xE0|cp>>12), byte(0x80|(cp>>6)&0x3F), byte(0x80|cp&0x3F))
		default:
			l.buf = append(l.buf, byte(0xF0|cp>>18), byte(0x80|(cp>>12)&0x3F), byte(0x80|(cp>>6)&0x3F), byte(0x80|cp&0x3F))
		}
	default:
		l.errMsg = "invalid string: forbidden character after backslash"
		return false
	}
	return true
}

func isDigit(c int) bool { return c >= '0' && c <= '9' }

// scanNumber is nlohmann's number automaton; the value is read as
// strtoull, strtoll or strtod would read the token.
func (l *lexer) scanNumber() token {
	l.reset()
	kind := tUnsigned
	c := l.current
	l.buf = append(l.buf, byte(c))
	state := "any1"
	switch {
	case c == '-':
		kind = tInteger
		c = l.get()
		switch {
		case c == '0':
			l.buf = append(l.buf, '0')
			state = "zero"
		case isDigit(c):
			l.buf = append(l.buf, byte(c))
		default:
			l.errMsg = "invalid number; expected digit after '-'"
			return tParseError
		}
	case c == '0':
		state = "zero"
	}
	for state != "done" {
		c = l.get()
		switch state {
		case "zero", "any1", "decimal2":
			switch {
			case isDigit(c) && state != "zero":
				l.buf = append(l.buf, byte(c))
			case c == '.' && state != "decimal2":
				l.buf = append(l.buf, '.')
				kind = tFloat
				if c = l.get(); !isDigit(c) {
					l.errMsg = "invalid number; expected digit after '.'"
					return tParseError
				}
				l.buf = append(l.buf, byte(c))
				state = "decimal2"
			case c == 'e' || c == 'E':
				l.buf = append(l.buf, byte(c))
				kind = tFloat
				c = l.get()
				switch {
				case c == '+' || c == '-':
					l.buf = append(l.buf, byte(c))
					if c = l.get(); !isDigit(c) {
						l.errMsg = "invalid number; expected digit after exponent sign"
						return tParseError
					}
				case isDigit(c):
				default:
					l.errMsg = "invalid number; expected '+', '-', or digit after exponent"
					return tParseError
				}
				l.buf = append(l.buf, byte(c))
				state = "any2"
			default:
				state = "done"
			}
		case "any2":
			if isDigit(c) {
				l.buf = append(l.buf, byte(c))
			} else {
				state = "done"
			}
		}
	}
	l.unget()
	s := string(l.buf)
	switch kind {
	case tUnsigned:
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			l.vUint = u
			return tUnsigned
		}
	case tInteger:
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			l.vInt = i
			return tInteger
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		f = 0 // not reached: the automaton accepted a float's syntax
	}
	l.vFloat = f
	return tFloat
}

type parser struct {
	lx   lexer
	last token
}

func (p *parser) next() token {
	p.last = p.lx.scan()
	return p.last
}

func (p *parser) fail(expected token, context string) *SyntaxError {
	msg := "syntax error "
	if context != "" {
		msg += "while parsing " + context + " "
	}
	msg += "- "
	if p.last == tParseError {
		msg += p.lx.errMsg + "; last read: '" + p.lx.lastRead() + "'"
	} else {
		msg += "unexpected " + p.last.name()
	}
	if expected != tUninitialized {
		msg += "; expected " + expected.name()
	}
	return p.errorf(msg)
}

func (p *parser) errorf(msg string) *SyntaxError {
	return &SyntaxError{ID: 101, Offset: int64(p.lx.total), Line: p.lx.lines + 1, Column: p.lx.lineChars, Msg: msg}
}

// frame is an array or an object under construction.
type frame struct {
	v   Value
	key string // the object's key whose value comes next
}

func (p *parser) parse() (Value, error) {
	p.next()
	v, err := p.value()
	if err != nil {
		return Value{}, err
	}
	if p.next() != tEnd {
		return Value{}, p.fail(tEnd, "value")
	}
	return v, nil
}

// value reads the value whose first token is p.last, iteratively, as
// nlohmann's sax_parse_internal does.
func (p *parser) value() (Value, error) {
	var stack []*frame
	for {
		var v Value
		done := true // v is a whole value
		switch p.last {
		case tBeginObject:
			if p.next() == tEndObject {
				v = Value{kind: Object, obj: &members{}}
				break
			}
			if p.last != tString {
				return Value{}, p.fail(tString, "object key")
			}
			key := string(p.lx.buf)
			if p.next() != tNameSep {
				return Value{}, p.fail(tNameSep, "object separator")
			}
			stack = append(stack, &frame{v: Value{kind: Object, obj: &members{}}, key: key})
			p.next()
			done = false
		case tBeginArray:
			if p.next() == tEndArray {
				v = Value{kind: Array, arr: []Value{}}
				break
			}
			stack = append(stack, &frame{v: Value{kind: Array, arr: []Value{}}})
			done = false
		case tFloat:
			if math.IsInf(p.lx.vFloat, 0) || math.IsNaN(p.lx.vFloat) {
				return Value{}, &SyntaxError{ID: 406, Offset: int64(p.lx.total), Line: p.lx.lines + 1, Column: p.lx.lineChars,
					Msg: "number overflow parsing '" + p.lx.lastRead() + "'"}
			}
			v = FloatValue(p.lx.vFloat)
		case tFalse:
			v = BoolValue(false)
		case tTrue:
			v = BoolValue(true)
		case tNull:
			v = Value{}
		case tInteger:
			v = IntValue(p.lx.vInt)
		case tUnsigned:
			v = UintValue(p.lx.vUint)
		case tString:
			v = StringValue(string(p.lx.buf))
		case tParseError:
			return Value{}, p.fail(tUninitialized, "value")
		case tEnd:
			if p.lx.total == 1 {
				return Value{}, p.errorf("attempting to parse an empty input; check that your input string or stream contains the expected JSON")
			}
			return Value{}, p.fail(tLiteralOrValue, "value")
		default:
			return Value{}, p.fail(tLiteralOrValue, "value")
		}
		if len(stack) > MaxDepth {
			return Value{}, p.errorf(fmt.Sprintf("nesting deeper than %d levels", MaxDepth))
		}
		if !done {
			continue
		}
		// v is whole: give it to its container, and close the containers
		// that end after it
		for {
			if len(stack) == 0 {
				return v, nil
			}
			top := stack[len(stack)-1]
			if top.v.kind == Array {
				top.v.arr = append(top.v.arr, v)
				if p.next() == tValueSep {
					p.next()
					break
				}
				if p.last != tEndArray {
					return Value{}, p.fail(tEndArray, "array")
				}
			} else {
				top.v.Set(top.key, v)
				if p.next() == tValueSep {
					if p.next() != tString {
						return Value{}, p.fail(tString, "object key")
					}
					top.key = string(p.lx.buf)
					if p.next() != tNameSep {
						return Value{}, p.fail(tNameSep, "object separator")
					}
					p.next()
					break
				}
				if p.last != tEndObject {
					return Value{}, p.fail(tEndObject, "object")
				}
			}
			stack = stack[:len(stack)-1]
			v = top.v
		}
	}
}
