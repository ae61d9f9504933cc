package chat

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/chat/internal/chattest"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

// The pin's own test conversations: its tests/test-chat.cpp, built with
// every common_chat_templates_apply and common_chat_peg_parse it makes
// recorded (the inputs, the template's source, and what the pin gave), so
// that a new pin brings its new cases along.

// recordedApply is one common_chat_templates_apply of test-chat.cpp.
type recordedApply struct {
	src string
	in  Inputs
	out applyResult
}

// recordedParse is one common_chat_peg_parse of test-chat.cpp, with the
// apply whose params it parses with.
type recordedParse struct {
	apply     int
	input     string
	partial   bool
	genPrompt string
	format    Format
	out       result
}

type pinRecord struct {
	applies []recordedApply
	parses  []recordedParse
}

const recorder = `
#include "chatio.hpp"
#include <map>
static FILE * g_rec = nullptr;
static std::map<const common_chat_templates *, std::string> g_srcs;
static int g_apply = -1;
static FILE * rec_out() {
    if (!g_rec) {
        g_rec = std::fopen(std::getenv("CHAT_RECORD"), "wb");
    }
    return g_rec;
}
static common_chat_templates_ptr rec_init(const struct llama_model * model, const std::string & src,
                                          const std::string & bos = "", const std::string & eos = "") {
    auto t = common_chat_templates_init(model, src, bos, eos);
    g_srcs[t.get()] = src;
    return t;
}
static common_chat_params rec_apply(const common_chat_templates * t, const common_chat_templates_inputs & in) {
    FILE * f = rec_out();
    chatio_write(f, "apply");
    chatio_write(f, g_srcs.count(t) ? g_srcs[t] : std::string());
    chatio_write(f, chatio_inputs_to_json(in).dump());
    g_apply++;
    try {
        auto p = common_chat_templates_apply(t, in);
        chatio_write(f, "ok");
        chatio_write_params(f, p);
        std::fflush(f);
        return p;
    } catch (const std::exception & e) {
        chatio_write(f, "err");
        chatio_write(f, e.what());
        std::fflush(f);
        throw;
    }
}
static common_chat_msg rec_peg_parse(const common_peg_arena & a, const std::string & input, bool partial,
                                     const common_chat_parser_params & pp) {
    FILE * f = rec_out();
    chatio_write(f, "parse");
    chatio_write(f, std::to_string(g_apply));
    chatio_write(f, input);
    chatio_write(f, partial ? "1" : "0");
    chatio_write(f, pp.generation_prompt);
    chatio_write(f, std::to_string((int) pp.format));
    try {
        auto m = common_chat_peg_parse(a, input, partial, pp);
        chatio_write(f, "ok");
        chatio_write_msg(f, m);
        std::fflush(f);
        return m;
    } catch (const std::exception & e) {
        chatio_write(f, "err");
        chatio_write(f, e.what());
        std::fflush(f);
        throw;
    }
}
#define common_chat_templates_init rec_init
#define common_chat_templates_apply rec_apply
#define common_chat_peg_parse rec_peg_parse
`

var (
	pinOnce sync.Once
	pinRec  *pinRecord
	pinErr  string
)

