package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/llamaserver"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
)

// post sends a JSON body to llama-server and decodes the answer into v;
// the status.
func post(t testing.TB, s *llamaserver.Server, path string, body any, v any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(s.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("%s answered %d: %s", path, resp.StatusCode, out)
	}
	return resp.StatusCode
}

// Embeddings are llama-server's, float for float: pooled by mean, CLS and
// last (normalized as embd_normalize asks), each token's with pooling
// none, and the rank score (--reranking), on a BERT model; prompts sent
// at once share batches.
func TestEmbeddingIsLlamaServer(t *testing.T) {
	oracleOnly(t)
	bin := serverBin(t)
	path := textModel(t, "bert", "bert-bge", 2)
	cases := []struct {
		pooling place.Pooling
		norm    int
	}{{place.PoolingMean, 2}, {place.PoolingCLS, -1}, {place.PoolingNone, 2}, {place.PoolingLast, 1}, {place.PoolingRank, 2}}
	if !all() {
		cases = []struct {
			pooling place.Pooling
			norm    int
		}{{place.PoolingMean, 2}, {place.PoolingRank, 2}}
	}
	for _, c := range cases {
		t.Run(c.pooling.String(), func(t *testing.T) {
			srv := llamaserver.Start(t, bin, "-m", path, "--device", "none", "-t", fmt.Sprint(threads), "-c", "1024", "-b", "512",
				"--embedding", "--pooling", c.pooling.String())
			e := newEngine(t, path, 1024, serve.Params{}, func(cp *place.ContextParams) {
				cp.Embeddings, cp.Pooling, cp.NBatch = true, c.pooling, 512
			})
			prompts := [][]int32{tokens(t, e, "what is a panda?"), tokens(t, e, "The giant panda is a bear species endemic to China."), tokens(t, e, "hi")}
			if c.pooling == place.PoolingRank {
				for i, p := range prompts {
					got, err := e.Rerank(context.Background(), p, e.Defaults())
					if err != nil {
						t.Fatal(err)
					}
					// /rerank formats a query and a document itself: the
					// score of the same tokens comes from /embedding's
					// first value with normalization off
					var want []struct {
						Embedding [][]float32 `json:"embedding"`
					}
					if st := post(t, srv, "/embedding", map[string]any{"content": p, "embd_normalize": -1}, &want); st != 200 {
						t.Fatalf("status %d", st)
					}
					if w := want[0].Embedding[0][0]; math.Float32bits(got) != math.Float32bits(w) {
						t.Errorf("prompt %d: score %v, llama-server %v", i, got, w)
					}
				}
				return
			}
			// sent at once, the prompts share batches: each result is
			// libllama's for the batch the engine decoded (captured and
			// decoded again there), pooled without normalization
			if c.pooling != place.PoolingNone {
				concurrentIsLlamas(t, e, path, prompts, c.pooling)
			}
			o := e.Defaults()
			o.EmbdNormalize = c.norm
			for i, p := range prompts {
				got, err := e.Embed(context.Background(), p, o)
				if err != nil {
					t.Fatal(err)
				}
				var want []struct {
					Embedding [][]float32 `json:"embedding"`
				}
				if st := post(t, srv, "/embedding", map[string]any{"content": p, "embd_normalize": c.norm}, &want); st != 200 {
					t.Fatalf("status %d", st)
				}
				if len(got.Vectors) != len(want[0].Embedding) {
					t.Fatalf("prompt %d: %d vectors, llama-server %d", i, len(got.Vectors), len(want[0].Embedding))
				}
				for k := range got.Vectors {
					if !slices.EqualFunc(got.Vectors[k], want[0].Embedding[k], func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
						t.Fatalf("prompt %d vector %d: %v…, llama-server %v…", i, k, got.Vectors[k][:4], want[0].Embedding[k][:4])
					}
				}
			}
		})
	}
}

