package chat

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/chat/internal/chattest"
	"github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

// The pin's PEG and autoparser tests (tests/test-peg-parser.cpp and
// peg-parser/, test-chat-peg-parser.cpp, test-chat-auto-parser.cpp,
// test-chat-analysis.cpp), built with testdata/pegrec.cpp in place of
// libllama-common's parse, grammar and analysis functions: every call
// they make is recorded with what the pin gave, and replayed here.

// recordPin builds the pin's test from sources (relative to the source
// tree) with pegrec.cpp, runs it with args from the source tree, and
// replays what it recorded.
func recordPin(t *testing.T, name string, sources []string, args ...string) *pegReplay {
	t.Helper()
	src := testenv.SourceTree(t)
	testdata, _ := filepath.Abs("testdata")
	var abs []string
	for _, s := range sources {
		abs = append(abs, filepath.Join(src, s))
	}
	abs = append(abs, filepath.Join(testdata, "pegrec.cpp"))
	bin := cxx.Build(t, name+"-pegrec", abs, "-rdynamic", "-I", filepath.Join(src, "tests"), "-I", testdata)
	out := filepath.Join(t.TempDir(), "record")
	cmd := cxx.Command(t, bin, args...)
	cmd.Dir = src
	cmd.Env = append(cmd.Env, "PEG_RECORD="+out, "TZ=UTC0", "CHAT_NOW="+strconv.Itoa(testNow))
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, tail(string(log), 3000))
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &pegReplay{t: t, o: &oracle{t: t, out: bufio.NewReaderSize(f, 1<<20)}, strs: map[string]string{}, arenas: map[string]*peg.Arena{}}
	r.run()
	return r
}

type pegReplay struct {
	t      *testing.T
	o      *oracle
	strs   map[string]string
	arenas map[string]*peg.Arena
	counts map[string]int
	bad    int
}

func (r *pegReplay) arena(id string) *peg.Arena {
	if a, ok := r.arenas[id]; ok {
		return a
	}
	j, err := ojson.ParseString(r.strs[id])
	if err != nil {
		r.t.Fatal(err)
	}
	a, err := peg.FromJSON(j)
	if err != nil {
		r.t.Fatalf("arena %s: %v", id, err)
	}
	r.arenas[id] = a
	return a
}

func (r *pegReplay) fail(format string, args ...any) {
	r.bad++
	if r.bad <= 20 {
		r.t.Errorf(format, args...)
	}
}

func (r *pegReplay) count(kind string) {
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	r.counts[kind]++
}

// readResult reads a parse's outcome as pegrec.cpp writes it, as text to
// compare.
func (r *pegReplay) readResult() string {
	o := r.o
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s nodes", o.read(), o.read(), o.read())
	for i, n := 0, o.readInt(); i < n; i++ {
		b.WriteString(" " + o.read())
	}
	b.WriteString(" invalid")
	for i, n := 0, o.readInt(); i < n; i++ {
		b.WriteString(" " + o.read())
	}
	for i, n := 0, o.readInt(); i < n; i++ {
		fmt.Fprintf(&b, "\n%q %q %s [%s] {%s}", o.read(), o.read(), o.read(), o.read(), o.read())
	}
	return b.String()
}

// resultText is our parse's outcome as readResult writes it.
func resultText(res peg.Result, ast *peg.AST) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d %d nodes", res.Type, res.Start, res.End)
	for _, n := range res.Nodes {
		fmt.Fprintf(&b, " %d", n)
	}
	b.WriteString(" invalid")
	for _, iv := range res.Invalid {
		fmt.Fprintf(&b, " %d,%d", iv.Pos, iv.Len)
	}
	for _, n := range ast.Nodes {
		p := "0"
		if n.Partial {
			p = "1"
		}
		var ch, iv strings.Builder
		for _, c := range n.Children {
			fmt.Fprintf(&ch, "%d,", c)
		}
		for _, x := range n.Invalid {
			fmt.Fprintf(&iv, "%d:%d,", x.Pos, x.Len)
		}
		fmt.Fprintf(&b, "\n%q %q %d,%d,%s [%s] {%s}", n.Rule, n.Tag, n.Start, n.End, p, ch.String(), iv.String())
	}
	return b.String()
}

