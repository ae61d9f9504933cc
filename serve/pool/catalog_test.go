package pool_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/serve/pool"
)

// TestNames: a model answers to its name and its aliases; names and
// aliases that collide are refused as the router refuses them; an
// unknown name is NotFoundError.
func TestNames(t *testing.T) {
	a := modelFile(t, 7)
	p := newPool(t, pool.Params{})
	oa := cpuOptions(a)
	oa.Aliases = []string{"first", "uno"}
	if err := p.Add("a", oa); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		aliases []string
		want    string
	}{
		{"a", nil, "model 'a' appears multiple times"},
		{"uno", nil, "model name 'uno' conflicts with alias of model 'a'"},
		{"b", []string{"a"}, "alias 'a' for model 'b' conflicts with existing model name"},
		{"b", []string{"x", "first"}, "alias 'first' for model 'b' conflicts with alias of model 'a'"},
	} {
		o := cpuOptions(a)
		o.Aliases = tc.aliases
		if err := p.Add(tc.name, o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v, want %q", tc.name, tc.aliases, err, tc.want)
		}
	}
	l := acquire(t, p, "uno")
	if l.Name() != "a" {
		t.Fatal(l.Name())
	}
	l.Release()
	var nf *pool.NotFoundError
	if _, err := p.Acquire(context.Background(), "nope", true); !errors.As(err, &nf) || !errors.Is(err, pool.ErrNotFound) || err.Error() != "model 'nope' not found" {
		t.Fatal(err)
	}
	if err := p.Load(context.Background(), "a"); !errors.Is(err, pool.ErrRunning) {
		t.Fatalf("Load of a resident model: %v", err)
	}
	if err := p.Remove(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Model("uno"); !errors.Is(err, pool.ErrNotFound) || held(p) != 0 {
		t.Fatalf("after Remove: %v, %d held", err, held(p))
	}
}

// TestReload: reading the directory again adds new models, drops those
// whose files are gone (unloading them), keeps the others as they are
// (resident), and tells subscribers.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	src := modelFile(t, 7)
	for _, n := range []string{"keep.gguf", "gone.gguf"} {
		os.Symlink(src, filepath.Join(dir, n))
	}
	p := newPool(t, pool.Params{ModelsDir: dir, Defaults: cpuOptions("")})
	acquire(t, p, "keep").Release()
	acquire(t, p, "gone").Release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := p.Subscribe(ctx)
	os.Remove(filepath.Join(dir, "gone.gguf"))
	os.Symlink(src, filepath.Join(dir, "new.gguf"))
	if err := p.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range p.Models() {
		names = append(names, in.Name+":"+in.Status.String())
	}
	if strings.Join(names, " ") != "keep:loaded new:unloaded" || held(p) == 0 {
		t.Fatalf("%v, %d held", names, held(p))
	}
	var seen []string
	timeout := time.After(time.Minute)
	for len(seen) == 0 || seen[len(seen)-1] != "*:reload" {
		select {
		case ev := <-events:
			s := ev.Model + ":" + ev.Status.String()
			if ev.Removed {
				s = ev.Model + ":removed"
			}
			if ev.Reload {
				s = "*:reload"
			}
			seen = append(seen, s)
		case <-timeout:
			t.Fatalf("events: %v", seen)
		}
	}
	if strings.Join(seen, " ") != "gone:removed gone:unloaded *:reload" {
		t.Fatalf("events: %v", seen)
	}
}

// TestLoadOnStartup: presets marked load-on-startup load when the pool
// opens; more of them than --models-max is refused as the router refuses
// it.
func TestLoadOnStartup(t *testing.T) {
	ini := filepath.Join(t.TempDir(), "presets.ini")
	text := "[*]\ndevice = none\nc = 1024\ncache-ram = 0\nt = 1\n[one]\nmodel = " + modelFile(t, 7) + "\nload-on-startup = true\n[two]\nmodel = " + modelFile(t, 11) + "\nload-on-startup = 1\n"
	os.WriteFile(ini, []byte(text), 0o644)
	p := newPool(t, pool.Params{ModelsPreset: ini})
	waitStatus(t, p, "one", pool.Loaded)
	waitStatus(t, p, "two", pool.Loaded)
	if _, err := pool.New(testenv.Runtime(t), pool.Params{ModelsPreset: ini, ModelsMax: 1}); err == nil ||
		err.Error() != "number of models to load on startup (2) exceeds models_max (1)" {
		t.Fatal(err)
	}
}
