package grammar

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
)

// The pin's grammar tests are C++ (tests/test-*.cpp): their cases are
// calls such as test_grammar("desc", R"""(root ::= "a")""", {"a"}, {"b"}).
// cppCalls reads them from the source as it is, so that a new pin brings
// its own cases: a C++ lexer for literals, and a parser for the
// expressions the tests write (string literals, concatenated with + and
// with the tests' token(N), characters, integers, names, brace lists).

// cval is a C++ expression's value.
type cval struct {
	kind  byte // 's' string, 'i' integer, 'n' name, 'l' brace list
	s     string
	i     int64
	items []cval
}

func (v cval) String() string {
	switch v.kind {
	case 's':
		return strconv.Quote(v.s)
	case 'i':
		return strconv.FormatInt(v.i, 10)
	case 'n':
		return v.s
	}
	parts := make([]string, len(v.items))
	for i, it := range v.items {
		parts[i] = it.String()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

type ctok struct {
	kind byte // 's' string, 'c' char, 'i' integer, 'n' name, 'p' punctuation
	s    string
	i    int64
	line int
}

// cppLex splits C++ source into tokens, comments and preprocessor lines
// dropped.
func cppLex(src string) ([]ctok, error) {
	var toks []ctok
	line := 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#' && (i == 0 || src[i-1] == '\n'):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case strings.HasPrefix(src[i:], "//"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case strings.HasPrefix(src[i:], "/*"):
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("line %d: unterminated comment", line)
			}
			line += strings.Count(src[i:i+2+j], "\n")
			i += j + 4
		case c == 'R' && i+1 < len(src) && src[i+1] == '"' || strings.HasPrefix(src[i:], "u8R\""):
			if c == 'u' {
				i += 2
			}
			open := strings.IndexByte(src[i+2:], '(')
			if open < 0 {
				return nil, fmt.Errorf("line %d: bad raw string", line)
			}
			delim := src[i+2 : i+2+open]
			body := i + 2 + open + 1
			end := strings.Index(src[body:], ")"+delim+`"`)
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated raw string", line)
			}
			s := src[body : body+end]
			toks = append(toks, ctok{kind: 's', s: s, line: line})
			line += strings.Count(s, "\n")
			i = body + end + len(delim) + 2
		case c == '"' || c == '\'' || strings.HasPrefix(src[i:], "u8\""):
			if c == 'u' {
				i += 2
				c = '"'
			}
			s, n, err := cppQuoted(src[i:], c)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", line, err)
			}
			if c == '"' {
				toks = append(toks, ctok{kind: 's', s: s, line: line})
			} else {
				var v int64
				for _, b := range []byte(s) { // a multi-byte character: its bytes, as a char's value
					v = v<<8 | int64(int8(b))
				}
				if len(s) == 1 {
					v = int64(int8(s[0]))
				}
				toks = append(toks, ctok{kind: 'c', i: v, line: line})
			}
			i += n
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z') {
				j++
			}
			lit := strings.TrimRight(src[i:j], "uUlL")
			v, err := strconv.ParseInt(lit, 0, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: number %q", line, src[i:j])
			}
			toks = append(toks, ctok{kind: 'i', i: v, line: line})
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] == ':' && j+1 < len(src) && src[j+1] == ':' || j > i && src[j-1] == ':' && src[j] == ':' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			toks = append(toks, ctok{kind: 'n', s: src[i:j], line: line})
			i = j
		default:
			toks = append(toks, ctok{kind: 'p', s: string(c), line: line})
			i++
		}
	}
	return toks, nil
}

// cppQuoted reads a C++ "string" or 'c'haracter literal at the start of
// s: its bytes and the length it took.
func cppQuoted(s string, q byte) (string, int, error) {
	var b []byte
	for i := 1; i < len(s); {
		c := s[i]
		switch {
		case c == q:
			return string(b), i + 1, nil
		case c == '\n':
			return "", 0, fmt.Errorf("newline in a literal")
		case c != '\\':
			b = append(b, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		e := s[i+1]
		i += 2
		switch e {
		case 'n':
			b = append(b, '\n')
		case 't':
			b = append(b, '\t')
		case 'r':
			b = append(b, '\r')
		case 'v':
			b = append(b, '\v')
		case 'f':
			b = append(b, '\f')
		case 'a':
			b = append(b, '\a')
		case 'b':
			b = append(b, '\b')
		case '\\', '\'', '"', '?':
			b = append(b, e)
		case 'x':
			j := i
			for j < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[j]) >= 0 {
				j++
			}
			v, err := strconv.ParseUint(s[i:j], 16, 64)
			if err != nil {
				return "", 0, fmt.Errorf("bad \\x escape")
			}
			b = append(b, byte(v))
			i = j
		case 'u', 'U':
			n := 4
			if e == 'U' {
				n = 8
			}
			if i+n > len(s) {
				return "", 0, fmt.Errorf("bad \\u escape")
			}
			v, err := strconv.ParseUint(s[i:i+n], 16, 32)
			if err != nil {
				return "", 0, fmt.Errorf("bad \\u escape")
			}
			b = append(b, string(rune(v))...)
			i += n
		default:
			if e >= '0' && e <= '7' {
				j := i - 1
				v := 0
				for k := 0; k < 3 && j < len(s) && s[j] >= '0' && s[j] <= '7'; k++ {
					v = v*8 + int(s[j]-'0')
					j++
				}
				b = append(b, byte(v))
				i = j
				continue
			}
			return "", 0, fmt.Errorf("unknown escape \\%c", e)
		}
	}
	return "", 0, fmt.Errorf("unterminated literal")
}

// cppParser reads expressions from tokens.
type cppParser struct {
	toks []ctok
	i    int
}

func (p *cppParser) peek(s string) bool {
	return p.i < len(p.toks) && p.toks[p.i].kind == 'p' && p.toks[p.i].s == s
}

func (p *cppParser) expect(s string) error {
	if !p.peek(s) {
		return p.errorf("want %q", s)
	}
	p.i++
	return nil
}

func (p *cppParser) errorf(format string, args ...any) error {
	line := 0
	if p.i < len(p.toks) {
		line = p.toks[p.i].line
	}
	return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))
}