// The errors a request meets are llama-server's: a prompt longer than
// the slot's context (with its token count and the context), a token
// outside the vocabulary.
func TestErrorsAreLlamaServers(t *testing.T) {
	oracleOnly(t)
	bin := serverBin(t)
	path := textModel(t, "llama", "llama-spm", 2)
	srv := llamaserver.Start(t, bin, "-m", path, "--device", "none", "-t", fmt.Sprint(threads), "-c", "512")
	e := newEngine(t, path, 512, serve.Params{})
	long := make([]int32, 600)
	for i := range long {
		long[i] = int32(100 + i%50)
	}
	for _, p := range [][]int32{long, {1, 5, 1 << 20}} {
		_, err := e.Complete(context.Background(), p, opts(e, 4, nil), nil)
		var se *serve.Error
		if !errorAs(err, &se) {
			t.Fatalf("no serve.Error: %v", err)
		}
		var want struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Type    string `json:"type"`
				NPrompt int    `json:"n_prompt_tokens"`
				NCtx    int    `json:"n_ctx"`
			} `json:"error"`
		}
		st := post(t, srv, "/completion", map[string]any{"prompt": p, "n_predict": 4}, &want)
		w := want.Error
		if se.Msg != w.Message || se.Type.String() != w.Type || se.Type.Code() != w.Code || st != w.Code {
			t.Errorf("error %q %s %d, llama-server %q %s %d (status %d)", se.Msg, se.Type, se.Type.Code(), w.Message, w.Type, w.Code, st)
		}
		if se.Type == serve.ErrExceedContextSize && (se.NPromptTokens != w.NPrompt || se.NCtx != w.NCtx) {
			t.Errorf("n_prompt_tokens %d n_ctx %d, llama-server %d %d", se.NPromptTokens, se.NCtx, w.NPrompt, w.NCtx)
		}
	}
}