func (r *pegReplay) run() {
	o := r.o
	for {
		op, err := chattest.ReadField(o.out)
		if err != nil {
			return
		}
		switch op {
		case "S":
			id := o.read()
			r.strs[id] = o.read()
		case "parse":
			arena, input, flags, start, base := o.read(), o.read(), o.readInt(), o.readInt(), o.readInt()
			var want string
			if o.read() == "ok" {
				want = r.readResult()
			} else {
				want = "err " + o.read()
			}
			if base != 0 {
				r.count("parse (on a used context: skipped)")
				continue
			}
			r.count("parse")
			ctx := &peg.Context{Input: r.strs[input], Flags: peg.Flags(flags)}
			res, err := r.arena(arena).Parse(ctx, start)
			got := resultText(res, &ctx.AST)
			if err != nil {
				got = "err " + err.Error()
			}
			if got != want {
				r.fail("parse of %q from %d (flags %d) with %.300s:\n ours %s\n  pin %s", r.strs[input], start, flags, r.strs[arena], got, want)
			}
		case "chatparse":
			arena, input, partial, format, gen := o.read(), o.read(), o.read() == "1", Format(o.readInt()), o.read()
			var want result
			if o.read() == "ok" {
				want.msg = o.readMsg()
			} else {
				want.err = o.read()
			}
			r.count("chat parse")
			m, err := parseWith(r.arena(arena), format, gen, r.strs[input], partial)
			got := result{msg: m}
			if err != nil {
				got = result{err: errText(err)}
			}
			if got.err != want.err || !got.msg.Equal(&want.msg) {
				r.fail("chat parse of %q:\n ours %+v %q\n  pin %+v %q", r.strs[input], got.msg, got.err, want.msg, want.err)
			}
		case "grammar":
			var arenas []string
			var lazy []bool
			for i, n := 0, o.readInt(); i < n; i++ {
				arenas = append(arenas, o.read())
				lazy = append(lazy, o.read() == "1")
			}
			schema, dotall, status, text := o.read() == "1", o.read() == "1", o.read(), o.read()
			if len(arenas) != 1 || schema {
				r.count("grammar (of schemas or of no arena: skipped)")
				continue
			}
			r.count("grammar")
			a := r.arena(arenas[0])
			g, err := grammar.Build(func(b *grammar.Builder) { a.BuildGrammar(b, lazy[0]) }, grammar.BuildOptions{DotAll: dotall})
			got := "ok " + g
			if err != nil {
				got = "err " + err.Error()
			}
			if want := status + " " + text; got != want {
				r.fail("grammar of %.300s:\n ours %q\n  pin %q", r.strs[arenas[0]], got, want)
			}
		case "diffsplit":
			l, rt := o.read(), o.read()
			want := diffSplit{o.read(), o.read(), o.read(), o.read()}
			r.count("diff split")
			if got := calculateDiffSplit(l, rt); got != want {
				r.fail("calculate_diff_split(%q, %q):\n ours %+v\n  pin %+v", l, rt, got, want)
			}
		case "ucp", "acs":
			full, l, rt, want := o.read(), o.read(), o.read(), o.read()
			r.count(op)
			got := untilCommonPrefix(full, l, rt)
			if op == "acs" {
				got = afterCommonSuffix(full, l, rt)
			}
			if got != want {
				r.fail("%s(%q, %q, %q): ours %q, the pin's %q", op, full, l, rt, got, want)
			}
		case "segments":
			text := o.read()
			var want []segment
			for i, n := 0, o.readInt(); i < n; i++ {
				typ := segText
				if o.read() == "M" {
					typ = segMarker
				}
				want = append(want, segment{typ, o.read()})
			}
			r.count("segments")
			if got := segmentize(text); fmt.Sprint(got) != fmt.Sprint(want) {
				r.fail("segmentize_markers(%q):\n ours %v\n  pin %v", text, got, want)
			}
		case "mapper":
			r.count("mapper")
			r.mapper()
		case "analysis":
			src := o.read()
			fields, order, preserved, stops := o.readStrings(), o.readStrings(), o.readStrings(), o.readStrings()
			r.count("analysis")
			r.compareAnalysis(r.strs[src], fields, order, preserved, stops)
		default:
			r.t.Fatalf("record: unknown op %q", op)
		}
	}
}

// mapper replays a mapper on the AST it read.
func (r *pegReplay) mapper() {
	o := r.o
	kind := o.read()
	ast := &peg.AST{}
	for i, n := 0, o.readInt(); i < n; i++ {
		nd := peg.Node{ID: i, Rule: o.read(), Tag: o.read(), Start: o.readInt(), End: o.readInt(), Text: o.read(), Partial: o.read() == "1"}
		for j, m := 0, o.readInt(); j < m; j++ {
			nd.Children = append(nd.Children, o.readInt())
		}
		for j, m := 0, o.readInt(); j < m; j++ {
			nd.Invalid = append(nd.Invalid, peg.InvalidUTF8{Pos: o.readInt(), Len: o.readInt()})
		}
		ast.Nodes = append(ast.Nodes, nd)
	}
	var res peg.Result
	for i, n := 0, o.readInt(); i < n; i++ {
		res.Nodes = append(res.Nodes, o.readInt())
	}
	want := o.readMsg()
	got := mapAST(kind, ast, res)
	if !got.Equal(&want) {
		r.fail("%s mapper:\n ours %+v\n  pin %+v", kind, got, want)
	}
}

