package httpsrc_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/lab/hubtest"
)

// hubRepo is a repository as the converters' users publish one: two
// quantizations, one split in two, a projector and an importance matrix.
func hubRepo(t testing.TB) hubtest.Repo {
	return hubtest.Repo{ID: "ggload-test/tiny-GGUF", Files: []hubtest.File{
		{Path: ".gitattributes", Data: []byte("*.gguf filter=lfs\n"), Git: true},
		{Path: "README.md", Data: []byte("# tiny\n"), Git: true},
		{Path: "tiny-Q8_0.gguf", Data: modelBytes(t, 1)},
		{Path: "Q4_K_M/tiny-Q4_K_M-00001-of-00002.gguf", Data: modelBytes(t, 2)},
		{Path: "Q4_K_M/tiny-Q4_K_M-00002-of-00002.gguf", Data: modelBytes(t, 3)},
		{Path: "mmproj-tiny-f16.gguf", Data: modelBytes(t, 4)},
		{Path: "imatrix.gguf", Data: modelBytes(t, 5)},
	}}
}

// hubEnv points the hub and the cache at the test's: the endpoint by
// MODEL_ENDPOINT, the cache by HF_HUB_CACHE (LLAMA_CACHE, which wins over
// it, unset).
func hubEnv(t *testing.T, h *hubtest.Hub) string {
	cache := t.TempDir()
	t.Setenv("MODEL_ENDPOINT", h.URL)
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("LLAMA_CACHE", "")
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_TOKEN", "")
	return cache
}

func fileData(t *testing.T, r hubtest.Repo, path string) []byte {
	for _, f := range r.Files {
		if f.Path == path {
			return f.Data
		}
	}
	t.Fatalf("no %s in the repository", path)
	return nil
}

// cdnGets counts the hub's CDN's GETs.
func cdnGets(h *hubtest.Hub) int {
	n := 0
	for _, r := range h.Requests() {
		if strings.HasPrefix(r, "cdn GET") {
			n++
		}
	}
	return n
}

