package ojson

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

// oracle runs the pin's nlohmann json (testdata/nlohmann.cpp) over the
// records and returns its answers.
func oracle(t *testing.T, records [][2]string) []string {
	t.Helper()
	src, err := filepath.Abs("testdata/nlohmann.cpp")
	if err != nil {
		t.Fatal(err)
	}
	bin := cxx.Build(t, "ojson-nlohmann", []string{src})
	var in bytes.Buffer
	for _, r := range records {
		fmt.Fprintf(&in, "%s%d\n%s", r[0], len(r[1]), r[1])
	}
	cmd := cxx.Command(t, bin)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nlohmann oracle: %v", err)
	}
	answers := strings.Split(string(out), "\n\x1e\n")
	if len(answers) != len(records)+1 {
		t.Fatalf("nlohmann oracle: %d answers to %d records", len(answers)-1, len(records))
	}
	return answers[:len(records)]
}

// ours answers a record as the oracle program does.
func ours(kind, data string) string {
	switch kind {
	case "p":
		v, err := ParseString(data)
		if err != nil {
			return "ERR\n" + err.Error()
		}
		a, err1 := v.Dump(-1)
		b, err2 := v.Dump(2)
		c, err3 := v.Dump(0)
		if err1 != nil || err2 != nil || err3 != nil {
			return fmt.Sprintf("dump failed: %v %v %v", err1, err2, err3)
		}
		return "OK\n" + a + "\n" + b + "\n" + c
	case "s":
		v := StringValue(data)
		out, err := v.Dump(-1)
		if err != nil {
			out = "ERR " + err.Error()
		}
		ascii, _ := v.DumpWith(DumpOptions{Indent: -1, EnsureASCII: true, Replace: true})
		return out + "\n" + v.DumpSafe(-1) + "\n" + ascii
	case "f":
		var bits uint64
		fmt.Sscanf(data, "%x", &bits)
		return FloatValue(math.Float64frombits(bits)).DumpSafe(-1)
	}
	return "?"
}

var parseCases = []string{
	``, ` `, `null`, `true`, `false`, `tru`, `nul`, `[`, `]`, `{`, `}`, `[1,2,3]`, `[1,2,]`, `[,]`,
	`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, `{"b":1,"a":2,"b":3}`, `{"a" 1}`, `{"a":1,}`, `{1:2}`,
	`0`, `-0`, `-`, `01`, `1.`, `1.5`, `-1.5e10`, `1e`, `1e+`, `1E-5`, `1e400`, `-1e400`, `1e-400`,
	`18446744073709551615`, `18446744073709551616`, `-9223372036854775808`, `-9223372036854775809`,
	`9223372036854775807`, `123456789012345678901234567890`, `0.1`, `100000000000000000000.0`,
	`"abc"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\ude00"`,
	`"\u12"`, `"\x"`, "\"a\x01b\"", "\"tab\there\"", `"unterminated`, "\"\xc3\xa9\"", "\"\xc3\"", "\"\xff\"",
	"\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\xef\xbb\xbf[1]", "\xef\xbb[1]", "[1]\x00garbage", "\x00",
	"  \n [\n 1 ,\n x ]", "[1]\n\n2", "[\"a\",\n  tru]", `{"a":{"b":{"c":[[[]]]}}}`, `[{}, [], "", 0.0, -0.0]`,
	`[1e2, 1E2, 1.0e+2, 2.5e-3, 123.456, 1.7976931348623157e308, 5e-324, 2.2250738585072014e-308]`,
	`{"":""}`, `"\u0000"`, `["\u001f\u007f\u0080"]`, `/* c */ 1`, `[1 2]`, `{"a":1 "b":2}`, `[1}`, `{"a":1]`,
}

