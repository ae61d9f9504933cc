package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
)

// hostile is text a file or a server may carry: an OSC 52 sequence (it
// writes the clipboard), a screen clear, a C1 CSI, DEL, a carriage return
// and a bidirectional override.
const hostile = "llama\x1b]52;c;aGVsbG8=\x07\x1b[2J\u009b31m\x7f\rx\u202eevil"

// terminalActive reports the bytes of out that a terminal acts on.
func terminalActive(out string) []string {
	var found []string
	for _, bad := range []string{"\x1b", "\x07", "\r", "\x7f", "\u009b", "\u202e"} {
		if strings.Contains(out, bad) {
			found = append(found, strings.TrimPrefix(strings.TrimSuffix(jsonString(bad), `"`), `"`))
		}
	}
	return found
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// Names and values from a file reach the terminal escaped, in every
// command's output and in the error line; JSON keeps them exact.
func TestHostileNamesEscaped(t *testing.T) {
	w := gguf.NewWriter()
	for _, kv := range []struct{ k, v string }{
		{gguf.KeyArchitecture, hostile},
		{"general.name", hostile},
		{"evil." + hostile, "value"},
	} {
		if err := w.Set(kv.k, gguf.String(kv.v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddTensorBytes("token_embd.weight", ggml.TypeF32, []int64{4, 2}, make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "evil.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "inspect", path)
	if err != nil {
		t.Fatal(err)
	}
	if bad := terminalActive(out); len(bad) > 0 || !strings.Contains(out, `architecture llama\x1b]52;c;aGVsbG8=\a`) {
		t.Errorf("inspect prints %v raw:\n%s", bad, out)
	}
	js, err := runCLI(t, "inspect", "--json", path)
	if err != nil {
		t.Fatal(err)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if bad := terminalActive(js); len(bad) > 0 || rep.Architecture != hostile || rep.KV[2].Key != "evil."+hostile {
		t.Errorf("inspect --json: %v raw, architecture %q, key %q", bad, rep.Architecture, rep.KV[2].Key)
	}
	// the error line goes through the same writer
	var stderr bytes.Buffer
	exitCode(errors.New("tensor "+hostile), nil, safe(&stderr))
	if bad := terminalActive(stderr.String()); len(bad) > 0 {
		t.Errorf("the error line prints %v raw: %q", bad, stderr.String())
	}
}

// A rune cut between two writes comes out whole; a byte that is not
// UTF-8 is written as \xNN.
func TestSafeWriterRunes(t *testing.T) {
	var b bytes.Buffer
	w := safe(&b)
	for _, p := range [][]byte{[]byte("é\xc2"), []byte("\x9bA\xe2\x80"), []byte("\xaeB\xff\n")} {
		if n, err := w.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write %q: %d, %v", p, n, err)
		}
	}
	if got, want := b.String(), `é\u009bA\u202eB\xff`+"\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A name of a mebibyte prints as its first bytes and its length: inspect
// and plan stay short, and the JSON keeps the name whole.
func TestHugeNamesBounded(t *testing.T) {
	huge := strings.Repeat("\x1b]x", 1<<18) // 768 KiB
	w := gguf.NewWriter()
	for _, kv := range []struct{ k, v string }{
		{gguf.KeyArchitecture, huge},
		{"general.name", "tiny"},
		{"key." + huge, "value"},
	} {
		if err := w.Set(kv.k, gguf.String(kv.v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddTensorBytes("token_embd.weight", ggml.TypeF32, []int64{4, 2}, make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "huge.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "inspect", path)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 8<<10 || !strings.Contains(out, "(786432 bytes)") {
		t.Errorf("inspect prints %d bytes:\n%.2000s", len(out), out)
	}
	js, err := runCLI(t, "inspect", "--json", path)
	if err != nil {
		t.Fatal(err)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil || rep.Architecture != huge || rep.KV[2].Key != "key."+huge {
		t.Errorf("inspect --json does not keep the names whole (%v)", err)
	}
	testenv.Runtime(t)
	out, err = runCLI(t, "plan", path, "-dev", "none")
	if err != nil {
		out += err.Error()
	}
	if len(out) > 32<<10 || strings.Contains(out, strings.Repeat("]x", 64)) {
		t.Errorf("plan prints %d bytes:\n%.2000s", len(out), out)
	}
}
