package arch

import (
	"sort"
	"strings"
	"testing"
)

// The graph programs (what llama's graph builder reaches, gen/graph.go)
// decode and compile; an overloaded function's programs are NAME#k.
func TestGraphProgramsDecode(t *testing.T) {
	names := ProgramNames()
	sort.Strings(names)
	for _, want := range []string{"llama_model::build_graph", "llama_model_llama::build_arch_graph", "llama_model_llama::graph::graph",
		"llm_graph_context::llm_graph_context", "llm_graph_context::build_attn#2", "llm_graph_context::build_attn_mha",
		"llm_graph_context::build_ffn", "llama_kv_cache::get_k", "llama_kv_cache::cpy_v"} {
		if !programs.Has(want) {
			t.Errorf("no program %s", want)
		}
	}
	n := 0
	for _, name := range names {
		if !strings.Contains(name, "graph") && !strings.Contains(name, "kv_cache") && !strings.Contains(name, "adapter") && !strings.Contains(name, "#") {
			continue
		}
		n++
		if p, err := LookupProgram(name); err != nil || p == nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n < 80 {
		t.Errorf("only %d graph programs", n)
	}
}