// expr is term ('+' term)*: strings concatenate, token(N) is the tests'
// encoding of a token id in a string (0xff and the id's four bytes,
// big-endian).
func (p *cppParser) expr() (cval, error) {
	v, err := p.term()
	if err != nil {
		return v, err
	}
	for p.peek("+") {
		p.i++
		w, err := p.term()
		if err != nil {
			return v, err
		}
		if v.kind != 's' || w.kind != 's' {
			return v, p.errorf("+ of %c and %c", v.kind, w.kind)
		}
		v.s += w.s
	}
	return v, nil
}

func (p *cppParser) term() (cval, error) {
	if p.i >= len(p.toks) {
		return cval{}, p.errorf("unexpected end")
	}
	t := p.toks[p.i]
	switch t.kind {
	case 's':
		s := ""
		for p.i < len(p.toks) && p.toks[p.i].kind == 's' {
			s += p.toks[p.i].s
			p.i++
		}
		return cval{kind: 's', s: s}, nil
	case 'c', 'i':
		p.i++
		return cval{kind: 'i', i: t.i}, nil
	case 'n':
		p.i++
		if t.s == "std::string" && p.peek("(") { // std::string("...")
			p.i++
			v, err := p.expr()
			if err != nil {
				return v, err
			}
			return v, p.expect(")")
		}
		if !p.peek("(") {
			return cval{kind: 'n', s: t.s}, nil
		}
		p.i++
		args, err := p.list(")")
		if err != nil {
			return cval{}, err
		}
		if t.s == "token" && len(args) == 1 && args[0].kind == 'i' {
			id := uint32(args[0].i)
			return cval{kind: 's', s: string([]byte{0xff, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)})}, nil
		}
		return cval{}, p.errorf("call of %s", t.s)
	case 'p':
		switch t.s {
		case "{":
			p.i++
			items, err := p.list("}")
			return cval{kind: 'l', items: items}, err
		case "-":
			p.i++
			v, err := p.term()
			v.i = -v.i
			return v, err
		case "(":
			p.i++
			v, err := p.expr()
			if err != nil {
				return v, err
			}
			return v, p.expect(")")
		}
	}
	return cval{}, p.errorf("unexpected %q", t.s)
}

// list reads expressions separated by commas up to end (a trailing comma
// allowed).
func (p *cppParser) list(end string) ([]cval, error) {
	items := []cval{}
	for !p.peek(end) {
		v, err := p.expr()
		if err != nil {
			return nil, err
		}
		items = append(items, v)
		if !p.peek(",") {
			break
		}
		p.i++
	}
	return items, p.expect(end)
}

// cppCalls returns the arguments of every call of a function named in
// names (statements of the form name(args);), with the name first.
func cppCalls(t *testing.T, src string, names ...string) [][]cval {
	t.Helper()
	toks, err := cppLex(src)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var calls [][]cval
	for i := 0; i+1 < len(toks); i++ {
		if toks[i].kind != 'n' || !want[toks[i].s] || toks[i+1].kind != 'p' || toks[i+1].s != "(" {
			continue
		}
		// a definition (static void test(...) {) is no call
		if i > 0 && toks[i-1].kind == 'n' {
			continue
		}
		p := &cppParser{toks: toks, i: i + 2}
		args, err := p.list(")")
		if err != nil {
			t.Fatalf("%s call at line %d: %v", toks[i].s, toks[i].line, err)
		}
		calls = append(calls, append([]cval{{kind: 'n', s: toks[i].s}}, args...))
		i = p.i - 1
	}
	return calls
}

// pinTest is a test source of the pin.
func pinTest(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.SourceTree(t), "tests", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCppLexer holds the extractor to the literals the tests write.
func TestCppLexer(t *testing.T) {
	src := `// c
	f(R"""(a "b")""", "x\n\t\"\\\x41\101", 'a', '\n', -3, {1, {N, 2},}, u8"é" "z", token(258) + "q"); /* f(9) */
	static void f(int) {}
	f(std::string("s"));`
	calls := cppCalls(t, src, "f")
	if len(calls) != 2 {
		t.Fatalf("%d calls: %v", len(calls), calls)
	}
	got := fmt.Sprint(calls[0][1:])
	want := fmt.Sprint([]cval{{kind: 's', s: `a "b"`}, {kind: 's', s: "x\n\t\"\\AA"}, {kind: 'i', i: 'a'}, {kind: 'i', i: '\n'}, {kind: 'i', i: -3},
		{kind: 'l', items: []cval{{kind: 'i', i: 1}, {kind: 'l', items: []cval{{kind: 'n', s: "N"}, {kind: 'i', i: 2}}}}}, {kind: 's', s: "éz"}, {kind: 's', s: "\xff\x00\x00\x01\x02q"}})
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if calls[1][1].s != "s" {
		t.Fatalf("std::string: %v", calls[1])
	}
}
