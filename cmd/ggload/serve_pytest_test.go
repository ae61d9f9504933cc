package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/lab/llamaserver"
	"github.com/ggload/ggload/lab/testenv"
)

// pinTestFiles are the pin's server test files (tools/server/tests/unit)
// this suite runs; the ones left out serve what ggload does not do yet
// (MCP servers, the agent tools, the CORS proxy, images, speculative
// decoding).
var pinTestFiles = []string{
	"test_basic.py", "test_chat_completion.py", "test_compat_anthropic.py", "test_compat_gcp.py",
	"test_compat_oai_responses.py", "test_completion.py", "test_ctx_shift.py", "test_embedding.py",
	"test_ignore_eos.py", "test_infill.py", "test_kv_keep_only_active.py", "test_lora.py", "test_metrics.py",
	"test_rerank.py", "test_router.py", "test_security.py", "test_sleep.py", "test_slot_save.py",
	"test_stream.py", "test_template.py", "test_tokenize.py", "test_tool_call.py",
}

// pinTestSample is the default run's sample (GGLOAD_HTTP_ALL=1 runs every
// file).
var pinTestSample = []string{"test_tokenize.py", "test_basic.py", "test_infill.py", "test_ignore_eos.py"}

// presetPatch makes the presets of the pin's tests/utils.py load local
// files: GGLOAD_PRESET_MODELS maps a preset's name to its model.
const presetPatch = `

# ggload: the presets' Hugging Face models are local files, made by the
# test command (GGLOAD_PRESET_MODELS: preset name -> path)
import json as _ggload_json
_ggload_models = _ggload_json.loads(os.environ.get("GGLOAD_PRESET_MODELS", "{}"))
def _ggload_local(_name, _fn):
    def _preset():
        s = _fn()
        if _name in _ggload_models:
            s.model_hf_repo = None
            s.model_hf_file = None
            s.model_file = _ggload_models[_name]
        return s
    return staticmethod(_preset)
for _ggload_n, _ggload_f in list(ServerPreset.__dict__.items()):
    if isinstance(_ggload_f, staticmethod) and _ggload_n != "load_all":
        setattr(ServerPreset, _ggload_n, _ggload_local(_ggload_n, _ggload_f.__func__))

# the router preset's models (test_router.py names them by their Hugging
# Face names) are the local files of a presets file, made by the test
# command (GGLOAD_ROUTER_PRESET), whose sections carry those names
_ggload_router_ini = os.environ.get("GGLOAD_ROUTER_PRESET")
if _ggload_router_ini:
    _ggload_router = ServerPreset.router
    def _ggload_router_local():
        s = _ggload_router()
        s.models_preset = _ggload_router_ini
        return s
    ServerPreset.router = staticmethod(_ggload_router_local)

# a test that names a Hugging Face model of its own cannot run here: no
# model is fetched from outside
_ggload_start = ServerProcess.start
def _ggload_start_local(self, *args, **kwargs):
    if self.model_hf_repo or self.model_url or self.mmproj_url:
        import pytest
        pytest.skip("needs a Hugging Face model, which cannot be fetched here")
    return _ggload_start(self, *args, **kwargs)
ServerProcess.start = _ggload_start_local
`

// openaiStub stands for the python openai package, which cannot be
// installed here: a test that makes a client is skipped with that reason
// (and listed as such), the rest of its file runs.
const openaiStub = `import pytest

NEEDS = "needs the python openai package, which cannot be installed here"


class OpenAI:
    def __init__(self, *args, **kwargs):
        pytest.skip(NEEDS)
`

// pytestCounts are one test file's outcomes.
type pytestCounts struct {
	Passed, Failed, Skipped int
	FailedNames             []string
	PassedNames             []string
	// NeedOpenAI are the tests skipped for want of the python openai
	// package, NeedHF those that need a Hugging Face model
	NeedOpenAI, NeedHF []string
}

