package main

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/ggload/ggload/lab/synth"
)

// snake is a JSON key as every --json writes them.
var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// badKeys lists the keys of v, at any depth, that are not snake_case;
// data says which objects are maps of data, whose keys are names, not
// field names (load's bytes_by_path and verified.by_device).
func badKeys(v any, path string, data map[string]bool) []string {
	var bad []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !data[path] && !snake.MatchString(k) {
				bad = append(bad, path+"."+k)
			}
			bad = append(bad, badKeys(e, path+"."+k, data)...)
		}
	case []any:
		for _, e := range x {
			bad = append(bad, badKeys(e, path+"[]", data)...)
		}
	}
	return bad
}

// Every --json writes its keys in snake_case, as llama.cpp's JSON does.
func TestJSONKeysSnakeCase(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 64, FF: 128, Heads: 2, Vocab: 64, Experts: 4, ExpertsUsed: 2})
	text := textModel(t, "llama", "llama-spm")
	data := map[string]bool{".load.bytes_by_path": true, ".verified.by_device": true} // maps keyed by names: the loader's paths, devices
	for _, args := range [][]string{
		{"devices", "--json"},
		{"inspect", path, "--json", "--full"},
		{"plan", path, "--json", "-dev", "none", "-md", path, "--tensors"},
		{"plan", path, "--json", "-fit", "off", "-ngl", "0"},
		{"load", path, "--json", "-dev", "none", "--verify"},
		{"run", text, "--json", "-dev", "none", "-p", "Hello", "-n", "2"},
		{"run", path, "--json", "-dev", "none", "--tokens", "1,2", "-n", "2"},
	} {
		out, err := runCLI(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if bad := badKeys(v, "", data); len(bad) > 0 {
			t.Errorf("%v: keys not in snake_case: %v", args, bad)
		}
	}
}
