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

// sameNodeClient: the npm openai client, run by node, reads ggload's
// chat (at once, streamed, with tools) and completions, or embeddings, as
// it reads llama-server's.
func sameNodeClient(t *testing.T, ours, theirs, what string) {
	dir := nodeClient(t)
	g, w := runNode(t, dir, what, ours), runNode(t, dir, what, theirs)
	if what == "chat" && g["chat"].(map[string]any)["text"] != g["stream"].(map[string]any)["text"] {
		t.Errorf("ours: chat %v, streamed %v", g["chat"], g["stream"])
	}
	if len(g) == 0 || !reflect.DeepEqual(g, w) {
		t.Errorf("ours %v\nllama-server %v", g, w)
	}
}