// -hf brings the file its tag names (Q4_K_M by default), every split of
// it and the projector into the cache as llama.cpp and huggingface_hub
// lay it out: refs/main the commit, blobs/ named by the sha256, the
// snapshot's entries relative links into blobs/. A second pull asks the
// hub for the tree but downloads nothing; offline, or with the hub down,
// the cache serves it alone.
func TestPull(t *testing.T) {
	repo := hubRepo(t)
	h := hubtest.New(t, repo)
	cache := hubEnv(t, h)
	ctx := context.Background()
	m, err := httpsrc.Pull(ctx, repo.ID, httpsrc.HubOptions{Mmproj: true})
	if err != nil {
		t.Fatal(err)
	}
	commit := hubtest.Commit(repo)
	dir := filepath.Join(cache, "models--ggload-test--tiny-GGUF")
	snap := filepath.Join(dir, "snapshots", commit)
	want := []string{filepath.Join(snap, "Q4_K_M", "tiny-Q4_K_M-00001-of-00002.gguf"), filepath.Join(snap, "Q4_K_M", "tiny-Q4_K_M-00002-of-00002.gguf")}
	if !slices.Equal(m.Files, want) || m.Mmproj != filepath.Join(snap, "mmproj-tiny-f16.gguf") || m.Commit != commit || m.Listed != "hub" {
		t.Fatalf("pulled %+v\nwant files %v", m, want)
	}
	if ref, err := os.ReadFile(filepath.Join(dir, "refs", "main")); err != nil || string(ref) != commit {
		t.Errorf("refs/main: %q, %v; want %s", ref, err, commit)
	}
	for _, p := range []string{"Q4_K_M/tiny-Q4_K_M-00001-of-00002.gguf", "Q4_K_M/tiny-Q4_K_M-00002-of-00002.gguf", "mmproj-tiny-f16.gguf"} {
		data := fileData(t, repo, p)
		entry := filepath.Join(snap, filepath.FromSlash(p))
		target, err := os.Readlink(entry)
		wantTarget := strings.Repeat("../", strings.Count(p, "/")+2) + "blobs/" + hubtest.SHA256(data)
		if err != nil || filepath.ToSlash(target) != wantTarget {
			t.Errorf("%s: link to %q (%v), want %q", p, target, err, wantTarget)
		}
		checkFile(t, entry, data)
	}
	blobs, _ := os.ReadDir(filepath.Join(dir, "blobs"))
	if len(blobs) != 3 {
		var names []string
		for _, b := range blobs {
			names = append(names, b.Name())
		}
		t.Errorf("blobs/ holds %v: want the three blobs alone, no partial or side file", names)
	}
	gets := cdnGets(h)

	// again: the tree is asked for, nothing downloaded
	if m2, err := httpsrc.Pull(ctx, repo.ID, httpsrc.HubOptions{Mmproj: true}); err != nil || !slices.Equal(m2.Files, want) {
		t.Fatalf("second pull: %v, %v", m2, err)
	}
	if n := cdnGets(h); n != gets {
		t.Errorf("a second pull downloaded %d files again", n-gets)
	}
	// offline: no request at all
	before := len(h.Requests())
	if m3, err := httpsrc.Pull(ctx, repo.ID+":q4_k_m", httpsrc.HubOptions{Offline: true, Mmproj: true}); err != nil || !slices.Equal(m3.Files, want) || m3.Listed != "cache" {
		t.Fatalf("offline pull: %+v, %v", m3, err)
	}
	if n := len(h.Requests()); n != before {
		t.Errorf("offline, %d requests", n-before)
	}
	// the hub down: the cache, and the reason it was used
	h.Lock()
	h.Down = true
	h.Unlock()
	m4, err := httpsrc.Pull(ctx, repo.ID, httpsrc.HubOptions{})
	if err != nil || !slices.Equal(m4.Files, want) || m4.Listed != "cache" || !strings.Contains(m4.Why, "503") {
		t.Fatalf("with the hub down: %+v, %v", m4, err)
	}
	// offline, a quantization the cache does not hold
	if _, err := httpsrc.Pull(ctx, repo.ID+":Q8_0", httpsrc.HubOptions{Offline: true}); !errors.Is(err, httpsrc.ErrHub) || !strings.Contains(err.Error(), "Q8_0") {
		t.Errorf("offline Q8_0, never pulled: %v", err)
	}
	// a repository the cache has never seen
	if _, err := httpsrc.Pull(ctx, "ggload-test/other", httpsrc.HubOptions{Offline: true}); !errors.Is(err, httpsrc.ErrHub) || !strings.Contains(err.Error(), "models--ggload-test--other") {
		t.Errorf("offline, a repository never pulled: %v", err)
	}
}

// The file is the tag's, in any case; -hff names one exactly; a tag or a
// file the repository lacks is refused with the list of its GGUF files;
// a git file (not LFS) is checked against its git blob's sha1.
func TestPullChoice(t *testing.T) {
	repo := hubRepo(t)
	repo.Files = append(repo.Files, hubtest.File{Path: "tiny-F16.gguf", Data: modelBytes(t, 6), Git: true})
	h := hubtest.New(t, repo)
	cache := hubEnv(t, h)
	snap := filepath.Join(cache, "models--ggload-test--tiny-GGUF", "snapshots", hubtest.Commit(repo))
	ctx := context.Background()
	for _, c := range []struct{ tag, file, want string }{
		{"q8_0", "", "tiny-Q8_0.gguf"},
		{"", "tiny-Q8_0.gguf", "tiny-Q8_0.gguf"},
		{"Q4_K_M", "tiny-F16.gguf", "tiny-F16.gguf"}, // -hff wins over the tag
		{"F16", "", "tiny-F16.gguf"},
	} {
		name := repo.ID
		if c.tag != "" {
			name += ":" + c.tag
		}
		m, err := httpsrc.Pull(ctx, name, httpsrc.HubOptions{File: c.file})
		if err != nil {
			t.Fatalf("%s -hff %q: %v", name, c.file, err)
		}
		if m.Path() != filepath.Join(snap, c.want) || m.Mmproj != "" {
			t.Errorf("%s -hff %q: %s (mmproj %q), want %s", name, c.file, m.Path(), m.Mmproj, c.want)
		}
		checkFile(t, m.Path(), fileData(t, repo, c.want))
	}
	for _, c := range []struct{ name, file, say string }{
		{repo.ID + ":IQ2_XS", "", "no model file of quantization IQ2_XS"},
		{repo.ID, "nope.gguf", "file 'nope.gguf' not found"},
		{"ggload-test", "", "expected <user>/<model>"},
		{"ggload-test/a..b", "", "not a repository name"},
	} {
		_, err := httpsrc.Pull(ctx, c.name, httpsrc.HubOptions{File: c.file})
		if !errors.Is(err, httpsrc.ErrHub) || !strings.Contains(err.Error(), c.say) {
			t.Errorf("%s -hff %q: %v, want %q", c.name, c.file, err, c.say)
		}
		if c.file == "nope.gguf" && !strings.Contains(err.Error(), " - tiny-Q8_0.gguf") {
			t.Errorf("the error lists no available file: %v", err)
		}
	}
}