// Slot files are llama-server's: the same bytes saved from the same
// slot, and each restores the other's, the slot then serving the next
// request from the restored prompt alike.
func TestSlotFilesAreLlamaServers(t *testing.T) {
	oracleOnly(t)
	bin := serverBin(t)
	path := textModel(t, "llama", "llama-spm", 2)
	theirDir, ourDir := t.TempDir(), t.TempDir()
	srv := llamaserver.Start(t, bin, "-m", path, "--device", "none", "-t", fmt.Sprint(threads), "-c", "1024", "--slot-save-path", theirDir)
	e := newEngine(t, path, 1024, serve.Params{SlotSavePath: ourDir})
	a := tokens(t, e, "Slots are saved to files and restored from them")
	o := opts(e, 6, nil)
	o.Sampling.Temp, o.IDSlot = 0, 1
	r := request{a, o, false}
	got, err := e.Complete(context.Background(), a, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ask(t, srv, r, false)
	compare(t, "the first request", got, want)
	sf, err := e.SaveSlot(context.Background(), 1, "slot.bin")
	if err != nil {
		t.Fatal(err)
	}
	var saved struct {
		NSaved   int `json:"n_saved"`
		NWritten int `json:"n_written"`
	}
	post(t, srv, "/slots/1?action=save", map[string]any{"filename": "slot.bin"}, &saved)
	ours, _ := os.ReadFile(filepath.Join(ourDir, "slot.bin"))
	theirs, _ := os.ReadFile(filepath.Join(theirDir, "slot.bin"))
	if !bytes.Equal(ours, theirs) || int64(saved.NWritten) != sf.NBytes || saved.NSaved != sf.NTokens {
		t.Fatalf("slot files: %d bytes (%d tokens), llama-server's %d bytes (%d tokens), equal %v", sf.NBytes, sf.NTokens, saved.NWritten, saved.NSaved, bytes.Equal(ours, theirs))
	}
	// each restores the other's file into slot 2, erased first
	if _, err := e.EraseSlot(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ourDir, "theirs.bin"), theirs, 0o644)
	os.WriteFile(filepath.Join(theirDir, "ours.bin"), ours, 0o644)
	if _, err := e.RestoreSlot(context.Background(), 2, "theirs.bin"); err != nil {
		t.Fatal(err)
	}
	var restored struct {
		NRestored int `json:"n_restored"`
		NRead     int `json:"n_read"`
	}
	var erased map[string]any
	post(t, srv, "/slots/2?action=erase", map[string]any{}, &erased)
	if st := post(t, srv, "/slots/2?action=restore", map[string]any{"filename": "ours.bin"}, &restored); st != 200 || restored.NRestored != sf.NTokens {
		t.Fatalf("llama-server restoring ggload's file: status %d, %+v", st, restored)
	}
	more := append(slices.Clone(a), tokens(t, e, " and go on")[1:]...)
	o.IDSlot = 2
	got, err = e.Complete(context.Background(), more, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ = ask(t, srv, request{more, o, false}, false)
	compare(t, "after the restores", got, want)
	if got.Timings.CacheN == 0 {
		t.Error("the restored slot served nothing from its prompt")
	}
	// a broken file is refused, the slot left empty
	os.WriteFile(filepath.Join(ourDir, "broken.bin"), ours[:len(ours)/2], 0o644)
	if _, err := e.RestoreSlot(context.Background(), 2, "broken.bin"); err == nil {
		t.Error("a truncated slot file was restored")
	}
	if _, err := e.SaveSlot(context.Background(), 0, "../escape.bin"); err == nil {
		t.Error("a file name with a directory was taken")
	}
}

func errorAs(err error, target **serve.Error) bool {
	se, ok := err.(*serve.Error)
	if ok {
		*target = se
	}
	return ok
}

// concurrentIsLlamas embeds the prompts at once and holds each result to
// libllama's embedding of its sequence in the batch the engine decoded.
func concurrentIsLlamas(t *testing.T, e *serve.Engine, path string, prompts [][]int32, pooling place.Pooling) {
	t.Helper()
	var mu sync.Mutex
	var batches []infer.Batch
	e.SetDecodeHook(func(b infer.Batch) error {
		mu.Lock()
		batches = append(batches, b)
		mu.Unlock()
		return nil
	})
	defer e.SetDecodeHook(nil)
	o := e.Defaults()
	o.EmbdNormalize = -1
	results := make([]*serve.Embedding, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if results[i], err = e.Embed(context.Background(), p, o); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	rt := testenv.Runtime(t)
	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(t, "llama", "%v", err)
	}
	params := place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: 1024, NParallel: 4, KVUnified: true, NBatch: 512, Embeddings: true, Pooling: pooling}}
	lm, lc, err := l.OpenContext(rt, path, params, threads)
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Free()
	defer lc.Free()
	shared := false
	for _, b := range batches {
		if err := lc.Decode(b.Tokens, b.Pos, b.SeqIDs, b.Logits); err != nil {
			t.Fatal(err)
		}
		seqs := map[int32][]int32{}
		for i, ids := range b.SeqIDs {
			seqs[ids[0]] = append(seqs[ids[0]], b.Tokens[i])
		}
		shared = shared || len(seqs) > 1
		for seq, toks := range seqs {
			k := slices.IndexFunc(prompts, func(p []int32) bool { return slices.Equal(p, toks) })
			if k < 0 {
				t.Fatalf("a batch's sequence %d holds tokens of no prompt: %v", seq, toks)
			}
			want, err := lc.Embeddings(seq, 0, len(results[k].Vectors[0]))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(results[k].Vectors[0], want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
				t.Errorf("prompt %d (sequence %d of a batch of %d): %v…, libllama %v…", k, seq, len(seqs), results[k].Vectors[0][:4], want[:4])
			}
		}
	}
	t.Logf("%d batches, shared: %v", len(batches), shared)
}