// mtmdStubs defines the multimodal library's functions, which
// llama-server's code refers to and the pin's chat tests never call.
func mtmdStubs(t testing.TB, src, dir string) string {
	re := regexp.MustCompile(`MTMD_API[^;(]*?\b(mtmd_[a-z0-9_]+)\s*\(`)
	names := map[string]bool{}
	for _, h := range []string{"tools/mtmd/mtmd.h", "tools/mtmd/mtmd-helper.h"} {
		b, err := os.ReadFile(filepath.Join(src, h))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var b strings.Builder
	b.WriteString("#include <cstdlib>\n")
	for _, n := range sorted {
		fmt.Fprintf(&b, "extern \"C\" void %s() { std::abort(); }\n", n)
	}
	p := filepath.Join(dir, "mtmd-stubs.cpp")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// pinTestChat builds and runs the pin's test-chat.cpp with the recorder,
// once per test process, and returns what it recorded.
func pinTestChat(t *testing.T) *pinRecord {
	t.Helper()
	pinOnce.Do(func() { pinRec = recordTestChat(t) })
	if pinRec == nil {
		t.Fatal(pinErr)
	}
	return pinRec
}

func recordTestChat(t *testing.T) *pinRecord {
	src := testenv.SourceTree(t)
	b, err := os.ReadFile(filepath.Join(src, "tests", "test-chat.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	code := string(b)
	const anchor = "using json = common_json;\n"
	if strings.Count(code, anchor) != 1 {
		t.Fatalf("test-chat.cpp: the anchor %q is not there once: the pin's test changed, update pin_test.go", anchor)
	}
	code = strings.Replace(code, anchor, anchor+recorder, 1)
	dir := t.TempDir()
	patched := filepath.Join(dir, "test-chat.cpp")
	if err := os.WriteFile(patched, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	testdata, _ := filepath.Abs("testdata")
	stubs := mtmdStubs(t, src, dir)
	bin := cxx.Build(t, "test-chat-recorder", []string{patched, stubs,
		filepath.Join(src, "tools/server/server-chat.cpp"), filepath.Join(src, "tools/server/server-common.cpp")},
		"-I", filepath.Join(src, "tests"), "-I", filepath.Join(src, "tools/server"), "-I", testdata)
	out := filepath.Join(dir, "record")
	cmd := cxx.Command(t, bin)
	cmd.Dir = src // the test reads models/templates/ from there
	cmd.Env = append(cmd.Env, "CHAT_RECORD="+out, "TZ=UTC0", "CHAT_NOW="+strconv.Itoa(testNow))
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("test-chat: %v\n%s", err, tail(string(log), 3000))
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o := &oracle{t: t, out: bufio.NewReaderSize(f, 1<<20)}
	rec := &pinRecord{}
	for {
		op, err := chattest.ReadField(o.out)
		if err != nil {
			break
		}
		switch op {
		case "apply":
			var a recordedApply
			a.src = o.read()
			if a.in, err = inputsFromJSON(o.read()); err != nil {
				t.Fatal(err)
			}
			if o.read() == "ok" {
				a.out.params = o.readParams()
			} else {
				a.out.err = o.read()
			}
			rec.applies = append(rec.applies, a)
		case "parse":
			var p recordedParse
			p.apply, _ = strconv.Atoi(o.read())
			p.input = o.read()
			p.partial = o.read() == "1"
			p.genPrompt = o.read()
			p.format = Format(o.readInt())
			if o.read() == "ok" {
				p.out.msg = o.readMsg()
			} else {
				p.out.err = o.read()
			}
			rec.parses = append(rec.parses, p)
		default:
			t.Fatalf("record: unknown op %q", op)
		}
	}
	if len(rec.applies) < 500 || len(rec.parses) < 5000 {
		t.Fatalf("only %d applies and %d parses recorded from test-chat.cpp", len(rec.applies), len(rec.parses))
	}
	return rec
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Every template application and every reply parse that the pin's
// test-chat.cpp makes gives here what it gives the pin, every field.
func TestPinTestChat(t *testing.T) {
	rec := pinTestChat(t)
	var us ours
	params := make([]*Params, len(rec.applies))
	bad := 0
	for i := range rec.applies {
		a := &rec.applies[i]
		got := us.apply(&request{src: a.src, in: a.in})
		if d := diffParams(&got, &a.out); d != "" {
			bad++
			if bad <= 20 {
				t.Errorf("apply %d: %s", i, tail(d, 4000))
			}
			continue
		}
		if got.err == "" {
			p := got.params.Params
			params[i] = &p
		}
	}
	parsed := 0
	for _, p := range rec.parses {
		if p.apply < 0 || params[p.apply] == nil {
			continue
		}
		parsed++
		pp := *params[p.apply]
		pp.GenerationPrompt, pp.Format = p.genPrompt, p.format
		m, err := pp.Parse(p.input, p.partial)
		got := result{msg: m}
		if err != nil {
			got = result{err: errText(err)}
		}
		if got.err != p.out.err || !got.msg.Equal(&p.out.msg) {
			bad++
			if bad <= 40 {
				t.Errorf("parse of apply %d, %q partial %v:\n ours %+v %q\n  pin %+v %q", p.apply, p.input, p.partial,
					got.msg, got.err, p.out.msg, p.out.err)
			}
		}
	}
	t.Logf("%d applies and %d parses from test-chat.cpp (%d parses replayed), %d differ", len(rec.applies), len(rec.parses), parsed, bad)
}