func TestParseAndDumpMatchNlohmann(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var records [][2]string
	for _, c := range parseCases {
		records = append(records, [2]string{"p", c})
	}
	// mutations of the valid cases: bytes dropped, doubled, replaced
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		records = append(records, [2]string{"p", mutate(rng, randomJSON(rng, 3))})
	}
	for _, s := range []string{"", "plain", "é中😀", "\x00\x01\x1f\x7f", "a\"b\\c/", "\xc3", "\xc3(", "a\xffb", "\xe2\x82", "\xe2\x82\xac\xe2",
		"\xed\xa0\x80", "\xf0\x9f\x98", "\xf0\x9f\x98\x80\x80", "\xc0\xaf", "\xe0\x80\xaf", "\xf5\x80\x80\x80"} {
		records = append(records, [2]string{"s", s})
	}
	for i := 0; i < n; i++ {
		records = append(records, [2]string{"s", randomBytes(rng)})
	}
	floats := []float64{0, 1, -1, 0.1, 0.5, 1.5, 100, 1e15, 1e16, 1e17, 123456789012345, 1234567890123456, 1e-4, 1e-5, 0.00012,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 2.2250738585072014e-308, 1.0 / 3, 2.0 / 3, 5e-324, 9007199254740993, 1e21, 1e22, 1e23}
	for i := 0; i < n; i++ {
		switch i % 3 {
		case 0:
			floats = append(floats, math.Float64frombits(rng.Uint64()))
		case 1:
			floats = append(floats, float64(rng.Int64N(1<<53))*math.Pow(10, float64(rng.IntN(40)-20)))
		default:
			floats = append(floats, rng.Float64()*math.Pow(2, float64(rng.IntN(200)-100)))
		}
	}
	for _, f := range floats {
		records = append(records, [2]string{"f", fmt.Sprintf("%016x", math.Float64bits(f))})
		records = append(records, [2]string{"f", fmt.Sprintf("%016x", math.Float64bits(-f))})
	}
	want := oracle(t, records)
	bad := 0
	for i, r := range records {
		if got := ours(r[0], r[1]); got != want[i] {
			bad++
			if bad <= 10 {
				t.Errorf("%s %q:\nours     %q\nnlohmann %q", r[0], r[1], got, want[i])
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d records differ from nlohmann's", bad, len(records))
	}
	t.Logf("%d records, all nlohmann's", len(records))
}

// The comparison can fail: answers of a different record differ.
func TestOracleNegativeControl(t *testing.T) {
	want := oracle(t, [][2]string{{"p", `{"b":1,"a":2}`}, {"f", fmt.Sprintf("%016x", math.Float64bits(0.1))}})
	if ours("p", `{"a":2,"b":1}`) == want[0] || ours("f", fmt.Sprintf("%016x", math.Float64bits(0.2))) == want[1] {
		t.Fatal("different inputs gave nlohmann's answers")
	}
	if ours("p", `{"b":1,"a":2}`) != want[0] {
		t.Fatalf("ours %q, nlohmann %q", ours("p", `{"b":1,"a":2}`), want[0])
	}
}

func randomJSON(rng *rand.Rand, depth int) string {
	k := rng.IntN(9)
	if depth == 0 && k >= 7 {
		k = rng.IntN(7)
	}
	switch k {
	case 0:
		return "null"
	case 1:
		return []string{"true", "false"}[rng.IntN(2)]
	case 2:
		return fmt.Sprint(rng.Int64N(2000) - 1000)
	case 3:
		return fmt.Sprint(rng.Uint64())
	case 4:
		return fmt.Sprintf("%g", rng.NormFloat64()*math.Pow(10, float64(rng.IntN(30)-15)))
	case 5, 6:
		return ojsonString(randomBytes(rng))
	case 7:
		var parts []string
		for i := rng.IntN(4); i > 0; i-- {
			parts = append(parts, randomJSON(rng, depth-1))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		var parts []string
		for i := rng.IntN(4); i > 0; i-- {
			parts = append(parts, ojsonString(string(rune('a'+rng.IntN(4))))+":"+randomJSON(rng, depth-1))
		}
		return "{" + strings.Join(parts, ",\n") + "}"
	}
}

// ojsonString quotes s as JSON text, escaping what must be escaped and,
// at random, what may be.
func ojsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, "\\u%04x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func randomBytes(rng *rand.Rand) string {
	pieces := []string{"a", "Z", " ", "\n", "\t", "\"", "\\", "é", "中", "😀", "\x00", "\x1f", "\x7f", "\xc3", "\xa9", "\xff", "\xed\xa0", "\xf0\x9f", "\x80"}
	var b strings.Builder
	for i := rng.IntN(8); i > 0; i-- {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

func mutate(rng *rand.Rand, s string) string {
	b := []byte(s)
	for i := rng.IntN(3); i > 0 && len(b) > 0; i-- {
		j := rng.IntN(len(b))
		switch rng.IntN(4) {
		case 0:
			b = append(b[:j], b[j+1:]...)
		case 1:
			b = append(b[:j+1], b[j:]...)
		case 2:
			const alphabet = "{}[],:\"\\ 0e.-tnf\x00"
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
	}
	return string(b)
}

func TestMain(m *testing.M) { testenv.Main(m) }
