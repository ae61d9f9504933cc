package httpapi_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// openaiNPM is the npm openai package's version the test installs.
const openaiNPM = "openai@6.30.1"

// nodeClient installs the npm openai client into the user cache (once)
// and returns the directory node runs the client script in.
func nodeClient(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, "llama", "no %s for the npm openai client (scripts/lib.sh installs nodejs and npm)", tool)
		}
	}
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "npm-clients", openaiNPM)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		cmd := exec.Command("npm", "install", "--no-save", "--no-audit", "--no-fund", "--legacy-peer-deps", "--prefix", dir, openaiNPM)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install %s: %v\n%s", openaiNPM, err, out)
		}
	}
	src, err := os.ReadFile(filepath.Join("testdata", "openai_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.mjs"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runNode(t *testing.T, dir string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command("node", append([]string{"client.mjs"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node client.mjs %v: %v\n%s", args, err, stderr)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("node's output %q: %v", out, err)
	}
	return v
}

// The npm openai client, run by node, reads ggload's chat (at once,
// streamed, with tools), completions and embeddings as it reads
// llama-server's.
func TestOpenAINodeClient(t *testing.T) {
	dir := nodeClient(t)
	text := textModel(t, "llama", "llama-spm", 2)
	bert := textModel(t, "bert", "bert-bge", 2)
	c := config{nCtx: 1024, nParallel: 1, alias: "tiny", jinja: true}
	ce := config{nCtx: 512, nParallel: 2, nBatch: 128, embedding: true, pooling: place.PoolingMean, alias: "tiny"}
	ours, _ := newServer(t, text, c)
	oursE, _ := newServer(t, bert, ce)
	g := runNode(t, dir, ours.URL, oursE.URL)
	theirs := startLlama(t, text, c)
	theirsE := startLlama(t, bert, ce)
	w := runNode(t, dir, theirs.URL, theirsE.URL)
	if g["chat"].(map[string]any)["text"] != g["stream"].(map[string]any)["text"] {
		t.Errorf("ours: chat %v, streamed %v", g["chat"], g["stream"])
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("ours %v\nllama-server %v", g, w)
	}
}
