package ggload_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload"
	"github.com/ggload/ggload/chat"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/hubtest"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/sample"
)

// Requests from many goroutines at once, more than the slots (4): each
// ends with its own tokens, the chats beside them with theirs, and the
// slots are free after. (Requests at once share each step's batch, and
// a batch of other sizes takes other kernels: their text is not the
// text they give alone. serve's TestContinuousBatchingIsLlamas holds
// those batches to libllama's.)
func TestConcurrent(t *testing.T) {
	m := open(t, tinyWords, ggload.Options{})
	const n, predict = 6, 12
	opts := func(i int) ggload.GenerateOptions {
		return ggload.GenerateOptions{NPredict: predict, Sampling: sample.Params{Seed: uint32(100 + i), IgnoreEOS: true}}
	}
	msgs := []chat.Message{{Role: "user", Content: "Hello"}}
	pieces := make([]int, n)
	errs := make([]error, n+2)
	replies := make([]chat.Message, 2)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for piece, err := range m.Generate(context.Background(), "the people of the", opts(i)) {
				if err != nil {
					errs[i] = err
					return
				}
				if piece != "" {
					pieces[i]++
				}
			}
		})
	}
	for i := range replies {
		wg.Go(func() {
			replies[i], errs[n+i] = m.Chat(context.Background(), msgs, ggload.ChatOptions{GenerateOptions: opts(i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	for i := range n {
		if pieces[i] != predict {
			t.Errorf("generation %d: %d pieces, want %d", i, pieces[i], predict)
		}
	}
	for i, r := range replies {
		if r.Role != "assistant" || len(strings.Fields(r.Content)) < predict/2 {
			t.Errorf("chat %d: %+v", i, r)
		}
	}
	waitIdle(t, m)
	// alone, a request gives the same text twice
	if a, b := generate(t, m, "the people of the", opts(0)), generate(t, m, "the people of the", opts(0)); a != b {
		t.Errorf("seed 100 alone: %q, then %q", a, b)
	}
}

// waitIdle waits for every slot of the engine to be free.
func waitIdle(t *testing.T, m *ggload.Model) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		slots, err := m.Engine().Slots(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		busy := 0
		for _, s := range slots {
			if s.IsProcessing {
				busy++
			}
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d slots still busy", busy)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A generation without end stops when its context is cancelled, or its
// loop stops: the sequence ends (with the context's error), and the
// slot is free again.
func TestCancel(t *testing.T) {
	m := open(t, tinyWords, ggload.Options{})
	endless := ggload.GenerateOptions{NPredict: -1, Sampling: sample.Params{Seed: 1, IgnoreEOS: true}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pieces := 0
	var last error
	for piece, err := range m.Generate(ctx, "the people of the", endless) {
		if err != nil {
			last = err
			continue
		}
		if piece != "" {
			pieces++
		}
		if pieces == 3 {
			cancel()
		}
	}
	if !errors.Is(last, context.Canceled) {
		t.Errorf("after cancel: %v, want context.Canceled", last)
	}
	if pieces > 100 {
		t.Errorf("%d pieces after the cancel at 3", pieces)
	}
	waitIdle(t, m)

	pieces = 0
	for piece, err := range m.Generate(context.Background(), "the people of the", endless) {
		if err != nil {
			t.Fatal(err)
		}
		if piece != "" {
			pieces++
		}
		if pieces == 2 {
			break
		}
	}
	waitIdle(t, m)
	for _, err := range m.ChatStream(context.Background(), []chat.Message{{Role: "user", Content: "Hi"}}, ggload.ChatOptions{GenerateOptions: endless}) {
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	waitIdle(t, m)
}

// openFDs is the process's open files.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// Close frees what Open made: the runtime's buffers, the files; a
// generation under way ends with ggload.ErrClosed; a second Close does
// nothing; the model's methods answer the closed engine's error.
func TestClose(t *testing.T) {
	testenv.Runtime(t)
	ctx := context.Background()
	// one open and close first: the native libraries' own files stay
	warm, err := ggload.Open(ctx, tinyWords, cpu(ggload.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	warm.Close()
	fds, bufs := openFDs(t), ggml.LiveBuffers()
	m, err := ggload.Open(ctx, tinyWords, cpu(ggload.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if ggml.LiveBuffers() <= bufs || openFDs(t) <= fds {
		t.Errorf("open: %d buffers and %d files, %d and %d before: the check below tells nothing", ggml.LiveBuffers(), openFDs(t), bufs, fds)
	}
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var last error
		first := true
		for _, err := range m.Generate(ctx, "the people of the", ggload.GenerateOptions{NPredict: -1, Sampling: sample.Params{Seed: 1, IgnoreEOS: true}}) {
			if first {
				close(started)
				first = false
			}
			last = err
		}
		done <- last
	}()
	<-started
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ggload.ErrClosed) {
		t.Errorf("the generation under way: %v, want ggload.ErrClosed", err)
	}
	if n := ggml.LiveBuffers(); n != bufs {
		t.Errorf("%d buffers live after Close, %d before Open", n, bufs)
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d files open after Close, %d before Open", n, fds)
	}
	if err := m.Close(); err != nil {
		t.Errorf("the second Close: %v", err)
	}
	for _, err := range m.Generate(ctx, "the", ggload.GenerateOptions{}) {
		if !errors.Is(err, ggload.ErrClosed) {
			t.Errorf("Generate after Close: %v", err)
		}
	}
	if _, err := m.Chat(ctx, []chat.Message{{Role: "user", Content: "Hi"}}, ggload.ChatOptions{}); !errors.Is(err, ggload.ErrClosed) {
		t.Errorf("Chat after Close: %v", err)
	}
}

// Every error names the model, the option or the request field, and
// why.
func TestErrors(t *testing.T) {
	testenv.Runtime(t)
	ctx := context.Background()
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("LLAMA_CACHE", "")
	for _, c := range []struct {
		name string
		o    ggload.Options
		want []string
	}{
		{"", ggload.Options{}, []string{"ggload: open", "no model"}},
		{"no/such/model.gguf", ggload.Options{}, []string{"ggload: open no/such/model.gguf", "no/such/model.gguf", "no such file"}},
		{tinyWords, ggload.Options{HubFile: "a.gguf"}, []string{"Options.HubFile a.gguf", "hf:"}},
		{"hf:ggload-test/none-GGUF", ggload.Options{Offline: true}, []string{"ggload: open hf:ggload-test/none-GGUF", "ggload-test/none-GGUF"}},
		{"hf:not a repo", ggload.Options{Offline: true}, []string{"not a repo", "invalid HF repo format"}},
	} {
		m, err := ggload.Open(ctx, c.name, cpu(c.o))
		if err == nil {
			m.Close()
			t.Errorf("Open %q: no error", c.name)
			continue
		}
		var ge *ggload.Error
		if !errors.As(err, &ge) || ge.Op != "open" || ge.Name != c.name {
			t.Errorf("Open %q: %T %v, want a *ggload.Error of open", c.name, err, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Open %q: %q does not say %q", c.name, err, w)
			}
		}
	}
	m := open(t, tinyWords, ggload.Options{})
	requests := []struct {
		name string
		err  error
		want string
	}{
		{"embed", embedErr(m), "Options.Place.Context.Embeddings"},
		{"npredict", generateErr(m, ggload.GenerateOptions{NPredict: -5}), "GenerateOptions.NPredict -5"},
		{"grammar", generateErr(m, ggload.GenerateOptions{Sampling: sample.Params{Grammar: `root ::= ("a"`}}), "GenerateOptions.Sampling"},
		{"schema", generateErr(m, ggload.GenerateOptions{Sampling: sample.Params{JSONSchema: `{"type": 3}`}}), "GenerateOptions.Sampling"},
		{"kwargs", chatErr(m, ggload.ChatOptions{Kwargs: map[string]string{"x": "{"}}), `ChatOptions.Kwargs["x"]`},
		{"tools", chatErr(m, ggload.ChatOptions{Tools: []chat.Tool{{Name: "f", Parameters: "{"}}}), "ChatOptions.Tools: f's parameters"},
		{"tool choice", chatErr(m, ggload.ChatOptions{ToolChoice: "sometimes"}), "sometimes"},
	}
	for _, r := range requests {
		if r.err == nil || !strings.Contains(r.err.Error(), r.want) || !strings.Contains(r.err.Error(), tinyWords) {
			t.Errorf("%s: %v, want it to name %s and the model", r.name, r.err, r.want)
		}
	}
}

func embedErr(m *ggload.Model) error {
	_, err := m.Embed(context.Background(), []string{"x"})
	return err
}

func generateErr(m *ggload.Model, g ggload.GenerateOptions) error {
	for _, err := range m.Generate(context.Background(), "x", g) {
		if err != nil {
			return err
		}
	}
	return nil
}

func chatErr(m *ggload.Model, c ggload.ChatOptions) error {
	_, err := m.Chat(context.Background(), []chat.Message{{Role: "user", Content: "x"}}, c)
	return err
}

// A hub model (hf:OWNER/NAME[:QUANT]) comes into the Hugging Face cache
// from a loopback hub, and gives the text the same file gives by its
// path; offline, with the hub gone, the cache serves it.
func TestHub(t *testing.T) {
	testenv.Runtime(t)
	data, err := os.ReadFile(tinyWords)
	if err != nil {
		t.Fatal(err)
	}
	h := hubtest.New(t, hubtest.Repo{ID: "ggload-test/tiny-words-GGUF", Files: []hubtest.File{
		{Path: "tiny-words-Q8_0.gguf", Data: data},
		{Path: "tiny-words-Q4_K_M.gguf", Data: data},
	}})
	cache := t.TempDir()
	t.Setenv("MODEL_ENDPOINT", h.URL)
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("LLAMA_CACHE", "")
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_TOKEN", "")
	g := ggload.GenerateOptions{NPredict: 8, Sampling: sample.Params{Seed: 42}}
	want := generate(t, open(t, tinyWords, ggload.Options{}), "the people", g)
	const name = "hf:ggload-test/tiny-words-GGUF:Q8_0"
	m := open(t, name, ggload.Options{})
	if !strings.HasPrefix(m.Path(), cache) || !strings.HasSuffix(m.Path(), "tiny-words-Q8_0.gguf") {
		t.Errorf("path %s: want the Q8_0 file in the cache %s", m.Path(), cache)
	}
	if got := generate(t, m, "the people", g); got != want {
		t.Errorf("from the hub %q, from the path %q", got, want)
	}
	h.Lock()
	h.Down = true
	h.Unlock()
	off := open(t, name, ggload.Options{Offline: true})
	if off.Path() != m.Path() {
		t.Errorf("offline: %s, online %s", off.Path(), m.Path())
	}
	if got := generate(t, off, "the people", g); got != want {
		t.Errorf("offline %q, from the path %q", got, want)
	}
	// the negative control: a quant the cache lacks, offline
	if _, err := ggload.Open(context.Background(), "hf:ggload-test/tiny-words-GGUF:Q2_K", cpu(ggload.Options{Offline: true, HubFile: "tiny-words-Q2_K.gguf"})); err == nil || !strings.Contains(err.Error(), "Q2_K") {
		t.Errorf("offline, a file the cache lacks: %v", err)
	}
}
