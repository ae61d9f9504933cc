package legacy

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/chat/internal/chattest"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func oracleBin(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs("testdata/oracle.cpp")
	if err != nil {
		t.Fatal(err)
	}
	return cxx.Build(t, "legacy-oracle", []string{src})
}

// oracle runs testdata/oracle.cpp: libllama's llama_chat_apply_template.
type oracle struct {
	t   *testing.T
	in  interface{ Write([]byte) (int, error) }
	out *bufio.Reader
}

func startOracle(t *testing.T) *oracle {
	t.Helper()
	cmd := cxx.Command(t, oracleBin(t), "apply")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	return &oracle{t: t, in: in, out: bufio.NewReader(out)}
}

// apply is llama_chat_apply_template's result code and output.
func (o *oracle) apply(tmpl string, chat []Message, add bool) (int, string) {
	o.t.Helper()
	msgs := ojson.ArrayValue()
	for _, m := range chat {
		msgs.Append(ojson.ArrayValue(ojson.StringValue(m.Role), ojson.StringValue(m.Content)))
	}
	a := "0"
	if add {
		a = "1"
	}
	if err := chattest.WriteFields(o.in, tmpl, msgs.DumpSafe(-1), a); err != nil {
		o.t.Fatal(err)
	}
	code, err := chattest.ReadField(o.out)
	if err != nil {
		o.t.Fatalf("oracle: %v", err)
	}
	out, err := chattest.ReadField(o.out)
	if err != nil {
		o.t.Fatalf("oracle: %v", err)
	}
	n, _ := strconv.Atoi(code)
	return n, out
}

// ours answers as the oracle does: the output's length, or -1.
func ours(tmpl string, chat []Message, add bool) (int, string) {
	out, ok := Apply(tmpl, chat, add)
	if !ok {
		return -1, ""
	}
	return len(out), out
}

func conversations(base []chattest.Message) [][]Message {
	var conv []Message
	for _, m := range base {
		conv = append(conv, Message{m.Role, m.Content})
	}
	return [][]Message{
		conv,
		nil,
		{{"user", "Hi"}},
		{{"system", "  sys  "}, {"user", " u "}, {"tool", "t"}, {"assistant_tool_call", "[]"}, {"tool_response", "r"}, {"function", "f"}},
		{{"assistant", "first"}, {"user", "é中😀 <|im_end|>"}, {"", "empty role"}, {"ünïcode", "x"}},
		{{"user", "cut\x00here"}, {"sys\x00tem", "role cut"}, {"assistant", "\t\n  spaced \n\t"}},
		{{"system", "a"}, {"system", "b"}, {"user", "c"}, {"user", "d"}, {"assistant", "e"}, {"assistant", "f"}},
	}
}

// Every built-in template and every template of the pin's
// models/templates formats the pin's test conversation (and others) as
// libllama's llama_chat_apply_template does, detection included.
func TestApplyAgainstLibllama(t *testing.T) {
	base, cases := chattest.TemplateCases(t)
	o := startOracle(t)
	var tmpls []string
	tmpls = append(tmpls, Names()...)
	files, err := filepath.Glob(filepath.Join(testenv.SourceTree(t), "models", "templates", "*.jinja"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tmpls = append(tmpls, string(b))
	}
	for _, c := range cases {
		tmpls = append(tmpls, c.Template)
	}
	tmpls = append(tmpls, "", "INVALID TEMPLATE", "mistral", "mistral-v7x", "chatml\x00junk", "[INST]", "<|im_start|><|im_sep|>")
	var n, supported int
	for _, tmpl := range tmpls {
		for _, conv := range conversations(base) {
			for _, add := range []bool{true, false} {
				wn, wout := o.apply(tmpl, conv, add)
				gn, gout := ours(tmpl, conv, add)
				n++
				if wn != gn || wout != gout {
					t.Errorf("template %.60q, %d messages, add %v:\n ours: %d %q\n  pin: %d %q", tmpl, len(conv), add, gn, gout, wn, wout)
					continue
				}
				if wn >= 0 {
					supported++
				}
			}
		}
	}
	if supported < n/2 {
		t.Errorf("only %d of %d applied", supported, n)
	}
	t.Logf("%d templates x %d conversations x 2: %d applied alike, %d unsupported alike", len(tmpls), len(conversations(base)), supported, n-supported)
}

// The cases of the pin's test-chat-template.cpp give what they expect.
func TestPinTemplateCases(t *testing.T) {
	base, cases := chattest.TemplateCases(t)
	for _, c := range cases {
		var conv []Message
		for _, m := range append(append([]chattest.Message(nil), base...), c.ExtraConversation...) {
			conv = append(conv, Message{m.Role, m.Content})
		}
		out, ok := Apply(c.Template, conv, true)
		if !ok || out != c.Expected {
			t.Errorf("%s:\n ours: %v %q\n want: %q", c.Name, ok, out, c.Expected)
		}
	}
	// negative control: an unknown template is refused, as the pin's test
	// asserts
	if _, ok := Apply("INVALID TEMPLATE", nil, true); ok {
		t.Error("an invalid template was applied")
	}
}

// Names are llama_chat_builtin_templates', in its order.
func TestNamesAgainstLibllama(t *testing.T) {
	out, err := cxx.Command(t, oracleBin(t), "names").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(out))
	got := Names()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("names:\n ours %v\n  pin %v", got, want)
	}
	if !sort.StringsAreSorted(got) {
		t.Fatal("names are not sorted")
	}
	for _, n := range got {
		if d := Detect(n); d == Unknown {
			t.Errorf("Detect(%q) is Unknown", n)
		}
	}
}
