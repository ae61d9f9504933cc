package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/lab/hubtest"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/native"
)

// freshHomeEnv is a fresh home with ggload installed in it by go install, and
// the loopback npm registry and hub it is to use.
type freshHomeEnv struct {
	dir, bin string
	env      []string
	registry string
	repo     string
	model    string // the hub's model file, in the checkout's cache
	commit   string // the hub's commit of the repository
}

func freshHome(t *testing.T) *freshHomeEnv {
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
	return &freshHomeEnv{dir: home, bin: filepath.Join(bin, "ggload"), env: env, registry: registry.URL + "/", repo: repo.ID, model: model, commit: hubtest.Commit(repo)}
}

// A newcomer's first minutes, as the README's front page gives them, in
// a fresh home: go install builds ggload; its first command says how to
// get the native libraries; ggload fetch installs them (from a loopback
// npm registry serving the pinned tarball); ggload run -hf brings a
// model from a loopback hub into the Hugging Face cache and prints the
// text ggload run prints for that file with the libraries of the
// checkout. Nothing of the checkout's native set, caches or settings is
// seen by the installed binary.
func TestFreshHome(t *testing.T) {
	const set = "linux-x64-vulkan"
	h := freshHome(t)
	home := h.dir
	ggload := func(args ...string) (string, string, error) {
		cmd := exec.Command(h.bin, args...)
		cmd.Dir = home
		cmd.Env = append(os.Environ(), h.env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	text := []string{"-p", "Hello world", "-n", "8", "-s", "3", "-t", "2", "-dev", "none"}

	// the first command: no libraries, and the command that brings them
	_, stderr, err := ggload(append([]string{"run", "-hf", h.repo}, text...)...)
	if err == nil || !strings.Contains(stderr, "ggload fetch") {
		t.Fatalf("the first run: %v\n%s", err, stderr)
	}
	// ggload fetch
	out, stderr, err := ggload("fetch", "--registry", h.registry, set)
	if err != nil || !strings.HasPrefix(out, set+": installed ") {
		t.Fatalf("ggload fetch: %v\n%s%s", err, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache", "ggload", "lib")); err != nil {
		t.Errorf("the libraries are not in the fresh home's cache: %v", err)
	}
	// ggload run -hf: the text of the file, with the checkout's libraries
	got, stderr, err := ggload(append([]string{"run", "-hf", h.repo}, text...)...)
	if err != nil {
		t.Fatalf("ggload run -hf: %v\n%s", err, stderr)
	}
	want, err := runCLI(t, append([]string{"run", h.model}, text...)...)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || want == "" {
		t.Errorf("run -hf in the fresh home printed %q, run of the file %q", got, want)
	}
	snap := filepath.Join(home, ".cache", "huggingface", "hub", "models--ggload-test--first-GGUF", "snapshots", h.commit, "first-Q8_0.gguf")
	if _, err := os.Stat(snap); err != nil {
		t.Errorf("the model is not in the fresh home's Hugging Face cache: %v", err)
	}
}

// The same first command in a real terminal (tmux): ggload offers to run
// ggload fetch, and on "y" installs the libraries and runs the command
// again, which now prints the model's text.
func TestFreshHomeInTerminal(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed (scripts/test.sh installs it)")
	}
	h := freshHome(t)
	text := []string{"-p", "Hello world", "-n", "8", "-s", "3", "-t", "2", "-dev", "none"}
	sock := fmt.Sprintf("ggload-fresh-test-%d", os.Getpid())
	tm := func(args ...string) string {
		out, err := exec.Command(tmux, append([]string{"-L", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// the registry as the environment names it, the Vulkan set as
	// GGLOAD_VARIANT asks for it: the command offered is ggload fetch of
	// that set
	script := fmt.Sprintf("cd %q && env %s GGLOAD_VARIANT=vulkan GGLOAD_NPM_REGISTRY=%s %q run -hf %s %s; echo \"[exit $?]\"; sleep 60",
		h.dir, strings.Join(shellQuoted(h.env), " "), h.registry, h.bin, h.repo, strings.Join(shellQuoted(text), " "))
	tm("new-session", "-d", "-s", "fresh", "-x", "200", "-y", "50", "bash", "-c", script)
	defer exec.Command(tmux, "-L", sock, "kill-server").Run()
	screen := func() string { return tm("capture-pane", "-p", "-t", "fresh", "-S", "-200") }
	waitFor := func(what string) string {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			s := screen()
			if strings.Contains(s, what) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %q; the terminal shows:\n%s", what, s)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	s := waitFor("Run it now? [y/N]")
	if !strings.Contains(s, "    ggload fetch linux-x64-vulkan\n") {
		t.Errorf("the command offered is not ggload fetch linux-x64-vulkan:\n%s", s)
	}
	tm("send-keys", "-t", "fresh", "y", "Enter")
	s = waitFor("[exit ")
	t.Logf("the terminal showed:\n%s", strings.TrimRight(s, "\n"))
	// the second run's text starts with the prompt's (the model's bytes
	// after it are escaped on a terminal; TestFreshHome holds them)
	if i := strings.Index(s, "ggload: again: ggload run -hf"); i < 0 || !strings.Contains(s[i:], "\n Hello world") {
		t.Errorf("no text after the second run's line:\n%s", s)
	}
	if !strings.Contains(s, "ggload: again: ggload run -hf") || !strings.Contains(s, "[exit 0]") {
		t.Errorf("no second run, or it failed:\n%s", s)
	}
}

// shellQuoted quotes each word for the shell.
func shellQuoted(words []string) []string {
	out := make([]string, len(words))
	for i, e := range words {
		out[i] = "'" + strings.ReplaceAll(e, "'", `'\''`) + "'"
	}
	return out
}
