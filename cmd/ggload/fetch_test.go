package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/native"
)

// fetchEnv gives the test a user cache of its own and an environment that
// names no npm registry.
func fetchEnv(t *testing.T) string {
	cache := t.TempDir()
	t.Setenv("GGLOAD_CACHE", cache)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("USERPROFILE", home)
	for _, k := range []string{"GGLOAD_NPM_REGISTRY", "npm_config_registry", "NPM_CONFIG_REGISTRY", "npm_config_userconfig", "NPM_CONFIG_USERCONFIG"} {
		t.Setenv(k, "")
	}
	return cache
}

// npmServer serves body as the pinned tarball of the set, at the path an
// npm registry serves it, and counts the requests.
func npmServer(t *testing.T, set string, body []byte) (*httptest.Server, *atomic.Int32) {
	pkg, _, ok := native.Load().Package(set)
	if !ok {
		t.Fatalf("no package pinned for %s", set)
	}
	want := "/" + pkg + "/-/" + set + "-" + native.Load().NPMVersion + ".tgz"
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.URL.Path != want {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func smallTarball(t *testing.T, set string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range map[string]string{
		"package/LICENSE":                          "MIT",
		"package/bins/" + set + "/libggml-base.so": "base",
		"package/bins/" + set + "/libggml.so":      "core",
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A tarball that is not the pinned one is refused: exit 1, the package and
// both hashes named, nothing installed.
func TestFetchRefusesWrongHash(t *testing.T) {
	fetchEnv(t)
	tgz := smallTarball(t, "linux-x64")
	srv, requests := npmServer(t, "linux-x64", tgz)
	dir := t.TempDir()
	out, err := runCLI(t, "fetch", "--registry", srv.URL, "--dir", dir, "linux-x64")
	_, pinned, _ := native.Load().Package("linux-x64")
	got := sha256.Sum256(tgz)
	if !errors.Is(err, bindings.ErrChecksum) || requests.Load() != 1 {
		t.Fatalf("want the checksum refused after one request, got %v (%d requests)\n%s", err, requests.Load(), out)
	}
	for _, part := range []string{"@node-llama-cpp/linux-x64@3.22.1", "got " + hex.EncodeToString(got[:]), "want " + pinned, "nothing installed"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error does not name %q: %v", part, err)
		}
	}
	if code := exitCode(err, nil, io.Discard); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("%s holds %d entries", dir, len(ents))
	}
}

// A set stamped with the pin is up to date: said so, and no registry is
// asked.
func TestFetchUpToDate(t *testing.T) {
	fetchEnv(t)
	srv, requests := npmServer(t, "linux-x64", nil)
	dir := t.TempDir()
	pin := native.Load()
	pkg, sha, _ := pin.Package("linux-x64")
	set := filepath.Join(dir, "linux-x64")
	if err := os.MkdirAll(set, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(set, ".prebuilt"), []byte(pkg+"@"+pin.NPMVersion+" "+sha+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "fetch", "--registry", srv.URL, "--dir", dir, "linux-x64", "linux-x64")
	if err != nil || out != "linux-x64: up to date in "+set+" (@node-llama-cpp/linux-x64@3.22.1)\n" || requests.Load() != 0 {
		t.Fatalf("%v, %d requests:\n%s", err, requests.Load(), out)
	}
}

// With no set named, fetch says what it picked for this machine and why.
func TestFetchDefaultSets(t *testing.T) {
	fetchEnv(t)
	dir := t.TempDir()
	pin := native.Load()
	var want []string
	for _, s := range bindings.PrebuiltSets() {
		if !s.Default {
			continue
		}
		want = append(want, s.Name)
		pkg, sha, _ := pin.Package(s.Name)
		if err := os.MkdirAll(filepath.Join(dir, s.Name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, s.Name, ".prebuilt"), []byte(pkg+"@"+pin.NPMVersion+" "+sha+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runCLI(t, "fetch", "--dir", dir)
	if len(want) == 0 {
		if err == nil || !strings.Contains(err.Error(), "no prebuilt set is pinned for "+bindings.Platform()) || !strings.Contains(err.Error(), "scripts/build-native.sh") {
			t.Fatalf("%s: %v", bindings.Platform(), err)
		}
		return
	}
	if err != nil || !strings.HasPrefix(out, "no set named: fetching linux-x64 (the CPU set)") || !strings.Contains(out, "linux-x64-cuda (needs the CUDA 13 runtime") {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, s := range want {
		if !strings.Contains(out, s+": up to date in "+filepath.Join(dir, s)) {
			t.Errorf("%s not up to date:\n%s", s, out)
		}
	}
}

// The command line: a set the pin does not have, a registry that is not
// https, no registry at all, --help.
func TestFetchArgs(t *testing.T) {
	fetchEnv(t)
	dir := t.TempDir()
	_, err := runCLI(t, "fetch", "--dir", dir, "linux-x46")
	if code := exitCode(err, nil, io.Discard); code != 2 || !strings.Contains(err.Error(), "did you mean linux-x64?") {
		t.Errorf("unknown set: exit %d, %v", code, err)
	}
	_, err = runCLI(t, "fetch", "--registry", "http://example.invalid/", "--dir", dir, "linux-x64")
	if code := exitCode(err, nil, io.Discard); code != 1 || !strings.Contains(err.Error(), "plain http is refused but to a loopback address; use https") {
		t.Errorf("plain http: exit %d, %v", code, err)
	}
	_, err = runCLI(t, "fetch", "--dir", dir, "linux-x64")
	if !errors.Is(err, bindings.ErrNoRegistry) || !strings.Contains(err.Error(), "--registry URL") || !strings.Contains(err.Error(), "GGLOAD_NPM_REGISTRY") {
		t.Errorf("no registry: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("%s holds %d entries", dir, len(ents))
	}
	out, err := runCLI(t, "fetch", "--help")
	if !errors.Is(err, errHelp) || !strings.HasPrefix(out, "usage: ggload fetch [SET...] [--registry URL] [--dir DIR]") || !strings.Contains(out, "GGLOAD_NPM_REGISTRY") || !strings.Contains(out, "linux-x64-vulkan") {
		t.Errorf("--help: %v\n%s", err, out)
	}
}

// The pinned linux-x64-vulkan tarball (the one scripts/fetch-native.sh
// keeps in the user cache), served by a loopback registry: fetch installs
// what the script installs, the same bytes, a set the bindings take; a
// second run is up to date, and a run without the registry takes the
// tarball it cached.
func TestFetchPinnedTarball(t *testing.T) {
	const set = "linux-x64-vulkan"
	pin := native.Load()
	pkg, sha, _ := pin.Package(set)
	realCache, err := bindings.CacheDir()
	if err != nil {
		t.Skip(err)
	}
	name := strings.ReplaceAll(strings.TrimPrefix(pkg, "@"), "/", "-") + "-" + pin.NPMVersion + ".tgz"
	tgz, err := os.ReadFile(filepath.Join(realCache, "npm", name))
	if err != nil {
		testenv.Missing(t, "vulkan", "no pinned %s tarball in %s (scripts/fetch-native.sh %s)", set, filepath.Join(realCache, "npm"), set)
	}
	if s := sha256.Sum256(tgz); hex.EncodeToString(s[:]) != sha {
		t.Fatalf("%s in the user cache is not the pinned tarball", name)
	}
	want := map[string][]byte{}
	tr := tarReader(t, tgz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		base, ok := strings.CutPrefix(hdr.Name, "package/bins/"+set+"/")
		if hdr.Name == "package/LICENSE" {
			base, ok = "LICENSE.node-llama-cpp", true
		} else if !strings.Contains(base, ".so") {
			ok = false
		}
		if ok {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			want[base] = b
		}
	}

	cache := fetchEnv(t)
	srv, requests := npmServer(t, set, tgz)
	dir := t.TempDir()
	out, err := runCLI(t, "fetch", "--registry", srv.URL+"/", "--dir", dir, set)
	setDir := filepath.Join(dir, set)
	if err != nil || !strings.HasPrefix(out, set+": installed ") || !strings.Contains(out, " in "+setDir+" ("+pkg+"@"+pin.NPMVersion+" from "+srv.URL+"/") {
		t.Fatalf("%v\n%s", err, out)
	}
	ents, err := os.ReadDir(setDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(want)+1 {
		t.Errorf("%d files installed, want %d and the stamp", len(ents), len(want))
	}
	for base, b := range want {
		if got, err := os.ReadFile(filepath.Join(setDir, base)); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: %d bytes, %v; want the tarball's %d", base, len(got), err, len(b))
		}
	}
	for _, absent := range []string{"llama-addon.node", "_nlcBuildMetadata.json"} {
		if _, err := os.Stat(filepath.Join(setDir, absent)); err == nil {
			t.Errorf("%s installed", absent)
		}
	}
	if b, err := os.ReadFile(filepath.Join(setDir, ".prebuilt")); err != nil || string(b) != pkg+"@"+pin.NPMVersion+" "+sha+"\n" {
		t.Errorf("stamp %q, %v", b, err)
	}
	if loc, err := bindings.Find(bindings.FindOptions{Dir: setDir}); err != nil || filepath.Base(loc.Core) != "libggml.vulkan.v0.5.0.so" {
		t.Errorf("Find: %+v, %v", loc, err)
	}

	out, err = runCLI(t, "fetch", "--registry", srv.URL, "--dir", dir, set)
	if err != nil || out != set+": up to date in "+setDir+" ("+pkg+"@"+pin.NPMVersion+")\n" || requests.Load() != 1 {
		t.Fatalf("second run: %v, %d requests\n%s", err, requests.Load(), out)
	}
	if err := os.RemoveAll(setDir); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	out, err = runCLI(t, "fetch", "--dir", dir, set)
	if err != nil || !strings.Contains(out, "from the cached "+filepath.Join(cache, "npm", name)) {
		t.Fatalf("from the cached tarball: %v\n%s", err, out)
	}
}

func tarReader(t *testing.T, tgz []byte) *tar.Reader {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	return tar.NewReader(zr)
}
