package bindings

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ggload/ggload/native"
)

// tarEntry is one entry of a test tarball; a regular file unless typ says
// otherwise.
type tarEntry struct {
	name, body string
	typ        byte
	link       string
}

// tarball gzips a tar of the entries, as npm pack writes a package.
func tarball(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: e.typ, Linkname: e.link}
		if e.typ == 0 {
			hdr.Typeflag = tar.TypeReg
		} else {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
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

// linuxX64 is a package like the pinned linux-x64 one: the set's
// libraries beside files that are not taken (the Node.js addon, its
// metadata, another set's library, a link).
func linuxX64(t *testing.T) []byte {
	return tarball(t,
		tarEntry{name: "package/LICENSE", body: "MIT License\n"},
		tarEntry{name: "package/package.json", body: "{}"},
		tarEntry{name: "package/bins/linux-x64/_nlcBuildMetadata.json", body: "{}"},
		tarEntry{name: "package/bins/linux-x64/llama-addon.node", body: "addon"},
		tarEntry{name: "package/bins/linux-x64/libggml-base.so", body: "base"},
		tarEntry{name: "package/bins/linux-x64/libggml.v0.5.0.so", body: "core"},
		tarEntry{name: "package/bins/linux-x64/libggml-cpu-x64.so", body: "cpu"},
		tarEntry{name: "package/bins/linux-x64/libggml.so", typ: tar.TypeSymlink, link: "/etc/passwd"},
		tarEntry{name: "package/bins/linux-x64/libllama.so", typ: tar.TypeLink, link: "package/LICENSE"},
		tarEntry{name: "package/bins/linux-x64-vulkan/libggml-vulkan.so", body: "vulkan"},
	)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// testInstaller installs from the pin with linux-x64's sha256 replaced.
func testInstaller(sha string) installer {
	in := defaultInstaller()
	vars := map[string]string{}
	for k, v := range in.pin.Vars {
		vars[k] = v
	}
	vars["NPM_SHA256_linux_x64"] = sha
	in.pin.Vars = vars
	in.maxTarball, in.maxArchive = 1<<20, 1<<20
	return in
}

// isolate gives the test a user cache of its own and an environment that
// names no npm registry.
func isolate(t *testing.T) string {
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

const tgzPath = "/@node-llama-cpp/linux-x64/-/linux-x64-3.22.1.tgz"

// registryServer serves body as the linux-x64 package's tarball, and
// counts the requests.
func registryServer(t *testing.T, body []byte) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.URL.Path != tgzPath {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func TestInstallFromRegistry(t *testing.T) {
	cache := isolate(t)
	tgz := linuxX64(t)
	sha := sha256Hex(tgz)
	srv, requests := registryServer(t, tgz)
	in := testInstaller(sha)
	dir := t.TempDir()
	ctx := context.Background()
	opts := InstallOptions{Registry: srv.URL + "/"}

	res, err := in.install(ctx, "linux-x64", dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	set := filepath.Join(dir, "linux-x64")
	wantFiles := []string{"LICENSE.node-llama-cpp", "libggml-base.so", "libggml-cpu-x64.so", "libggml.v0.5.0.so"}
	if res.UpToDate || res.Dir != set || res.Package != "@node-llama-cpp/linux-x64@3.22.1" || !reflect.DeepEqual(res.Files, wantFiles) || res.URL != srv.URL+tgzPath {
		t.Fatalf("installed %+v", res)
	}
	// the set holds the files, the stamp and nothing else; no temporary
	// directory is left beside it
	if got := dirNames(t, set); !reflect.DeepEqual(got, append([]string{".prebuilt"}, wantFiles...)) {
		t.Errorf("set holds %v", got)
	}
	if got := dirNames(t, dir); !reflect.DeepEqual(got, []string{"linux-x64"}) {
		t.Errorf("install directory holds %v", got)
	}
	for name, want := range map[string]string{
		"LICENSE.node-llama-cpp": "MIT License\n", "libggml-base.so": "base", "libggml.v0.5.0.so": "core", "libggml-cpu-x64.so": "cpu",
		".prebuilt": "@node-llama-cpp/linux-x64@3.22.1 " + sha + "\n",
	} {
		if b, err := os.ReadFile(filepath.Join(set, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}
	// the tarball is kept under the name scripts/lib.sh gives it
	cached := filepath.Join(cache, "npm", "node-llama-cpp-linux-x64-3.22.1.tgz")
	if b, err := os.ReadFile(cached); err != nil || !bytes.Equal(b, tgz) || res.Tarball != cached {
		t.Errorf("cached tarball %s (%v), result's %s", cached, err, res.Tarball)
	}
	// Find takes the set
	loc, err := Find(FindOptions{Dir: set})
	if err != nil || filepath.Base(loc.Base) != "libggml-base.so" || filepath.Base(loc.Core) != "libggml.v0.5.0.so" {
		t.Errorf("Find: %+v, %v", loc, err)
	}

	// installed: left alone, no request
	res, err = in.install(ctx, "linux-x64", dir, opts)
	if err != nil || !res.UpToDate || res.Dir != set || res.Files != nil || requests.Load() != 1 {
		t.Fatalf("second install: %+v, %v, %d requests", res, err, requests.Load())
	}
	// a set of another tarball is replaced whole, from the cached tarball
	if err := os.WriteFile(filepath.Join(set, ".prebuilt"), []byte("@node-llama-cpp/linux-x64@3.22.0 0000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(set, "libggml-stale.so"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = in.install(ctx, "linux-x64", dir, InstallOptions{}) // no registry: none is needed
	if err != nil || res.UpToDate || res.URL != "" || requests.Load() != 1 {
		t.Fatalf("reinstall: %+v, %v, %d requests", res, err, requests.Load())
	}
	if got := dirNames(t, set); !reflect.DeepEqual(got, append([]string{".prebuilt"}, wantFiles...)) {
		t.Errorf("reinstalled set holds %v", got)
	}
	if got := dirNames(t, dir); !reflect.DeepEqual(got, []string{"linux-x64"}) {
		t.Errorf("install directory holds %v after a reinstall", got)
	}
	// a cached tarball that is not the pinned one is downloaded again
	if err := os.WriteFile(cached, []byte("not the tarball"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(set); err != nil {
		t.Fatal(err)
	}
	res, err = in.install(ctx, "linux-x64", dir, opts)
	if err != nil || res.URL == "" || requests.Load() != 2 {
		t.Fatalf("install over a wrong cached tarball: %+v, %v, %d requests", res, err, requests.Load())
	}
	if b, err := os.ReadFile(cached); err != nil || !bytes.Equal(b, tgz) {
		t.Errorf("the cached tarball was not replaced: %v", err)
	}
	if got := dirNames(t, filepath.Join(cache, "npm")); !reflect.DeepEqual(got, []string{"node-llama-cpp-linux-x64-3.22.1.tgz"}) {
		t.Errorf("npm cache holds %v", got)
	}
}

// The negative control: a tarball that is not the pinned one is refused,
// named with both hashes, and nothing is installed or kept.
func TestInstallRefusesWrongHash(t *testing.T) {
	cache := isolate(t)
	tgz := linuxX64(t)
	srv, _ := registryServer(t, tgz)
	want := sha256Hex([]byte("the pinned tarball"))
	dir := filepath.Join(t.TempDir(), "lib")
	_, err := testInstaller(want).install(context.Background(), "linux-x64", dir, InstallOptions{Registry: srv.URL})
	var ie *InstallError
	if !errors.Is(err, ErrChecksum) || !errors.As(err, &ie) || ie.Set != "linux-x64" {
		t.Fatalf("want ErrChecksum in an InstallError, got %v", err)
	}
	for _, part := range []string{"@node-llama-cpp/linux-x64@3.22.1", "got " + sha256Hex(tgz), "want " + want, srv.URL + tgzPath, "nothing installed"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error does not name %q: %v", part, err)
		}
	}
	if got := dirNames(t, dir); got != nil {
		t.Errorf("%s holds %v", dir, got)
	}
	if got := dirNames(t, filepath.Join(cache, "npm")); got != nil {
		t.Errorf("npm cache holds %v", got)
	}

	// through Install and the real pin: the same refusal
	_, err = Install(context.Background(), "linux-x64", dir, InstallOptions{Registry: srv.URL})
	_, pinned, _ := native.Load().Package("linux-x64")
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "want "+pinned) {
		t.Fatalf("Install: want ErrChecksum against %s, got %v", pinned, err)
	}
	if got := dirNames(t, dir); got != nil {
		t.Errorf("%s holds %v", dir, got)
	}
}

// An archive with an entry whose path leaves the package is refused, with
// nothing installed and nothing written outside.
func TestInstallRefusesEscapingEntry(t *testing.T) {
	for _, name := range []string{
		"package/bins/linux-x64/../../../../escaped.so",
		"../escaped.so",
		"/tmp/escaped.so",
		`package\..\..\escaped.dll`,
		"C:/escaped.dll",
		"package/docs/../../escaped.txt", // not taken, still refused
	} {
		t.Run(strings.NewReplacer("/", "_", `\`, "_").Replace(name), func(t *testing.T) {
			isolate(t)
			tgz := tarball(t,
				tarEntry{name: "package/LICENSE", body: "MIT"},
				tarEntry{name: "package/bins/linux-x64/libggml-base.so", body: "base"},
				tarEntry{name: name, body: "escaped"},
			)
			srv, _ := registryServer(t, tgz)
			root := t.TempDir()
			dir := filepath.Join(root, "a", "b", "lib")
			_, err := testInstaller(sha256Hex(tgz)).install(context.Background(), "linux-x64", dir, InstallOptions{Registry: srv.URL})
			if !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), strconv.Quote(name)) {
				t.Fatalf("want ErrUnsafeArchive naming %q, got %v", name, err)
			}
			if got := dirNames(t, dir); len(got) != 0 {
				t.Errorf("%s holds %v", dir, got)
			}
			for _, d := range []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b")} {
				for _, n := range dirNames(t, d) {
					if strings.HasPrefix(n, "escaped") {
						t.Errorf("%s written in %s", n, d)
					}
				}
			}
		})
	}
}

// What the archive lacks, or holds too much of, is refused.
func TestInstallRefusesBadArchives(t *testing.T) {
	big := strings.Repeat("x", 2<<20)
	for _, c := range []struct {
		what    string
		tgz     []byte
		wantErr string
	}{
		{"no LICENSE", tarball(t, tarEntry{name: "package/bins/linux-x64/libggml-base.so", body: "base"}), "no package/LICENSE"},
		{"no libraries", tarball(t, tarEntry{name: "package/LICENSE", body: "MIT"}, tarEntry{name: "package/bins/linux-x64/llama-addon.node", body: "x"}), "no libraries in the archive's package/bins/linux-x64/"},
		{"a link as LICENSE", tarball(t, tarEntry{name: "package/LICENSE", typ: tar.TypeSymlink, link: "/etc/passwd"}), "package/LICENSE is not a regular file"},
		{"a library twice", tarball(t, tarEntry{name: "package/LICENSE", body: "MIT"}, tarEntry{name: "package/bins/linux-x64/libggml-base.so", body: "a"}, tarEntry{name: "./package/bins/linux-x64/libggml-base.so", body: "b"}), "appears twice"},
		{"not gzip", []byte("plain text"), "not a gzipped tarball"},
		{"truncated", linuxX64(t)[:200], "bad tarball"},
		{"unpacks to more than the bound", tarball(t, tarEntry{name: "package/LICENSE", body: "MIT"}, tarEntry{name: "package/bins/linux-x64/libggml-base.so", body: big}), "unpacks to more than 1048576 bytes"},
	} {
		t.Run(c.what, func(t *testing.T) {
			isolate(t)
			srv, _ := registryServer(t, c.tgz)
			dir := t.TempDir()
			in := testInstaller(sha256Hex(c.tgz))
			in.maxTarball = 4 << 20
			_, err := in.install(context.Background(), "linux-x64", dir, InstallOptions{Registry: srv.URL})
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("want an error with %q, got %v", c.wantErr, err)
			}
			if got := dirNames(t, dir); len(got) != 0 {
				t.Errorf("%s holds %v", dir, got)
			}
		})
	}
}

// A download above the bound is refused, whether the server declares its
// length or streams it.
func TestInstallBoundsDownload(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 3<<20)
	for _, declared := range []bool{true, false} {
		isolate(t)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if declared {
				w.Header().Set("Content-Length", "3145728")
			} else {
				w.(http.Flusher).Flush() // chunked: no length declared
			}
			w.Write(body)
		}))
		dir := t.TempDir()
		_, err := testInstaller(sha256Hex(body)).install(context.Background(), "linux-x64", dir, InstallOptions{Registry: srv.URL})
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "more than") || !strings.Contains(err.Error(), "1048576") {
			t.Errorf("declared %v: want the bound named, got %v", declared, err)
		}
		if got := dirNames(t, filepath.Join(os.Getenv("GGLOAD_CACHE"), "npm")); got != nil {
			t.Errorf("declared %v: npm cache holds %v", declared, got)
		}
	}
}

// Redirects are followed to https only; plain http is taken from a
// loopback address alone.
func TestInstallRedirectsAndSchemes(t *testing.T) {
	tgz := linuxX64(t)
	in := testInstaller(sha256Hex(tgz))
	ctx := context.Background()
	redirect := func(to string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, to, http.StatusFound)
		}))
		t.Cleanup(srv.Close)
		return srv
	}

	// loopback http to loopback http: followed
	isolate(t)
	files, _ := registryServer(t, tgz)
	res, err := in.install(ctx, "linux-x64", t.TempDir(), InstallOptions{Registry: redirect(files.URL + tgzPath).URL})
	if err != nil || res.URL == "" {
		t.Fatalf("loopback redirect: %+v, %v", res, err)
	}
	// to plain http elsewhere: refused before any connection
	isolate(t)
	_, err = in.install(ctx, "linux-x64", t.TempDir(), InstallOptions{Registry: redirect("http://example.invalid/x.tgz").URL})
	if err == nil || !strings.Contains(err.Error(), "redirect to http://example.invalid/x.tgz refused: redirects are followed to https only") {
		t.Fatalf("redirect to plain http: %v", err)
	}
	// https, and from https to plain http on loopback: refused
	tlsFiles := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			http.Redirect(w, r, files.URL+tgzPath, http.StatusFound)
			return
		}
		w.Write(tgz)
	}))
	t.Cleanup(tlsFiles.Close)
	isolate(t)
	res, err = in.install(ctx, "linux-x64", t.TempDir(), InstallOptions{Registry: tlsFiles.URL, Client: tlsFiles.Client()})
	if err != nil || !strings.HasPrefix(res.URL, "https://") {
		t.Fatalf("https: %+v, %v", res, err)
	}
	isolate(t)
	tlsDown := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, files.URL+tgzPath, http.StatusFound)
	}))
	t.Cleanup(tlsDown.Close)
	_, err = in.install(ctx, "linux-x64", t.TempDir(), InstallOptions{Registry: tlsDown.URL, Client: tlsDown.Client()})
	if err == nil || !strings.Contains(err.Error(), "redirects are followed to https only") {
		t.Fatalf("https to http: %v", err)
	}
	// registries refused as given, even where no download needs one
	for reg, why := range map[string]string{
		"http://example.invalid/":      "plain http is refused but to a loopback address",
		"ftp://127.0.0.1/":             "scheme ftp: want https",
		"example.invalid/npm":          "not an absolute URL",
		"https://example.invalid/?x=1": "takes no query",
	} {
		isolate(t)
		_, err := in.install(ctx, "linux-x64", t.TempDir(), InstallOptions{Registry: reg})
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: want %q, got %v", reg, why, err)
		}
	}
	// a 404 names the URL and the status
	isolate(t)
	_, err = in.install(ctx, "linux-x64", t.TempDir(), InstallOptions{Registry: files.URL + "/mirror"})
	if err == nil || !strings.Contains(err.Error(), "GET "+files.URL+"/mirror"+tgzPath+": 404 Not Found") {
		t.Fatalf("404: %v", err)
	}
}

// The registry comes from the option, GGLOAD_NPM_REGISTRY, npm's
// environment variable, then the user's .npmrc, in that order; with none,
// the error says how to give one.
func TestInstallFindsRegistry(t *testing.T) {
	isolate(t)
	_, err := findRegistry()
	if !errors.Is(err, ErrNoRegistry) {
		t.Fatalf("want ErrNoRegistry, got %v", err)
	}
	for _, part := range []string{"--registry URL", "GGLOAD_NPM_REGISTRY", "npm config set registry"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error does not say %q: %v", part, err)
		}
	}
	// through install: nothing cached, nothing installed, the reason named
	dir := t.TempDir()
	if _, err := testInstaller(sha256Hex(nil)).install(context.Background(), "linux-x64", dir, InstallOptions{}); !errors.Is(err, ErrNoRegistry) || !strings.Contains(err.Error(), "install linux-x64 (@node-llama-cpp/linux-x64@3.22.1)") {
		t.Fatalf("install without a registry: %v", err)
	}

	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(home, ".npmrc")
	if err := os.WriteFile(rc, []byte("; npm's user configuration\nfund=false\nregistry = https://npmrc.example.invalid/ ; a comment\n[section]\nregistry=https://section.example.invalid/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(wantURL, wantFrom string) {
		t.Helper()
		r, err := findRegistry()
		if err != nil || r.base.String() != wantURL || r.from != wantFrom {
			t.Errorf("registry %v from %q, %v; want %s from %q", r.base, r.from, err, wantURL, wantFrom)
		}
	}
	check("https://npmrc.example.invalid/", "registry= in "+rc)
	other := filepath.Join(t.TempDir(), "npmrc")
	if err := os.WriteFile(other, []byte("registry=\"https://${GGLOAD_TEST_HOST}/npm/\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GGLOAD_TEST_HOST", "userconfig.example.invalid")
	t.Setenv("npm_config_userconfig", other)
	check("https://userconfig.example.invalid/npm/", "registry= in "+other)
	t.Setenv("npm_config_registry", "https://env.example.invalid/")
	check("https://env.example.invalid/", "npm_config_registry")
	t.Setenv("GGLOAD_NPM_REGISTRY", "https://ggload.example.invalid/")
	check("https://ggload.example.invalid/", "GGLOAD_NPM_REGISTRY")
	t.Setenv("GGLOAD_NPM_REGISTRY", "http://ggload.example.invalid/")
	if _, err := findRegistry(); err == nil || !strings.Contains(err.Error(), "(GGLOAD_NPM_REGISTRY): plain http is refused") {
		t.Errorf("plain http from the environment: %v", err)
	}

	for text, want := range map[string]string{
		"": "",
		"registry=https://a/\nregistry=https://b/": "https://b/",
		"  registry =  'https://a/#x'  ":           "https://a/#x",
		"# registry=https://a/":                    "",
		"@scope:registry=https://a/":               "",
		"registry=https://a/\r\n":                  "https://a/",
	} {
		if got := npmrcRegistry(text); got != want {
			t.Errorf("npmrcRegistry(%q) = %q, want %q", text, got, want)
		}
	}
}

// The tarball's URL and file name follow npm's and the scripts' naming.
func TestTarballNaming(t *testing.T) {
	r, err := parseRegistry("https://example.invalid/npm/", "as given")
	if err != nil {
		t.Fatal(err)
	}
	for pkg, want := range map[string]string{
		"@node-llama-cpp/linux-x64": "https://example.invalid/npm/@node-llama-cpp/linux-x64/-/linux-x64-3.22.1.tgz",
		"node-llama-cpp":            "https://example.invalid/npm/node-llama-cpp/-/node-llama-cpp-3.22.1.tgz",
	} {
		if got := r.tarballURL(pkg, "3.22.1").String(); got != want {
			t.Errorf("%s: %s, want %s", pkg, got, want)
		}
	}
	if got := tarballName("@node-llama-cpp/linux-x64-vulkan", "3.22.1"); got != "node-llama-cpp-linux-x64-vulkan-3.22.1.tgz" {
		t.Errorf("tarball name %s", got)
	}
}

// Install with no directory looks in the user cache where Find looks, and
// leaves a set stamped with the pin alone without asking any registry.
func TestInstallDefaultsToUserCache(t *testing.T) {
	cache := isolate(t)
	pin := native.Load()
	pkg, sha, _ := pin.Package("linux-x64")
	set := filepath.Join(cache, "lib", pin.LlamaCppTag, "linux-x64")
	if err := os.MkdirAll(set, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(set, ".prebuilt"), []byte(pkg+"@"+pin.NPMVersion+" "+sha+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Install(context.Background(), "linux-x64", "", InstallOptions{})
	if err != nil || !res.UpToDate || res.Dir != set {
		t.Fatalf("Install: %+v, %v; want %s up to date", res, err, set)
	}
	// a set the pin does not have is refused with the pinned ones named
	for _, name := range []string{"darwin-arm64", "linux_x64", "../linux-x64"} {
		_, err := Install(context.Background(), name, "", InstallOptions{})
		if err == nil || !strings.Contains(err.Error(), "no prebuilt package is pinned for it (pinned: linux-x64, linux-x64-cuda, linux-x64-vulkan") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestPrebuiltSets(t *testing.T) {
	sets := PrebuiltSets()
	if Platform() != "linux-x64" {
		if len(sets) != 0 {
			t.Fatalf("%s has no pinned prebuilt set, got %v", Platform(), sets)
		}
		return
	}
	var names []string
	for _, s := range sets {
		names = append(names, s.Name)
		switch s.Name {
		case "linux-x64":
			if !s.Default {
				t.Errorf("the CPU set is not a default: %+v", s)
			}
		case "linux-x64-cuda":
			if s.Default || !strings.Contains(s.Why, "CUDA 13 runtime") {
				t.Errorf("the CUDA set: %+v", s)
			}
		case "linux-x64-vulkan":
			if s.Default != haveVulkanLoader() {
				t.Errorf("the Vulkan set: %+v with the loader %v", s, haveVulkanLoader())
			}
		}
	}
	if !reflect.DeepEqual(names, []string{"linux-x64", "linux-x64-cuda", "linux-x64-vulkan"}) {
		t.Errorf("sets %v", names)
	}
}