// runPinTests runs the pin's test files against the server at bin (a
// program that takes llama-server's options), in a copy of
// tools/server/tests whose presets load the local models; the outcomes
// by file.
func runPinTests(t *testing.T, bin string, files []string, models map[string]string, env []string) map[string]*pytestCounts {
	t.Helper()
	src := testenv.SourceTree(t)
	// the tests sit where they sit in the source tree, so that their
	// relative paths (../../../models/templates) find the pin's files
	root := t.TempDir()
	dir := filepath.Join(root, "tools", "server", "tests")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(src, "tools", "server", "tests"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(src, "models"), filepath.Join(root, "models")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(root, "tools"), filepath.Join(root, "tools", "server")} {
		os.Chmod(d, 0o755)
	}
	utils := filepath.Join(dir, "utils.py")
	os.Chmod(utils, 0o644)
	f, err := os.OpenFile(utils, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, presetPatch)
	f.Close()
	for _, d := range []string{dir, filepath.Join(dir, "unit")} {
		os.Chmod(d, 0o755)
	}
	os.MkdirAll(filepath.Join(dir, "tmp"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "openai.py"), []byte(openaiStub), 0o644); err != nil {
		t.Fatal(err)
	}
	mj, _ := json.Marshal(models)
	port, err := freeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	xmlPath := filepath.Join(dir, "results.xml")
	args := []string{"-m", "pytest", "-p", "no:cacheprovider", "-q", "--junitxml", xmlPath}
	for _, f := range files {
		args = append(args, "unit/"+f)
	}
	cmd := exec.Command(pythonBin(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LLAMA_SERVER_BIN_PATH="+bin, "GGLOAD_PRESET_MODELS="+string(mj), fmt.Sprintf("PORT=%d", port),
		"LLAMA_CACHE="+filepath.Join(dir, "tmp"), "LLAMA_ARG_DEVICE=none")
	cmd.Env = append(cmd.Env, env...)
	out, _ := cmd.CombinedOutput()
	res, err := readJUnit(xmlPath)
	if err != nil {
		t.Fatalf("pytest left no results (%v):\n%s", err, tail(string(out), 4000))
	}
	if testing.Verbose() {
		t.Logf("pytest's output:\n%s", tail(string(out), 20000))
	}
	return res
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// pythonBin is the Debian Python the test packages are installed for.
func pythonBin() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

// needPytest skips (or, where llama.cpp's oracles are required, fails)
// without Python's test packages.
func needPytest(t *testing.T) {
	t.Helper()
	for _, m := range []string{"pytest", "requests", "aiohttp", "filelock", "numpy", "prometheus_client", "wget"} {
		if err := exec.Command(pythonBin(), "-c", "import "+m).Run(); err != nil {
			testenv.Missing(t, "llama", "python3's %s for the pin's server tests (scripts/lib.sh installs python3-%s)", m, strings.ReplaceAll(m, "_", "-"))
		}
	}
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Class   string    `xml:"classname,attr"`
	Name    string    `xml:"name,attr"`
	Failure *struct{} `xml:"failure"`
	Error   *struct{} `xml:"error"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
}

func readJUnit(path string) (map[string]*pytestCounts, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s junitSuites
	if err := xml.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	out := map[string]*pytestCounts{}
	for _, su := range s.Suites {
		for _, c := range su.Cases {
			file := strings.TrimPrefix(c.Class, "unit.")
			if i := strings.IndexByte(file, '.'); i >= 0 {
				file = file[:i]
			}
			file += ".py"
			pc := out[file]
			if pc == nil {
				pc = &pytestCounts{}
				out[file] = pc
			}
			switch {
			case c.Failure != nil || c.Error != nil:
				pc.Failed++
				pc.FailedNames = append(pc.FailedNames, c.Name)
			case c.Skipped != nil:
				pc.Skipped++
				switch {
				case strings.Contains(c.Skipped.Message, "python openai package"):
					pc.NeedOpenAI = append(pc.NeedOpenAI, c.Name)
				case strings.Contains(c.Skipped.Message, "Hugging Face model"):
					pc.NeedHF = append(pc.NeedHF, c.Name)
				}
			default:
				pc.Passed++
				pc.PassedNames = append(pc.PassedNames, c.Name)
			}
		}
	}
	return out, nil
}

// ggloadServerScript is a program that runs this test binary as ggload
// serve, with llama-server's options.
func ggloadServerScript(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "ggload-serve")
	script := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q serve \"$@\"\n", asGgloadEnv, exe)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// llamaServerScript is llama-server of the pin, run with the native set's
// libraries and backends beside it.
func llamaServerScript(t *testing.T) string {
	t.Helper()
	bin := llamaserver.Build(t)
	lib := testenv.Runtime(t).Location().Dir
	dir := t.TempDir()
	// the backends are found beside the program: link them there
	ents, err := os.ReadDir(lib)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".so") {
			os.Symlink(filepath.Join(lib, e.Name()), filepath.Join(dir, e.Name()))
		}
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "llama-server")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "run-llama-server")
	script := fmt.Sprintf("#!/bin/sh\nLD_LIBRARY_PATH=%q exec %q \"$@\"\n", lib, exe)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPinServerTests runs the pin's own server tests (tools/server/tests,
// pytest) against ggload serve and against llama-server of the pin, on
// the same local models, file by file: every test that passes for
// llama-server must pass for ggload serve. The counts of both are in the
// log. A sample of files by default; GGLOAD_HTTP_ALL=1 runs them all.
func TestPinServerTests(t *testing.T) {
	needPytest(t)
	files := pinTestSample
	if os.Getenv("GGLOAD_HTTP_ALL") == "1" {
		files = pinTestFiles
	}
	if f := os.Getenv("GGLOAD_HTTP_FILES"); f != "" {
		files = strings.Split(f, ",")
	}
	models := presetModels(t)
	env := []string{"GGLOAD_ROUTER_PRESET=" + routerPresetsFile(t, models)}
	// (GGLOAD_HTTP_SIDE=ggload runs ggload's side alone, to look at it)
	side := os.Getenv("GGLOAD_HTTP_SIDE")
	t0 := time.Now()
	want := map[string]*pytestCounts{}
	if side != "ggload" {
		want = runPinTests(t, llamaServerScript(t), files, models, env)
	}
	t1 := time.Now()
	got := runPinTests(t, ggloadServerScript(t), files, models, env)
	t.Logf("llama-server: %v, ggload serve: %v", t1.Sub(t0).Round(time.Second), time.Since(t1).Round(time.Second))
	var names []string
	for f := range want {
		names = append(names, f)
	}
	for f := range got {
		if want[f] == nil {
			names = append(names, f)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%-32s %26s %26s\n", "file", "llama-server pass/fail/skip", "ggload pass/fail/skip")
	for _, f := range names {
		w, g := want[f], got[f]
		if w == nil {
			w = &pytestCounts{}
		}
		if g == nil {
			g = &pytestCounts{}
		}
		fmt.Fprintf(&b, "%-32s %26s %26s\n", f, fmt.Sprintf("%d/%d/%d", w.Passed, w.Failed, w.Skipped), fmt.Sprintf("%d/%d/%d", g.Passed, g.Failed, g.Skipped))
		passed := map[string]bool{}
		for _, n := range g.PassedNames {
			passed[n] = true
		}
		for _, n := range w.PassedNames {
			if !passed[n] {
				t.Errorf("%s::%s passes for llama-server, not for ggload serve", f, n)
			}
		}
		if len(w.FailedNames) > 0 {
			fmt.Fprintf(&b, "    fail for llama-server: %s\n", strings.Join(w.FailedNames, ", "))
		}
		if len(g.NeedOpenAI) > 0 {
			fmt.Fprintf(&b, "    need the python openai package: %s\n", strings.Join(g.NeedOpenAI, ", "))
		}
		if len(g.NeedHF) > 0 {
			fmt.Fprintf(&b, "    need a Hugging Face model of their own: %d tests\n", len(g.NeedHF))
		}
		if extra := minus(g.FailedNames, w.FailedNames); len(extra) > 0 {
			fmt.Fprintf(&b, "    fail for ggload alone: %s\n", strings.Join(extra, ", "))
		}
	}
	t.Logf("the pin's server tests:\n%s", b.String())
}

// routerModels are the models test_router.py names, each with the local
// file (of presetModels) that stands for it.
var routerModels = map[string]string{
	"ggml-org/tinygemma3-GGUF:Q8_0":              "tinygemma3",
	"ggml-org/test-model-stories260K:F32":        "stories15m_moe",
	"ggml-org/test-model-stories260K-infill:F32": "tinyllama_infill",
}

// routerPresetsFile is a presets file of the router's models: a section
// per model, named as the test names it, its model a local file.
func routerPresetsFile(t *testing.T, models map[string]string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range sortedKeys(routerModels) {
		fmt.Fprintf(&b, "[%s]\nmodel = %s\n\n", name, models[routerModels[name]])
	}
	p := filepath.Join(t.TempDir(), "router.ini")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func minus(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}
