package pool_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/serve/pool"
)

// TestSleepIdle: --sleep-idle-seconds unloads a model no request used
// for that long (it shows as sleeping, and a request loads it again); a
// model's own keep-alive takes priority, a pinned model stays, and a
// model in use never sleeps.
func TestSleepIdle(t *testing.T) {
	a, b, c := modelFile(t, 7), modelFile(t, 11), modelFile(t, 13)
	p := newPool(t, pool.Params{SleepIdle: 100 * time.Millisecond})
	p.Add("a", cpuOptions(a))
	ob := cpuOptions(b)
	ob.KeepAlive = -1 // until evicted
	p.Add("b", ob)
	oc := cpuOptions(c)
	oc.Pin = true
	p.Add("c", oc)
	busy := acquire(t, p, "a")
	acquire(t, p, "b").Release()
	acquire(t, p, "c").Release()
	time.Sleep(300 * time.Millisecond)
	for n, want := range map[string]pool.Status{"a": pool.Loaded, "b": pool.Loaded, "c": pool.Loaded} {
		if s := status(t, p, n); s != want {
			t.Fatalf("%s is %s, want %s", n, s, want)
		}
	}
	busy.Release()
	waitStatus(t, p, "a", pool.Sleeping)
	time.Sleep(200 * time.Millisecond)
	if status(t, p, "b") != pool.Loaded || status(t, p, "c") != pool.Loaded {
		t.Fatal("a model kept alive or pinned went to sleep")
	}
	// a request wakes it
	l := acquire(t, p, "a")
	if status(t, p, "a") != pool.Loaded {
		t.Fatal("not woken")
	}
	l.Release()
}

// TestUnloadWhileBusy: Unload takes no new request and lets the running
// one finish; past the stop timeout it ends it (serve.ErrClosed), and a
// request for the model then loads it anew.
func TestUnloadWhileBusy(t *testing.T) {
	a := modelFile(t, 7)
	for _, force := range []bool{false, true} {
		p := newPool(t, pool.Params{StopTimeout: 100 * time.Millisecond})
		p.Add("a", cpuOptions(a))
		l := acquire(t, p, "a")
		done := make(chan error, 1)
		go func() { done <- p.Unload(context.Background(), "a") }()
		// the model takes no new request while it drains
		for {
			in, _ := p.Model("a")
			if in.Stopping {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := p.Acquire(context.Background(), "a", false); !errors.Is(err, pool.ErrNotLoaded) {
			t.Fatalf("a request that does not load, for a draining model: %v", err)
		}
		// (a request that loads waits, and would load it again once it
		// is gone)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := p.Acquire(ctx, "a", true)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a request for a draining model: %v", err)
		}
		if force {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			o := l.Engine().Defaults()
			o.NPredict = 2
			if _, err := l.Engine().Complete(context.Background(), []int32{1, 500}, o, nil); !errors.Is(err, serve.ErrClosed) {
				t.Fatalf("a request after the stop timeout: %v", err)
			}
			l.Release()
		} else {
			greedy(t, l, []int32{1, 500}, 2)
			l.Release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if s := status(t, p, "a"); s != pool.Unloaded || held(p) != 0 {
			t.Fatalf("%s, %d held", s, held(p))
		}
		acquire(t, p, "a").Release()
		p.Close()
	}
}

// TestFileChanged: a resident model whose file is replaced is not
// trusted: the next request finds it changed, the model unloads and
// loads the new file; a file that disappears fails the next request
// with the reason.
func TestFileChanged(t *testing.T) {
	dir := t.TempDir()
	a := copyModel(t, modelFile(t, 7), dir, "a.gguf")
	b := modelFile(t, 11)
	p := newPool(t, pool.Params{})
	p.Add("a", cpuOptions(a))
	prompt := []int32{1, 500, 600}
	l := acquire(t, p, "a")
	before := greedy(t, l, prompt, 6)
	l.Release()
	// replaced under the same name (as a download or a copy replaces it)
	tmp := copyModel(t, b, dir, "a.gguf.tmp")
	if err := os.Rename(tmp, a); err != nil {
		t.Fatal(err)
	}
	l = acquire(t, p, "a")
	after := greedy(t, l, prompt, 6)
	ref := newPool(t, pool.Params{})
	ref.Add("b", cpuOptions(b))
	lb := acquire(t, ref, "b")
	want := greedy(t, lb, prompt, 6)
	lb.Release()
	if slices.Equal(after, before) || !slices.Equal(after, want) {
		t.Fatalf("after the change %v, before %v, the new file's %v", after, before, want)
	}
	l.Release()
	// written in place with its modification time set back: the inode's
	// change time tells
	fi, _ := os.Stat(a)
	f, err := os.OpenFile(a, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("GGUF"), 0) // (the same bytes)
	f.Close()
	os.Chtimes(a, fi.ModTime(), fi.ModTime())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := p.Subscribe(ctx)
	l = acquire(t, p, "a")
	l.Release()
	sawStale := false
	for ev := range events {
		if ev.Model == "a" && errors.Is(ev.Err, pool.ErrStale) {
			sawStale = true
			t.Log(ev.Err)
		}
		if ev.Model == "a" && ev.Status == pool.Loaded && ev.Err == nil && sawStale {
			break
		}
	}
	// removed
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	_, err = p.Acquire(context.Background(), "a", true)
	if !errors.Is(err, pool.ErrLoad) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a removed file: %v", err)
	}
	t.Log(err)
	if in, _ := p.Model("a"); in.Status != pool.Unloaded || !errors.Is(in.Err, os.ErrNotExist) || held(p) != 0 {
		t.Fatalf("%s %v, %d held", in.Status, in.Err, held(p))
	}
}
