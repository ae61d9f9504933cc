package chat

import (
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/lab/testenv"
)

// pinTemplates are the pin's models/templates/, by name.
func pinTemplates(t testing.TB) (names []string, srcs map[string]string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.SourceTree(t), "models", "templates", "*.jinja"))
	if err != nil || len(files) < 60 {
		t.Fatalf("only %d templates in the pin's models/templates (%v)", len(files), err)
	}
	srcs = map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := filepath.Base(f)
		names = append(names, n)
		srcs[n] = string(b)
	}
	sort.Strings(names)
	return names, srcs
}

// pinConversations are the distinct inputs the pin's test-chat.cpp
// applies its templates to, in the order it first applies them.
func pinConversations(t *testing.T) []Inputs {
	rec := pinTestChat(t)
	seen := map[string]bool{}
	var out []Inputs
	for _, a := range rec.applies {
		k := inputsJSON(&a.in)
		if !seen[k] {
			seen[k] = true
			out = append(out, a.in)
		}
	}
	return out
}

func hash(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// Every template of the pin's models/templates/ gives here what it gives
// the pin on every conversation of the pin's test-chat.cpp: the prompt,
// the format, the grammar and its triggers, the preserved tokens, the
// stops, the generation prompt, the thinking tags, the message
// delimiters, the parser itself, and the parse of a reply. The default
// run takes 4 conversations per template; GGLOAD_CHAT_ALL=1 takes all.
func TestTemplatesConversations(t *testing.T) {
	names, srcs := pinTemplates(t)
	convs := pinConversations(t)
	o := startOracle(t)
	var us ours
	replies := []reply{{"Hello, world", false}, {"<think>I think</think>Hello", false}, {"Hel", true}}
	pairs, bad := 0, 0
	for _, name := range names {
		for i := range convs {
			if !all() && (hash(name)+uint32(i))%uint32(len(convs)/4) != 0 {
				continue
			}
			pairs++
			q := &request{src: srcs[name], bos: "<s>", eos: "</s>", in: convs[i], replies: replies}
			want, got := o.apply(q), us.apply(q)
			if d := diffParams(&got, &want); d != "" {
				bad++
				if bad <= 20 {
					t.Errorf("%s, conversation %d (%s):\n%s", name, i, tail(inputsJSON(&convs[i]), 300), tail(d, 3000))
				}
			}
		}
	}
	t.Logf("%d templates × %d conversations: %d pairs, %d differ", len(names), len(convs), pairs, bad)
}

// FormatSingle is common_chat_format_single, as llama-cli formats a
// conversation turn by turn: every template, conversations of the pin's
// test-chat.cpp cut at each message.
func TestFormatSingle(t *testing.T) {
	names, srcs := pinTemplates(t)
	convs := pinConversations(t)
	o := startOracle(t)
	var us ours
	n, bad := 0, 0
	for ti, name := range names {
		for ci, in := range convs {
			if !all() && (ti+ci)%(len(convs)/2) != 0 {
				continue
			}
			tm, err := us.templates(srcs[name], "<s>", "</s>")
			if err != nil {
				t.Fatal(err)
			}
			for cut := 0; cut < len(in.Messages); cut++ {
				past, msg := in.Messages[:cut], in.Messages[cut]
				addAss, jinja := msg.Role == "user", (ti+cut)%5 != 0
				pj := ojson.ArrayValue()
				for i := range past {
					pj.Append(msgJSON(&past[i]))
				}
				b := func(x bool) string {
					if x {
						return "1"
					}
					return "0"
				}
				o.send("single", srcs[name], "<s>", "</s>", dumpOrDie(pj), dumpOrDie(msgJSON(&msg)), b(addAss), b(jinja))
				o.flush()
				var want, wantErr string
				if o.read() == "ok" {
					want = o.read()
				} else {
					wantErr = o.read()
				}
				got, err := tm.FormatSingle(past, msg, addAss, jinja, time.Unix(testNow, 0).UTC())
				gotErr := ""
				if err != nil {
					gotErr = errText(err)
				}
				n++
				if got != want || gotErr != wantErr {
					bad++
					if bad <= 10 {
						t.Errorf("%s, conversation %d cut at %d (jinja %v):\n ours %q %q\n  pin %q %q", name, ci, cut, jinja, got, gotErr, want, wantErr)
					}
				}
			}
		}
	}
	t.Logf("%d turns: %d differ", n, bad)
}
