// Package chattest is test support for chat's packages: the pin's chat
// template test cases, taken from its tests/test-chat-template.cpp as it
// is (so that a new pin brings its own), and the framing the oracle
// programs speak. Only tests import it.
package chattest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

// WriteFields writes fields as "<length>\n<bytes>" each.
func WriteFields(w io.Writer, fields ...string) error {
	for _, f := range fields {
		if _, err := fmt.Fprintf(w, "%d\n%s", len(f), f); err != nil {
			return err
		}
	}
	return nil
}

// ReadField reads one field WriteFields wrote.
func ReadField(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSuffix(line, "\n"))
	if err != nil || n < 0 {
		return "", fmt.Errorf("bad field length %q", line)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// Message is a role and content, as llama_chat_message holds them.
type Message struct{ Role, Content string }

// TemplateCase is one case of main_automated_tests in the pin's
// tests/test-chat-template.cpp.
type TemplateCase struct {
	Name, Template     string
	Expected           string // llama_chat_apply_template's output
	ExpectedJinja      string // the Jinja output where it differs ("" when not)
	BOS, EOS           string
	SupportedWithJinja bool
	ExtraConversation  []Message
}

const dumper = `
    {
        FILE * out = std::fopen(std::getenv("CHAT_TEMPLATE_CASES"), "wb");
        auto field = [&](const std::string & s) {
            std::fprintf(out, "%zu\n", s.size());
            std::fwrite(s.data(), 1, s.size(), out);
        };
        auto conv = [&](const std::vector<llama_chat_message> & c) {
            json a = json::array();
            for (const auto & m : c) {
                a.push_back(json::array({ m.role, m.content }));
            }
            field(a.dump());
        };
        conv(conversation);
        for (const auto & tc : test_cases) {
            field(tc.name); field(tc.template_str); field(tc.expected_output); field(tc.expected_output_jinja);
            field(tc.bos_token); field(tc.eos_token); field(tc.supported_with_jinja ? "1" : "0");
            conv(tc.extra_conversation);
        }
        std::fclose(out);
        return 0;
    }
`

// TemplateCases builds the pin's tests/test-chat-template.cpp with its
// automated test made to write its conversation and cases out, runs it,
// and returns them.
func TemplateCases(t testing.TB) (conversation []Message, cases []TemplateCase) {
	t.Helper()
	src := testenv.SourceTree(t)
	b, err := os.ReadFile(filepath.Join(src, "tests", "test-chat-template.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	code := string(b)
	const anchor = "    std::vector<char> formatted_chat(1024);\n"
	if strings.Count(code, anchor) != 1 {
		t.Fatalf("test-chat-template.cpp: the anchor %q is not there once: the pin's test changed, update chattest", anchor)
	}
	code = strings.Replace(code, anchor, dumper+anchor, 1)
	dir := t.TempDir()
	patched := filepath.Join(dir, "test-chat-template.cpp")
	if err := os.WriteFile(patched, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := cxx.Build(t, "test-chat-template-cases", []string{patched}, "-I", filepath.Join(src, "tests"))
	out := filepath.Join(dir, "cases")
	cmd := cxx.Command(t, bin)
	cmd.Env = append(cmd.Env, "CHAT_TEMPLATE_CASES="+out)
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("test-chat-template: %v\n%s", err, log)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	conv := func() []Message {
		s, err := ReadField(r)
		if err != nil {
			t.Fatalf("test-chat-template cases: %v", err)
		}
		v, err := ojson.ParseString(s)
		if err != nil {
			t.Fatal(err)
		}
		var ms []Message
		for _, m := range v.Elems() {
			ms = append(ms, Message{m.Index(0).Str(), m.Index(1).Str()})
		}
		return ms
	}
	conversation = conv()
	for {
		var fs [7]string
		for i := range fs {
			s, err := ReadField(r)
			if err != nil {
				if i == 0 && err == io.EOF {
					if len(cases) < 20 {
						t.Fatalf("only %d cases in test-chat-template.cpp", len(cases))
					}
					return conversation, cases
				}
				t.Fatalf("test-chat-template cases: %v", err)
			}
			fs[i] = s
		}
		cases = append(cases, TemplateCase{
			Name: fs[0], Template: fs[1], Expected: fs[2], ExpectedJinja: fs[3], BOS: fs[4], EOS: fs[5],
			SupportedWithJinja: fs[6] == "1", ExtraConversation: conv(),
		})
	}
}
