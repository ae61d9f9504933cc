package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/lab/testenv"
)

// Every option ggload serve shows is one of the pin's, with the pin's
// environment variable; the server's options of the pin's llama-server
// are each accepted or refused by name.
func TestServeOptionsOfThePin(t *testing.T) {
	src := testenv.SourceTree(t)
	argCpp, err := os.ReadFile(filepath.Join(src, "common", "arg.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := parsePinOptions(string(argCpp))
	if err != nil {
		t.Fatal(err)
	}
	pin := map[string]pinOption{}
	for _, o := range all {
		for _, n := range append(append([]string{}, o.names...), o.neg...) {
			pin[n] = o
		}
	}
	pf, sf := defaultPlaceFlags(), newServeFlags()
	s := serveOptions(&pf, &sf)
	for _, g := range s.groups {
		// (plan's and run's groups have tests of their own)
		if !strings.HasPrefix(g.title, "server") && !strings.HasPrefix(g.title, "engine") && !strings.HasPrefix(g.title, "chat") && !strings.HasPrefix(g.title, "router") && !strings.HasPrefix(g.title, "refused") {
			continue
		}
		for _, o := range g.opts {
			for _, n := range append(append([]string{}, o.names...), o.neg...) {
				p, ok := pin[n]
				if !ok {
					if n != "-h" && n != "--help" && n != "--usage" && n != "--version" && !strings.HasPrefix(n, "--ggload") {
						t.Errorf("%s: not an option of the pin", n)
					}
					continue
				}
				if o.env != "" && p.env != "" && o.env != p.env {
					t.Errorf("%s: environment variable %s, the pin's %s", n, o.env, p.env)
				}
			}
		}
	}
	// the server's own options (set_examples names the server alone)
	for _, o := range all {
		if !strings.Contains(o.body, "set_examples({LLAMA_EXAMPLE_SERVER})") {
			continue
		}
		if _, ok := s.lookup(o.names[0]); !ok {
			t.Errorf("llama-server's %s is neither accepted nor refused by ggload serve", o.names[0])
		}
	}
}

// ggload serve starts on a model and answers; without a model it starts
// as a router with no models; later options are refused by name.
func TestServeCommand(t *testing.T) {
	models := presetModels(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port, err := freeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	start := func(args ...string) (*exec.Cmd, string) {
		cmd := exec.Command(exe, append([]string{"serve", "--host", "127.0.0.1", "--port", itoaPort(port), "-dev", "none"}, args...)...)
		cmd.Env = append(os.Environ(), asGgloadEnv+"=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		base := "http://127.0.0.1:" + itoaPort(port)
		deadline := time.Now().Add(60 * time.Second)
		for {
			resp, err := http.Get(base + "/health")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return cmd, base
				}
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal("ggload serve did not answer /health")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	stop := func(cmd *exec.Cmd) {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cmd, base := start("-m", models["tinyllama2"], "-c", "512", "-np", "2", "--alias", "tiny", "--api-key", "k")
	if code, _ := get(base + "/props"); code != 401 {
		t.Errorf("/props without the key: %d", code)
	}
	req, _ := http.NewRequest("POST", base+"/completion", strings.NewReader(`{"prompt":"Hi","n_predict":3}`))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/completion: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	stop(cmd)
	cmd, base = start()
	if code, body := get(base + "/v1/models"); code != 200 || !strings.Contains(body, `"data":[]`) {
		t.Errorf("router /v1/models: %d %s", code, body)
	}
	if code, body := get(base + "/props"); code != 200 || !strings.Contains(body, `"role":"router"`) {
		t.Errorf("router /props: %d %s", code, body)
	}
	stop(cmd)
	for _, opt := range [][]string{{"--tools", "all"}, {"--spec-type", "ngram"}, {"--path", "/tmp"}, {"--mcp-servers-json", "{}"}} {
		c := exec.Command(exe, append([]string{"serve"}, opt...)...)
		c.Env = append(os.Environ(), asGgloadEnv+"=1")
		out, err := c.CombinedOutput()
		if err == nil || !strings.Contains(string(out), opt[0]+" is llama.cpp's, not supported by ggload") {
			t.Errorf("ggload serve %v: %v %s", opt, err, out)
		}
	}
}

func itoaPort(p int) string { return strconv.Itoa(p) }