// A blob whose bytes are not the sha256 the tree gives is refused and
// nothing of it stays; a private repository takes the token, which goes
// to the hub and never to its CDN; without it, the error says so.
func TestPullChecks(t *testing.T) {
	repo := hubRepo(t)
	repo.Private = true
	h := hubtest.New(t, repo)
	cache := hubEnv(t, h)
	ctx := context.Background()
	_, err := httpsrc.Pull(ctx, repo.ID, httpsrc.HubOptions{})
	if !errors.Is(err, httpsrc.ErrHub) || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Errorf("a private repository without a token: %v", err)
	}
	t.Setenv("HF_TOKEN", h.Token)
	h.Lock()
	h.Corrupt = true
	h.Unlock()
	_, err = httpsrc.Pull(ctx, repo.ID+":Q8_0", httpsrc.HubOptions{})
	if !errors.Is(err, httpsrc.ErrDigest) {
		t.Fatalf("a corrupt blob: %v", err)
	}
	blobs := filepath.Join(cache, "models--ggload-test--tiny-GGUF", "blobs")
	if left, _ := os.ReadDir(blobs); len(left) != 0 {
		t.Errorf("a refused blob left %d files in blobs/", len(left))
	}
	h.Lock()
	h.Corrupt = false
	h.Unlock()
	m, err := httpsrc.Pull(ctx, repo.ID+":Q8_0", httpsrc.HubOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, m.Path(), fileData(t, repo, "tiny-Q8_0.gguf"))
	for _, r := range h.Requests() {
		if strings.HasPrefix(r, "cdn") && strings.HasSuffix(r, " auth") {
			t.Errorf("the token went to the CDN: %s", r)
		}
		if strings.HasPrefix(r, "hub") && strings.HasSuffix(r, " noauth") && !strings.Contains(r, "refs") {
			t.Logf("(before the token) %s", r)
		}
	}
}

// A cache laid out by huggingface_hub (refs/main, snapshots/COMMIT/PATH
// linking to ../../blobs/HASH) serves -hf offline, and with the hub's
// tree the files already there are not downloaded again.
func TestPullHuggingfaceHubCache(t *testing.T) {
	repo := hubRepo(t)
	h := hubtest.New(t, repo)
	cache := hubEnv(t, h)
	commit := hubtest.Commit(repo)
	dir := filepath.Join(cache, "models--ggload-test--tiny-GGUF")
	data := fileData(t, repo, "tiny-Q8_0.gguf")
	oid := hubtest.SHA256(data)
	for _, d := range []string{"blobs", "refs", "snapshots/" + commit} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "blobs", oid), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../blobs/"+oid, filepath.Join(dir, "snapshots", commit, "tiny-Q8_0.gguf")); err != nil {
		t.Fatal(err)
	}
	m, err := httpsrc.Pull(context.Background(), repo.ID+":Q8_0", httpsrc.HubOptions{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, m.Path(), data)
	if _, err := httpsrc.Pull(context.Background(), repo.ID+":Q8_0", httpsrc.HubOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := cdnGets(h); n != 0 {
		t.Errorf("%d downloads of a file huggingface_hub had brought", n)
	}
	var walk []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			r, _ := filepath.Rel(dir, p)
			walk = append(walk, filepath.ToSlash(r))
		}
		return nil
	})
	if len(walk) != 3 {
		t.Errorf("the cache holds %v: want what huggingface_hub left, and no more", walk)
	}
}