func (r *pegReplay) compareAnalysis(src string, fields, order, preserved, stops []string) {
	// the source as the lexer left it: a newline appended is dropped again
	tm, err := newTemplate("analysis", src+"\n", "", "")
	if err != nil {
		r.fail("analysis: %v", err)
		return
	}
	var a *autoparser
	func() {
		defer peg.Catch(&err)
		a = analyzeTemplate(tm)
	}()
	if err != nil {
		r.fail("analysis: %v", err)
		return
	}
	b := func(x bool) string {
		if x {
			return "1"
		}
		return "0"
	}
	n := strconv.Itoa
	t := &a.tools
	got := []string{a.userStart, a.assistantStart,
		n(int(a.reasoning.mode)), a.reasoning.start, a.reasoning.end,
		n(int(a.content.mode)), a.content.start, a.content.end, "0",
		n(int(t.format.mode)), t.format.sectionStart, t.format.sectionEnd, t.format.perCallStart, t.format.perCallEnd,
		b(t.format.funNameIsKey), b(t.format.arrayWrapped), b(t.format.openaiWrapperTrigger),
		t.format.functionField, t.format.nameField, t.format.argsField, t.format.idField, t.format.genIDField,
		t.function.namePrefix, t.function.nameSuffix, t.function.argsSeparator, t.function.close,
		t.arguments.start, t.arguments.end, t.arguments.namePrefix, t.arguments.nameSuffix, t.arguments.valuePrefix,
		t.arguments.valueSuffix, t.arguments.separator, b(t.arguments.tolerateIntertagWhitespace),
		n(int(t.callID.pos)), t.callID.prefix, t.callID.suffix}
	if fmt.Sprintf("%q|%q|%q|%q", got, t.format.parameterOrder, a.preservedTokens, a.additionalStops) !=
		fmt.Sprintf("%q|%q|%q|%q", fields, order, preserved, stops) {
		r.fail("analysis of %.200q:\n ours %q %q %q %q\n  pin %q %q %q %q", src, got, t.format.parameterOrder, a.preservedTokens,
			a.additionalStops, fields, order, preserved, stops)
	}
}

func (r *pegReplay) summary() string {
	var parts []string
	for k, v := range r.counts {
		parts = append(parts, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// The pin's tests/test-peg-parser.cpp and its peg-parser/ cases: every
// parse (its result and AST) and every grammar.
func TestPinPEGParser(t *testing.T) {
	r := recordPin(t, "test-peg-parser", []string{"tests/test-peg-parser.cpp", "tests/peg-parser/simple-tokenize.cpp",
		"tests/peg-parser/test-basic.cpp", "tests/peg-parser/test-gbnf-generation.cpp", "tests/peg-parser/test-json-parser.cpp",
		"tests/peg-parser/test-json-serialization.cpp", "tests/peg-parser/test-python-dict-parser.cpp", "tests/peg-parser/test-unicode.cpp"})
	t.Logf("test-peg-parser: %s; %d differ", r.summary(), r.bad)
	if r.counts["parse"] < 100 || r.counts["grammar"] < 20 {
		t.Errorf("only %s recorded", r.summary())
	}
}

// The pin's tests/test-chat-peg-parser.cpp: its parses, its chat
// parses (the mappers) and its grammars.
func TestPinChatPEGParser(t *testing.T) {
	r := recordPin(t, "test-chat-peg-parser", []string{"tests/test-chat-peg-parser.cpp", "tests/peg-parser/simple-tokenize.cpp"})
	t.Logf("test-chat-peg-parser: %s; %d differ", r.summary(), r.bad)
	if r.counts["parse"] < 300 {
		t.Errorf("only %d parses recorded", r.counts["parse"])
	}
}

// The pin's tests/test-chat-auto-parser.cpp: the analysis of each
// template it analyzes, field by field, and the diffs, segments and
// parses the analysis makes.
func TestPinAutoParser(t *testing.T) {
	r := recordPin(t, "test-chat-auto-parser", []string{"tests/test-chat-auto-parser.cpp"})
	t.Logf("test-chat-auto-parser: %s; %d differ", r.summary(), r.bad)
	if r.counts["analysis"] < 20 {
		t.Errorf("only %d analyses recorded", r.counts["analysis"])
	}
}

// The pin's tests/test-chat-analysis.cpp: the diffs of renders it
// splits and the segments it cuts, for every template its list names,
// the same in Go.
func TestPinChatAnalysis(t *testing.T) {
	r := recordPin(t, "test-chat-analysis", []string{"tests/test-chat-analysis.cpp"})
	t.Logf("test-chat-analysis: %s; %d differ", r.summary(), r.bad)
	if r.counts["diff split"] < 100 || r.counts["segments"] < 100 {
		t.Errorf("only %d diff splits and %d segmentations recorded", r.counts["diff split"], r.counts["segments"])
	}
}
