package grammar

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/vocab"
)

// Where the pin hangs or runs out of memory, the grammar stops with an
// error: a repetition {m,n} with n < m, a left recursion through rules
// that may match nothing, an ambiguous grammar's stacks past MaxStacks, a
// trigger pattern that backtracks without end. A deep recursion that the
// pin takes is taken, its arena rebuilt from the live stacks.
func TestGrammarBounds(t *testing.T) {
	if _, err := ParseGBNF(`root ::= "a"{5,3}`, nil); err == nil || !strings.Contains(err.Error(), "below its minimum") {
		t.Errorf("{5,3}: %v", err)
	}
	for _, s := range []string{
		"root ::= x root \"a\" | \"b\"\nx ::= y\ny ::= \"c\" | ",
		"root ::= x \"a\"\nx ::= y x \"b\" | \"c\"\ny ::= [a-z]*",
	} {
		if _, err := New(nil, s, "root"); err == nil || !strings.Contains(err.Error(), "through rules that may match nothing") {
			t.Errorf("%q: %v", s, err)
		}
	}
	// a recursion in tail position through a rule that may be empty ends:
	// the pin takes it, and so does this package
	g, err := New(nil, "root ::= ( [x]* )*", "root")
	if err != nil || g.AcceptString("xxx") != nil || !g.CanEnd() {
		t.Fatalf("( [x]* )*: %v", err)
	}

	g, err = New(nil, `root ::= | . root{2} root?`, "root")
	if err != nil {
		t.Fatal(err)
	}
	err = nil
	for i := 0; err == nil && i < 64; i++ {
		err = g.AcceptString("q")
	}
	if !errors.Is(err, ErrTooManyStacks) {
		t.Errorf("an ambiguous grammar: %v", err)
	}

	defer func(n int) { reStepLimit = n }(reStepLimit)
	reStepLimit = 1 << 16
	tp, err := compileTrigger(`(a*)*b`)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tp.find([]byte(strings.Repeat("a", 40))); !errors.Is(err, errRegexSteps) {
		t.Errorf("a pattern that backtracks without end: %v", err)
	}

	// right recursion, deep: the stacks grow, the arena is rebuilt, the
	// grammar ends where it should
	defer func(n int) { arenaCompact = n }(arenaCompact)
	arenaCompact = 1 << 12
	g, err = New(nil, `root ::= "(" root ")" | "x"`, "root")
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat("(", arenaCompact/2) + "x" + strings.Repeat(")", arenaCompact/2)
	if err := g.AcceptString(deep); err != nil || !g.CanEnd() {
		t.Fatalf("a deep recursion: %v", err)
	}
	if len(g.ar.nodes) >= arenaCompact {
		t.Errorf("the arena holds %d nodes after the text", len(g.ar.nodes))
	}
	if err := g.AcceptString(")"); err == nil {
		t.Error("one ')' too many taken")
	}
}

// Grammars over one vocabulary share its index, built once; each grammar
// serves one generation, and many of them run at once (go test -race).
func TestGrammarsShareTheIndex(t *testing.T) {
	v := testVocab(t, "llama-spm")
	text := `root ::= "{" [a-z ]* "}" | [0-9]+`
	var wg sync.WaitGroup
	masks := make([]int, 4)
	for i := range masks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := New(v, text, "root")
			if err != nil {
				t.Error(err)
				return
			}
			if err := g.AcceptString("{ab"); err != nil {
				t.Error(err)
				return
			}
			masks[i] = g.Mask().Count(v.NTokens())
			if c := g.Clone(); c.Mask().Count(v.NTokens()) != masks[i] {
				t.Error("a clone allows other tokens")
			}
		}()
	}
	wg.Wait()
	for _, m := range masks[1:] {
		if m != masks[0] || m == 0 {
			t.Fatalf("masks of %v tokens", masks)
		}
	}
	if indexOf(v) != indexOf(v) {
		t.Fatal("two indexes of one vocabulary")
	}
}

func testVocab(t *testing.T, name string) *vocab.Vocab {
	t.Helper()
	v, err := vocab.Open(filepath.Join(testenv.SourceTree(t), "models", "ggml-vocab-"+name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
