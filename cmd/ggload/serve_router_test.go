package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/lab/llamaserver"
)

// startServe runs ggload serve with args on a free port and waits for
// /health; it is stopped when the test ends.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port, err := freeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"serve", "--host", "127.0.0.1", "--port", itoaPort(port)}, args...)...)
	cmd.Env = append(os.Environ(), asGgloadEnv+"=1")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	base := "http://127.0.0.1:" + itoaPort(port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		select {
		case <-done:
			t.Fatalf("ggload serve %s exited:\n%s", strings.Join(args, " "), log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ggload serve did not answer /health:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call is one request's status and decoded JSON body.
func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	json.Unmarshal(b, &v)
	return resp.StatusCode, v
}

// routerPresets gives beta a context, a budget of tokens and slots its
// own; the global section gives every model a token budget that alpha
// keeps.
const routerPresets = `[*]
n-predict = 5

[beta]
c = 2048
n = 3
np = 2
no-context-shift = true
`

// settingsOf are what a router's /props?model= tells of a model's
// options: its context, slots, and default budget of tokens.
func settingsOf(t *testing.T, base, model string) string {
	t.Helper()
	code, v := call(t, "GET", base+"/props?model="+model, "")
	if code != 200 {
		t.Fatalf("%s /props?model=%s: %d %v", base, model, code, v)
	}
	dg, _ := v["default_generation_settings"].(map[string]any)
	p, _ := dg["params"].(map[string]any)
	return fmt.Sprintf("n_ctx %v, total_slots %v, n_predict %v", dg["n_ctx"], v["total_slots"], p["n_predict"])
}

// ggload serve --models-dir serves each model with its options as
// llama-server's router gives them to its children: the presets file's
// global section, the model's own, and the router's command line over
// both (-c 512 wins over beta's c = 2048: 256 tokens in each of its 2
// slots), checked against llama-server's router; --models-max and
// --no-models-autoload as /props tells them, a model not loaded refused.
func TestServeRouter(t *testing.T) {
	models := presetModels(t)
	dir := t.TempDir()
	for name, src := range map[string]string{"alpha.gguf": models["tinyllama2"], "beta.gguf": models["tinyllama_infill"]} {
		if err := os.Symlink(src, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	ini := filepath.Join(t.TempDir(), "presets.ini")
	os.WriteFile(ini, []byte(routerPresets), 0o644)
	flags := []string{"--models-dir", dir, "--models-preset", ini, "-dev", "none", "-t", "2", "-c", "512", "--models-max", "1", "--no-models-autoload"}
	ours := startServe(t, flags...)
	if code, v := call(t, "GET", ours+"/props", ""); code != 200 || v["max_instances"] != 1.0 || v["models_autoload"] != false {
		t.Errorf("/props: %d %v", code, v)
	}
	if code, v := call(t, "POST", ours+"/completion", `{"model":"alpha","prompt":"x"}`); code != 400 || !strings.Contains(fmt.Sprint(v), "model is not loaded") {
		t.Errorf("a model not loaded, without autoload: %d %v", code, v)
	}
	for _, m := range []string{"alpha", "beta"} {
		if code, v := call(t, "POST", ours+"/models/load", `{"model":"`+m+`"}`); code != 200 {
			t.Fatalf("load %s: %d %v", m, code, v)
		}
	}
	got := map[string]string{}
	for _, m := range []string{"alpha", "beta"} {
		got[m] = settingsOf(t, ours+"", m+"&autoload=1")
	}
	t.Logf("ggload serve: %v", got)
	theirs := llamaserver.Start(t, llamaserver.Build(t), flags...)
	for _, m := range []string{"alpha", "beta"} {
		if w := settingsOf(t, theirs.URL, m+"&autoload=1"); got[m] != w {
			t.Errorf("%s: %s; llama-server's router: %s", m, got[m], w)
		}
	}
	if got["alpha"] == got["beta"] {
		t.Errorf("the preset changed nothing: %v", got)
	}
}

// A router's options refused: a bad preset key (named with its preset,
// as the pin names it), a model beside --models-dir, a sleep of 0.
func TestServeRouterRefuses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.ini")
	os.WriteFile(bad, []byte("[m]\nmodel = /x.gguf\nnot-an-option = 1\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--models-preset", bad, "--port", "0"}, "option 'not-an-option' not recognized in preset 'm'"},
		{[]string{"-m", "/x.gguf", "--models-dir", "/tmp"}, "--models-dir: llama-server's router mode"},
		{[]string{"--sleep-idle-seconds", "0"}, "invalid value: cannot be 0 or less than -1"},
		{[]string{"-m", "/x.gguf", "--sleep-idle-seconds", "5"}, "--sleep-idle-seconds: ggload unloads idle models in router mode"},
		{[]string{"--models-dir", "/tmp", "--lora", "/x.gguf", "--port", "0"}, "--lora: the router's models take no adapter yet"},
	} {
		cmd := exec.Command(exe, append([]string{"serve", "-dev", "none"}, c.args...)...)
		cmd.Env = append(os.Environ(), asGgloadEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("ggload serve %v: %v\n%s\nwant %q", c.args, err, out, c.want)
		}
	}
}
