package infer_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// stateModel is a synthesized model of arch (two layers, llama-spm's
// vocabulary), cached in the user cache.
func stateModel(t *testing.T, arch string, layers int) string {
	t.Helper()
	rt := testenv.Runtime(t)
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	p, err := synth.TextModel(rt, filepath.Join(cache, "models", "text"), testenv.SourceTree(t), arch, "llama-spm", synth.ArchOptions{Layers: layers}, 7)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// openCtx makes ggload's context on the model with the params.
func openCtx(t *testing.T, path string, params place.Params) *infer.Context {
	t.Helper()
	rt := testenv.Runtime(t)
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	plan, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Load(context.Background(), plan, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	c, err := infer.New(lm, infer.Params{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A sequence's state, as ggload writes it, is libllama's byte for byte:
// for a KV cache, one unified and one of a stream per sequence, an iSWA
// cache (whole and partial), a recurrent state and a hybrid (whole and
// partial); each side restores the other's bytes and goes on to the same
// logits; the slot files are the same bytes and load on the other side.
// A changed byte of the state gives other logits (the comparison sees
// the state), and broken bytes are refused with the sequence left empty.
func TestSeqStateIsLlamas(t *testing.T) {
	rt := testenv.Runtime(t)
	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(t, "llama", "%v", err)
	}
	cases := []struct {
		arch    string
		unified bool
		layers  int
	}{
		{"llama", true, 2}, {"jamba", true, 4}, {"llama", false, 2}, {"gemma2", true, 2}, {"mamba", true, 2}, {"lfm2", true, 4},
	}
	if os.Getenv("GGLOAD_SERVE_ALL") != "1" {
		// a KV cache, and a hybrid (a KV cache and a recurrent state,
		// whole and partial); the others with the serving suite's whole run
		cases = cases[:2]
	}
	for _, tc := range cases {
		name := tc.arch
		if !tc.unified {
			name += "/streams"
		}
		t.Run(name, func(t *testing.T) {
			path := stateModel(t, tc.arch, tc.layers)
			params := place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: 256, NParallel: 2, KVUnified: tc.unified}}
			ours := openCtx(t, path, params)
			lm, theirs, err := l.OpenContext(rt, path, params, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer lm.Free()
			defer theirs.Free()
			nVocab, err := lm.NVocab()
			if err != nil {
				t.Fatal(err)
			}
			// two sequences: a prompt each, then a step of sequence 1
			a := []int32{1, 5, 9, 22, 31, 40, 41, 7, 100, 12}
			b := []int32{1, 8, 3, 77, 64}
			for _, s := range []struct {
				toks []int32
				seq  int32
			}{{a, 0}, {b, 1}, {[]int32{200}, 1}} {
				seqs := make([][]int32, len(s.toks))
				for i := range seqs {
					seqs[i] = []int32{s.seq}
				}
				if err := ours.Decode(infer.Batch{Tokens: s.toks, SeqIDs: seqs}); err != nil {
					t.Fatal(err)
				}
				if err := theirs.Decode(s.toks, nil, seqs, nil); err != nil {
					t.Fatal(err)
				}
			}
			for _, flags := range []uint32{0, 1} {
				for seq := int32(0); seq < 2; seq++ {
					want, err := theirs.SeqState(seq, flags)
					if err != nil {
						t.Fatal(err)
					}
					got, err := ours.SeqState(seq, infer.StateFlags(flags))
					if err != nil {
						t.Fatal(err)
					}
					if n, err := ours.SeqStateSize(seq, infer.StateFlags(flags)); err != nil || n != len(want) {
						t.Errorf("flags %d seq %d: size %d (%v), libllama's %d", flags, seq, n, err, len(want))
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("flags %d seq %d: %d bytes, libllama %d; first difference at %d", flags, seq, len(got), len(want), firstDiff(got, want))
					}
				}
			}
			// each restores the other's state of sequence 0 as sequence 1,
			// then both take the same token
			st0, _ := theirs.SeqState(0, 0)
			ourSt0, _ := ours.SeqState(0, 0)
			if n, err := ours.SetSeqState(1, st0, 0); err != nil || n != len(st0) {
				t.Fatalf("ours restoring libllama's state: %d of %d bytes, %v", n, len(st0), err)
			}
			if n, err := theirs.SetSeqState(1, ourSt0, 0); err != nil || n != len(ourSt0) {
				t.Fatalf("libllama restoring ours: %d of %d bytes, %v", n, len(ourSt0), err)
			}
			step := func() ([]float32, []float32) {
				next := []int32{42}
				pos := []int32{int32(len(a))}
				seqs := [][]int32{{1}}
				if err := ours.Decode(infer.Batch{Tokens: next, Pos: pos, SeqIDs: seqs}); err != nil {
					t.Fatal(err)
				}
				if err := theirs.Decode(next, pos, seqs, nil); err != nil {
					t.Fatal(err)
				}
				g, err := ours.Logits(-1)
				if err != nil {
					t.Fatal(err)
				}
				w, err := theirs.Logits(0, nVocab)
				if err != nil {
					t.Fatal(err)
				}
				return g, w
			}
			g, w := step()
			if d := floatDiff(g, w); d >= 0 {
				t.Fatalf("after the restores, logit %d: ggload %v, libllama %v", d, g[d], w[d])
			}
			// slot files: the same bytes, and each loads the other's
			dir := t.TempDir()
			toks := append(append([]int32(nil), a...), 42)
			ourFile, theirFile := filepath.Join(dir, "ours.bin"), filepath.Join(dir, "theirs.bin")
			nw, err := ours.SaveSeqFile(ourFile, 1, toks)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := theirs.SaveSeqFile(theirFile, 1, toks); err != nil || int64(n) != nw {
				t.Fatalf("libllama wrote %d bytes (%v), ggload %d", n, err, nw)
			}
			fo, _ := os.ReadFile(ourFile)
			ft, _ := os.ReadFile(theirFile)
			if !bytes.Equal(fo, ft) {
				t.Fatalf("slot files differ at byte %d", firstDiff(fo, ft))
			}
			gotToks, nr, err := ours.LoadSeqFile(theirFile, 0, 1000)
			if err != nil || nr != nw || !equalI32(gotToks, toks) {
				t.Fatalf("ggload loading libllama's file: %v tokens, %d bytes, %v", gotToks, nr, err)
			}
			wantToks, n, err := theirs.LoadSeqFile(ourFile, 0, 1000)
			if err != nil || int64(n) != nw || !equalI32(wantToks, toks) {
				t.Fatalf("libllama loading ggload's file: %v tokens, %d bytes, %v", wantToks, n, err)
			}
			// negative control: a changed value in the restored state
			// changes what comes next; the comparison sees the state
			bad := bytes.Clone(st0)
			bad[firstValue(t, tc.arch, st0)] ^= 0x40
			if _, err := ours.SetSeqState(1, bad, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := theirs.SetSeqState(1, st0, 0); err != nil {
				t.Fatal(err)
			}
			if g, w := step(); floatDiff(g, w) < 0 {
				t.Error("a changed byte of the state gave the same logits: the comparison does not see the state")
			}
			// refusals: truncated bytes, a wrong magic; what is left of the
			// sequence after is what libllama leaves
			if _, err := ours.SetSeqState(1, st0[:len(st0)-5], 0); !errors.Is(err, infer.ErrState) {
				t.Errorf("a truncated state: %v", err)
			}
			if n, _ := theirs.SetSeqState(1, st0[:len(st0)-5], 0); n != 0 {
				t.Errorf("libllama took a truncated state: %d bytes", n)
			}
			if p, q := ours.SeqPosMax(1), theirs.SeqPosMax(1); p != q {
				t.Errorf("after a failed restore, sequence 1 ends at %d, libllama's at %d", p, q)
			}
			wrong := bytes.Clone(st0)
			wrong[0] ^= 1
			if _, err := ours.SetSeqState(1, wrong, 0); !errors.Is(err, infer.ErrState) {
				t.Errorf("a wrong magic: %v", err)
			}
		})
	}
}

// firstValue is the offset of a byte of the first value (the first
// key, or a recurrent model's first r state) in a sequence's state: its
// sign and exponent (the high byte of an f16 key, of an f32 state).
func firstValue(t *testing.T, arch string, st []byte) int {
	t.Helper()
	if arch == "mamba" {
		// magic, seq, cell count, pos, n_seq_id, s_trans, n_layer, r type, r row size
		return 4*8 + 8 + 3
	}
	// magic, seq, n_stream, cell count, each cell's pos, n_seq_id, seq,
	// v_trans, n_layer, k type, k row size
	n := int(binary.LittleEndian.Uint32(st[12:]))
	return 4*4 + 12*n + 4*3 + 8 + 1
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func floatDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func equalI32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
