package jinja

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/chat/internal/chattest"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

// ours renders a request as the oracle program does, with this package.
func ours(q renderReq) renderRes {
	t, err := Parse("test", q.tmpl)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return renderRes{out: e.Msg}
		}
		return renderRes{out: err.Error()}
	}
	c := &Context{Now: time.Unix(q.now, 0).In(q.loc)}
	if q.preserve != "" {
		c.PreserveReasoning(q.preserve == "1")
	}
	if q.effort != "" {
		c.ReasoningEffort(q.effort[1:])
	}
	vars, err := ojson.ParseString(q.vars)
	if err != nil {
		return renderRes{out: "bad vars: " + err.Error()}
	}
	if err := c.SetJSON(vars, q.mark); err != nil {
		return renderRes{out: err.(*Error).Msg}
	}
	src := t.source
	switch q.mode {
	case "orig":
		src = q.tmpl
	case "none":
		src = ""
	}
	r := &renderer{src: src, now: c.now()}
	parts, err := t.run(r, c.scope())
	if err != nil {
		return renderRes{out: err.(*Error).Msg}
	}
	return renderRes{ok: true, out: jstr{parts: parts}.str(), parts: encodeParts(parts)}
}

// pinCase is one test_template call of the pin's tests/test-jinja.cpp, or
// one of its caps templates (kind "caps").
type pinCase struct {
	kind, name, tmpl, vars, expect string
}

const emitter = `
#include <cstdio>
static FILE * g_cases = nullptr;
static void emit_field(const std::string & s) {
    if (!g_cases) {
        g_cases = std::fopen(std::getenv("JINJA_CASES"), "wb");
    }
    std::fprintf(g_cases, "%zu\n", s.size());
    std::fwrite(s.data(), 1, s.size(), g_cases);
    std::fflush(g_cases);
}
static void emit_case(const std::string & kind, const std::string & name, const std::string & tmpl, const std::string & vars, const std::string & expect) {
    emit_field(kind); emit_field(name); emit_field(tmpl); emit_field(vars); emit_field(expect);
}
`

// pinCases builds the pin's tests/test-jinja.cpp with a line added where
// it renders a case, runs it, and returns the cases it rendered: a new
// pin's tests come along by themselves.
func pinCases(t *testing.T) []pinCase {
	t.Helper()
	src := testenv.SourceTree(t)
	b, err := os.ReadFile(filepath.Join(src, "tests", "test-jinja.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	code := string(b)
	patch := func(anchor, insert string, before bool) {
		if strings.Count(code, anchor) != 1 {
			t.Fatalf("test-jinja.cpp: the anchor %q is not there once: the pin's test changed, update pinCases", anchor)
		}
		if before {
			code = strings.Replace(code, anchor, insert+anchor, 1)
		} else {
			code = strings.Replace(code, anchor, anchor+insert, 1)
		}
	}
	patch(`#include "testing.h"`+"\n", emitter, false)
	patch("static void test_template(testing & t, const std::string & name, const std::string & tmpl, const json & vars, const std::string & expect) {\n",
		`    emit_case("render", name, tmpl, vars.dump(), expect);`+"\n", false)
	patch("        return jinja::caps_get(prog);", `        emit_case("caps", "", tmpl, "", "");`+"\n", true)
	dir := t.TempDir()
	patched := filepath.Join(dir, "test-jinja.cpp")
	if err := os.WriteFile(patched, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := cxx.Build(t, "test-jinja-cases", []string{patched}, "-I", filepath.Join(src, "tests"))
	out := filepath.Join(dir, "cases")
	cmd := cxx.Command(t, bin)
	cmd.Env = append(cmd.Env, "JINJA_CASES="+out)
	log, err := cmd.CombinedOutput()
	if err != nil {
		// the pin's own failures are its own: the cases are what counts
		t.Logf("test-jinja exited with %v", err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatalf("test-jinja wrote no cases: %v\n%s", err, log)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var cases []pinCase
	for {
		var fs [5]string
		for i := range fs {
			s, err := chattest.ReadField(r)
			if err != nil {
				if i == 0 {
					return cases
				}
				t.Fatalf("cases file: %v", err)
			}
			fs[i] = s
		}
		cases = append(cases, pinCase{fs[0], fs[1], fs[2], fs[3], fs[4]})
	}
}

// Every case of the pin's test-jinja.cpp renders here as the pin renders
// it (and as the case expects, where the pin passes it).
func TestPinJinjaCases(t *testing.T) {
	cases := pinCases(t)
	o := startOracle(t, "render", zoneUTC)
	oc := startOracle(t, "caps", zoneUTC)
	var n, caps, skipped, asExpected int
	for _, c := range cases {
		if c.kind == "caps" {
			caps++
			want := oc.call(2, c.tmpl)
			tmpl, err := Parse("caps", c.tmpl)
			if err != nil {
				t.Errorf("caps template %q: %v", c.tmpl, err)
				continue
			}
			got, err := tmpl.Caps()
			if err != nil || capsJSON(got) != want[1] {
				t.Errorf("caps of %q: ours %s (%v), the pin's %s", c.tmpl, capsJSON(got), err, want[1])
			}
			continue
		}
		n++
		q := renderReq{tmpl: c.tmpl, vars: c.vars, now: 1700000000, loc: o.loc, mode: "orig", mark: true}
		want := o.render(q)
		got := ours(q)
		if got != want {
			t.Errorf("%s: template %q vars %s\n ours: %v %q\n  pin: %v %q", c.name, c.tmpl, c.vars, got.ok, got.out, want.ok, want.out)
			continue
		}
		if !want.ok && strings.HasPrefix(want.out, "NotImplemented: ") {
			skipped++ // the pin skips it too
			continue
		}
		if want.ok && want.out != c.expect {
			t.Logf("%s: the pin renders %q where its test expects %q (so do we)", c.name, want.out, c.expect)
		} else if want.ok {
			asExpected++
		}
	}
	if n < 250 || caps < 3 {
		t.Fatalf("only %d render cases and %d caps cases came from test-jinja.cpp", n, caps)
	}
	// the oracle is the pin's engine: it gives what the pin's test expects
	if asExpected+skipped < n*9/10 {
		t.Errorf("the oracle rendered only %d of %d cases as test-jinja.cpp expects", asExpected, n)
	}
	t.Logf("%d render cases (%d NotImplemented in both), %d caps cases", n, skipped, caps)
}

// capsJSON writes caps as the oracle does: to_map's keys, sorted.
func capsJSON(c Caps) string {
	m := c.Map()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	o := ojson.ObjectValue()
	for _, k := range keys {
		o.Set(k, ojson.BoolValue(m[k]))
	}
	return o.DumpSafe(-1)
}
