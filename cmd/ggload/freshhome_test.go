package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/lab/hubtest"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/native"
)

// A newcomer's first minutes, as the README's front page gives them, in
// a fresh home: go install builds ggload; its first command says how to
// get the native libraries; ggload fetch installs them (from a loopback
// npm registry serving the pinned tarball); ggload run -hf brings a
// model from a loopback hub into the Hugging Face cache and prints the
// text ggload run prints for that file with the libraries of the
// checkout. Nothing of the checkout's native set, caches or settings is
// seen by the installed binary.
func TestFreshHome(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ggload with go install")
	}
	const set = "linux-x64-vulkan"
	pin := native.Load()
	pkg, sha, _ := pin.Package(set)
	realCache, err := bindings.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ReplaceAll(strings.TrimPrefix(pkg, "@"), "/", "-") + "-" + pin.NPMVersion + ".tgz"
	tgz, err := os.ReadFile(filepath.Join(realCache, "npm", name))
	if err != nil {
		testenv.Missing(t, "vulkan", "no pinned %s tarball in %s (scripts/fetch-native.sh %s)", set, filepath.Join(realCache, "npm"), set)
	}
	if s := sha256.Sum256(tgz); hex.EncodeToString(s[:]) != sha {
		t.Fatalf("%s in the user cache is not the pinned tarball", name)
	}
	registry, _ := npmServer(t, set, tgz)

	model := textModel(t, "llama", "llama-spm")
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	repo := hubtest.Repo{ID: "ggload-test/first-GGUF", Files: []hubtest.File{
		{Path: "README.md", Data: []byte("# first\n"), Git: true},
		{Path: "first-Q8_0.gguf", Data: data},
	}}
	hub := hubtest.New(t, repo)

	// go install, into a bin of the fresh home
	home := t.TempDir()
	bin := filepath.Join(home, "go", "bin")
	install := exec.Command("go", "install", "github.com/ggload/ggload/cmd/ggload")
	install.Env = append(os.Environ(), "GOBIN="+bin, "CGO_ENABLED=0")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	env := []string{"HOME=" + home, "GOBIN=" + bin}
	for _, k := range []string{"XDG_CACHE_HOME", "GGLOAD_CACHE", "GGLOAD_LIB_DIR", "GGLOAD_VARIANT", "GGLOAD_NPM_REGISTRY",
		"npm_config_registry", "NPM_CONFIG_REGISTRY", "npm_config_userconfig", "NPM_CONFIG_USERCONFIG",
		"LLAMA_CACHE", "HF_HUB_CACHE", "HF_HOME", "HF_ENDPOINT", "HF_TOKEN"} {
		env = append(env, k+"=")
	}
	env = append(env, "MODEL_ENDPOINT="+hub.URL)
	ggload := func(args ...string) (string, string, error) {
		cmd := exec.Command(filepath.Join(bin, "ggload"), args...)
		cmd.Dir = home
		cmd.Env = append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	text := []string{"-p", "Hello world", "-n", "8", "-s", "3", "-t", "2", "-dev", "none"}

	// the first command: no libraries, and the command that brings them
	_, stderr, err := ggload(append([]string{"run", "-hf", repo.ID}, text...)...)
	if err == nil || !strings.Contains(stderr, "ggload fetch") {
		t.Fatalf("the first run: %v\n%s", err, stderr)
	}
	// ggload fetch
	out, stderr, err := ggload("fetch", "--registry", registry.URL+"/", set)
	if err != nil || !strings.HasPrefix(out, set+": installed ") {
		t.Fatalf("ggload fetch: %v\n%s%s", err, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache", "ggload", "lib")); err != nil {
		t.Errorf("the libraries are not in the fresh home's cache: %v", err)
	}
	// ggload run -hf: the text of the file, with the checkout's libraries
	got, stderr, err := ggload(append([]string{"run", "-hf", repo.ID}, text...)...)
	if err != nil {
		t.Fatalf("ggload run -hf: %v\n%s", err, stderr)
	}
	want, err := runCLI(t, append([]string{"run", model}, text...)...)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || want == "" {
		t.Errorf("run -hf in the fresh home printed %q, run of the file %q", got, want)
	}
	snap := filepath.Join(home, ".cache", "huggingface", "hub", "models--ggload-test--first-GGUF", "snapshots", hubtest.Commit(repo), "first-Q8_0.gguf")
	if _, err := os.Stat(snap); err != nil {
		t.Errorf("the model is not in the fresh home's Hugging Face cache: %v", err)
	}
}
