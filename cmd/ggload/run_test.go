package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/synth"
)

// run: the prompt, greedy steps, the logits file row by row, the JSON
// report; bad options refused with exit 2 before anything loads, a token
// outside the vocabulary with exit 1 naming it.
func TestRunCommand(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 300, Distinct: true})
	logits := filepath.Join(t.TempDir(), "logits.f32")
	out, err := runCLI(t, "run", path, "-dev", "none", "-t", "2", "--tokens", "1,7,42,250", "-n", "3", "--all-logits", "--logits-out", logits, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep runReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.NVocab != 300 || len(rep.Generated) != 3 || len(rep.Steps) != 4 || rep.Threads != 2 || rep.Timings.Graphs+rep.Timings.GraphsReused != 4 || rep.Timings.GraphsReused != 2 {
		t.Fatalf("report: %+v", rep)
	}
	b, err := os.ReadFile(logits)
	if err != nil {
		t.Fatal(err)
	}
	// (the prompt's graph, then one for the steps, reused twice, as
	// llama.cpp reuses it)
	// 4 prompt rows, then 3 steps' rows
	if len(b) != 7*300*4 {
		t.Fatalf("logits file of %d bytes, want %d", len(b), 7*300*4)
	}
	row := func(r int) []float32 {
		v := make([]float32, 300)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[(r*300+i)*4:]))
		}
		return v
	}
	// each step's token is the argmax of the row before it, and the
	// report's logit is that row's value
	for s, st := range rep.Steps {
		r := row(3 + s)
		best := 0
		for i, v := range r {
			if v > r[best] {
				best = i
			}
		}
		if int32(best) != st.Token || r[best] != float32(st.Logit) {
			t.Errorf("step %d: argmax %d (%v) in the file, the report says %d (%v)", s, best, r[best], st.Token, st.Logit)
		}
		if s < len(rep.Generated) && rep.Generated[s] != st.Token {
			t.Errorf("step %d: generated %d, argmax %d", s, rep.Generated[s], st.Token)
		}
	}
	// --embd-out: each token's embedding without pooling, one pooled row
	// with it
	files := map[string][]byte{}
	for _, c := range []struct {
		pooling string
		rows    int
	}{{"none", 4}, {"mean", 1}, {"last", 1}} {
		embd := filepath.Join(t.TempDir(), "embd.f32")
		if _, err := runCLI(t, "run", path, "-dev", "none", "--tokens", "1,7,42,250", "--pooling", c.pooling, "--embd-out", embd); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(embd)
		if err != nil || len(b) != c.rows*128*4 {
			t.Errorf("--pooling %s --embd-out: %d bytes (%v), want %d rows of 128", c.pooling, len(b), err, c.rows)
		}
		files[c.pooling] = b
	}
	// last pooling is the last token's row
	if none := files["none"]; len(none) == 4*128*4 && !bytes.Equal(files["last"], none[3*128*4:]) {
		t.Error("--pooling last is not the last token's embedding")
	}
	text, err := runCLI(t, "run", path, "-dev", "none", "--tokens", "1,7,42,250", "-n", "3")
	if err != nil || !strings.Contains(text, "ggload: generated: ") || !strings.Contains(text, "tokens/s") {
		t.Errorf("text report: %v\n%s", err, text)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", path}, 2, "-p, -f or --tokens: a prompt is required"},
		{[]string{"run", path, "--tokens", "1,x"}, 2, "want token ids"},
		{[]string{"run", path, "--tokens", "1", "-n", "-1"}, 2, "-n -1: with --tokens, -n counts greedy steps from 0"},
		{[]string{"run", path, "--tokens", "1", "-n", "-3"}, 2, "-n -3: with --tokens, -n counts greedy steps from 0"},
		{[]string{"run", path, "--tokens", "1", "-t", "2000"}, 2, "2000 threads: ggload takes up to 1024"},
		{[]string{"run", path, "-dev", "none", "--tokens", "1,300"}, 1, "invalid token[1] = 300 (the vocabulary has 300)"},
	} {
		_, errOut, err := ggloadRun(t, nil, c.args...)
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %v (want exit %d and %q): %s", c.args, err, c.code, c.want, errOut)
		}
	}
}

// load --context: the context made on the loaded weights, each buffer
// beside the plan's estimate; on the CPU they are equal.
func TestLoadContext(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 300})
	out, err := runCLI(t, "load", path, "-dev", "none", "-c", "512", "--context", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Made []contextAlloc `json:"context_allocated"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, a := range rep.Made {
		kinds[a.What] = true
		if a.Allocated == 0 || a.Allocated != a.Estimate {
			t.Errorf("%s on %s: allocated %d, estimated %d", a.What, a.BufferType, a.Allocated, a.Estimate)
		}
	}
	if !kinds["KV cache"] || !kinds["compute"] {
		t.Errorf("context allocations: %+v", rep.Made)
	}
	text, err := runCLI(t, "load", path, "-dev", "none", "--context")
	if err != nil || !strings.Contains(text, "ggload: the context made") {
		t.Errorf("load --context: %v\n%s", err, text)
	}
}
