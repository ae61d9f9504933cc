package bindings

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/native"
)

func TestFindMissingListsEveryPath(t *testing.T) {
	t.Setenv("GGLOAD_LIB_DIR", "") // the search below, not the one set
	cache := t.TempDir()
	t.Setenv("GGLOAD_CACHE", cache)
	_, err := Find(FindOptions{Variant: "no-such-variant"})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, Platform()+"-no-such-variant (no such directory)") {
		t.Errorf("error does not list the variant directory: %s", msg)
	}
	if !strings.Contains(msg, "scripts/fetch-native.sh") {
		t.Errorf("error does not say how to fetch: %s", msg)
	}
	if !strings.Contains(msg, filepath.Join(cache, "lib")) {
		t.Errorf("error does not list the user cache: %s", msg)
	}
}

// A program built outside the checkout finds the set scripts/fetch-native.sh
// installed in the user cache.
func TestFindInUserCache(t *testing.T) {
	t.Setenv("GGLOAD_LIB_DIR", "")
	cache := t.TempDir()
	t.Setenv("GGLOAD_CACHE", cache)
	set := filepath.Join(cache, "lib", native.Load().LlamaCppTag, Platform()+"-cachetest")
	if err := os.MkdirAll(set, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"libggml-base.so", "libggml.so"} {
		if err := os.WriteFile(filepath.Join(set, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	loc, err := Find(FindOptions{Variant: "cachetest"})
	if err != nil || loc.Dir != set || loc.Source != "user cache" {
		t.Fatalf("found %+v, %v; want %s from the user cache", loc, err, set)
	}
}

func TestFindDirWithoutLibraries(t *testing.T) {
	dir := t.TempDir()
	_, err := Find(FindOptions{Dir: dir})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "no libggml-base or libggml") {
		t.Fatalf("got %v", err)
	}
	// a base without a core is named as such
	if err := os.WriteFile(filepath.Join(dir, "libggml-base.so"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(FindOptions{Dir: dir}); err == nil || !strings.Contains(err.Error(), "no libggml core library") {
		t.Fatalf("got %v", err)
	}
}

func TestInspectDirNames(t *testing.T) {
	for _, c := range []struct {
		files             []string
		base, core, llama string
	}{
		{[]string{"libggml-base.so", "libggml.v0.5.0.so", "libllama.v0.5.0.so", "libllama-common.so"}, "libggml-base.so", "libggml.v0.5.0.so", "libllama.v0.5.0.so"},
		{[]string{"libggml-base.so", "libggml-base.so.0", "libggml.so", "libggml.so.0"}, "libggml-base.so", "libggml.so.0", ""},
		{[]string{"libggml-base.so", "libggml.vulkan.v0.5.0.so", "libllama.vulkan.v0.5.0.so"}, "libggml-base.so", "libggml.vulkan.v0.5.0.so", "libllama.vulkan.v0.5.0.so"},
	} {
		dir := t.TempDir()
		for _, f := range c.files {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		loc, why := inspectDir(dir)
		if why != "" {
			t.Fatalf("%v: %s", c.files, why)
		}
		rel := func(p string) string {
			if p == "" {
				return ""
			}
			return filepath.Base(p)
		}
		if rel(loc.Base) != c.base || rel(loc.Core) != c.core || rel(loc.Llama) != c.llama {
			t.Errorf("%v: got base %s core %s llama %s", c.files, rel(loc.Base), rel(loc.Core), rel(loc.Llama))
		}
	}
}
