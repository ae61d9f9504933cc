package serve_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/serve"
)

// longOpts: a generation that only a limit stops.
func longOpts(e *serve.Engine, n int) serve.Options {
	o := opts(e, n, func(p *sample.Params) { p.Seed, p.IgnoreEOS = 17, true })
	o.Stream = true
	return o
}

// waitIdle waits until every slot is idle.
func waitIdle(t *testing.T, e *serve.Engine) []serve.SlotInfo {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		infos, err := e.Slots(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		busy := slices.ContainsFunc(infos, func(s serve.SlotInfo) bool { return s.IsProcessing })
		if !busy {
			return infos
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots still busy: %+v", infos)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A cancelled request, a request whose callback panics and one whose
// decode fails each end alone: the request beside them goes on to the
// same tokens it gives alone, and every slot is idle after.
func TestFaultsEndTheirRequestAlone(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	e := newEngine(t, path, 1024, serve.Params{})
	other := tokens(t, e, "The other request goes on")
	otherOpts := opts(e, 24, func(p *sample.Params) { p.Temp = 0 })
	alone, err := e.Complete(context.Background(), other, otherOpts, nil)
	if err != nil {
		t.Fatal(err)
	}
	// the failing decode: any batch that holds this prompt's first
	// token after BOS
	bad := tokens(t, e, "zebra crossing")
	poison := bad[1]
	if slices.Contains(other, poison) {
		t.Fatalf("the other prompt holds the poisoned token %d", poison)
	}
	e.SetDecodeHook(func(b infer.Batch) error {
		if slices.Contains(b.Tokens, poison) {
			return errors.New("a compute failure")
		}
		return nil
	})
	faults := []struct {
		name string
		run  func() error
	}{
		{"cancel", func() error {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := e.Complete(ctx, tokens(t, e, "Cancel me soon"), longOpts(e, 200), func(ev serve.Event) error {
				if ev.Token != nil {
					cancel()
				}
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				return errors.New("cancel: " + errString(err))
			}
			return nil
		}},
		{"panic", func() error {
			n := 0
			_, err := e.Complete(context.Background(), tokens(t, e, "Panic in the callback"), longOpts(e, 200), func(ev serve.Event) error {
				if ev.Token != nil {
					if n++; n == 3 {
						panic("the client broke")
					}
				}
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), "panicked") {
				return errors.New("panic: " + errString(err))
			}
			return nil
		}},
		{"decode", func() error {
			_, err := e.Complete(context.Background(), bad, opts(e, 8, nil), nil)
			var se *serve.Error
			if !errors.As(err, &se) || se.Msg != "Compute error." || se.Type != serve.ErrServer {
				return errors.New("decode: " + errString(err))
			}
			return nil
		}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			var wg sync.WaitGroup
			var got *serve.Result
			var gotErr, faultErr error
			wg.Add(2)
			go func() { defer wg.Done(); got, gotErr = e.Complete(context.Background(), other, otherOpts, nil) }()
			go func() { defer wg.Done(); faultErr = f.run() }()
			wg.Wait()
			if faultErr != nil {
				t.Error(faultErr)
			}
			if gotErr != nil {
				t.Fatalf("the other request: %v", gotErr)
			}
			// (the same count: its tokens themselves may differ from its
			// run alone, as on llama-server, where they depend on the cells
			// the cache gives its sequence next to the other's, which
			// timing decides: the attention sums over the cells in order)
			if len(got.Tokens) != len(alone.Tokens) {
				t.Errorf("the other request gave %d tokens, alone %d", len(got.Tokens), len(alone.Tokens))
			}
			waitIdle(t, e)
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// fds counts the process's open file descriptors.
func fds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// An engine that served, cancelled and failed requests leaves no
// goroutine and no file descriptor behind once closed (and its model):
// the counts before and after are the same.
func TestNoLeaks(t *testing.T) {
	testenv.Runtime(t)
	path := textModel(t, "llama", "llama-spm", 2)
	runtime.GC()
	g0, f0 := runtime.NumGoroutine(), fds(t)
	func() {
		e, closeAll := engineNoCleanup(t, path)
		defer closeAll()
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(50*(i+1))*time.Millisecond)
				defer cancel()
				if i%2 == 0 {
					ctx = context.Background()
				}
				e.Complete(ctx, tokens(t, e, "leak check"), longOpts(e, 6+i), nil)
			}()
		}
		wg.Wait()
		// a request still running when the engine closes ends with it:
		// its first token holds it until the close is under way (a sleep
		// let a fast machine finish it first)
		done := make(chan error, 1)
		started, release := make(chan struct{}), make(chan struct{})
		var first sync.Once
		go func() {
			_, err := e.Complete(context.Background(), tokens(t, e, "closing"), longOpts(e, 400), func(ev serve.Event) error {
				if ev.Token != nil {
					first.Do(func() {
						close(started)
						<-release
					})
				}
				return nil
			})
			done <- err
		}()
		<-started
		close(release)
		if err := e.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; err == nil {
			t.Error("a request outlived its engine")
		}
		if _, err := e.Complete(context.Background(), []int32{1}, e.Defaults(), nil); !errors.Is(err, serve.ErrClosed) {
			t.Errorf("a request to a closed engine: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		g1, f1 := runtime.NumGoroutine(), fds(t)
		if g1 <= g0 && f1 <= f0 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines %d → %d, fds %d → %d\n%s", g0, g1, f0, f1, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Requests whose grammar does not parse, or leaves the sampled token no
// way through, end alone with llama-server's errors; queued behind a
// busy slot, they leave it to the requests after them (the pin drops
// such a task and serves no other deferred one, waiting forever once its
// slots are idle).
func TestGrammarFaultsEndTheirRequestAlone(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	e := newEngine(t, path, 1024, serve.Params{}, func(cp *place.ContextParams) { cp.NParallel = 1 })
	bad := opts(e, 4, func(p *sample.Params) { p.Grammar = "root ::= (" })
	stuck := opts(e, 6, func(p *sample.Params) { p.Grammar, p.IgnoreEOS, p.Temp = `root ::= "yes"`, true, 0 })
	good := opts(e, 4, func(p *sample.Params) { p.Grammar, p.Temp = `root ::= [a-z]+`, 0 })
	prompt := tokens(t, e, "Is it")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pend, err := e.Post(ctx, []serve.Request{
		{Prompt: prompt, Options: longOpts(e, 16)},
		{Prompt: prompt, Options: bad},
		{Prompt: prompt, Options: stuck},
		{Prompt: prompt, Options: bad},
		{Prompt: prompt, Options: good},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		typ serve.ErrorType
		msg string
	}{
		{}, {serve.ErrInvalidRequest, "Failed to initialize samplers: failed to parse grammar"},
		{serve.ErrServer, "got exception: Unexpected empty grammar stack after accepting piece: "},
		{serve.ErrInvalidRequest, "Failed to initialize samplers: failed to parse grammar"}, {},
	}
	for i, p := range pend {
		res, err := p.Wait(nil)
		var se *serve.Error
		switch {
		case want[i].msg == "" && err != nil:
			t.Errorf("request %d: %v", i, err)
		case want[i].msg == "" && i == len(pend)-1 && (len(res.Tokens) == 0 || strings.Trim(res.Content, "abcdefghijklmnopqrstuvwxyz") != ""):
			t.Errorf("request %d: %q, not the grammar's", i, res.Content)
		case want[i].msg != "" && (!errors.As(err, &se) || se.Type != want[i].typ || !strings.HasPrefix(se.Msg, want[i].msg)):
			t.Errorf("request %d: %v, want %q", i, err, want[i].msg)
		}
	}
	waitIdle(t, e)
}
