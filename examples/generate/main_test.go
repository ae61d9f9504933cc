package main

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const tinyWords = "../../loader/testdata/tiny-words.gguf"

// The program streams text: the tiny model of English word pieces says
// words. Its sampler takes a random seed, so the words are not checked,
// only that they are text of its vocabulary.
func TestGenerate(t *testing.T) {
	testenv.Runtime(t) // the native set, or the reason it is missing
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, args := os.Stdout, os.Args
	os.Stdout, os.Args = w, []string{"generate", tinyWords, "the people of the"}
	defer func() { os.Stdout, os.Args = stdout, args }()
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	main()
	w.Close()
	out := string(<-done)
	if !regexp.MustCompile(`^( [A-Za-z]+)+$`).MatchString(out) || len(strings.Fields(out)) < 8 {
		t.Errorf("generated %q: want words", out)
	}
	t.Logf("generated %q", out)
}

// The README's program is this one; the README is a front page of at
// most 1,500 words, and every page it links to is there.
func TestREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(string(readme))); n > 1500 {
		t.Errorf("README.md has %d words: the front page keeps to 1,500, the rest goes under docs/", n)
	}
	for _, m := range regexp.MustCompile(`\]\(([\w./-]+\.md)\)`).FindAllStringSubmatch(string(readme), -1) {
		if _, err := os.Stat("../../" + m[1]); err != nil {
			t.Errorf("README.md links to %s: %v", m[1], err)
		}
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	prog := src[bytes.Index(src, []byte("package main")):]
	if !bytes.Contains(readme, append(append([]byte("```go\n"), prog...), "```"...)) {
		t.Errorf("README.md does not hold examples/generate/main.go as it is (from its package clause)")
	}
}
