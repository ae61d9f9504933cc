// Port of llama.cpp src/llama-adapter.cpp (v0.5.0): llama_adapter_lora as
// the graphs read it.

package graph

import (
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// LoRA is one LoRA adapter of a context as the graphs read it
// (llm_graph_context::build_lora_mm and build_lora_mm_id, the token
// embedding's input): per adapted model tensor the pair (lora_a, lora_b),
// the adapter's alpha (adapter.lora.alpha) and the scale it is applied
// with (llama_set_adapters_lora's).
type LoRA struct {
	Weights map[string][2]*ops.Tensor // by the model tensor's name
	Alpha   float32
	Scale   float32
}

// SetLoRAs sets the adapters the context's graphs are built with from
// now on, in the order the graphs add them (none: no adapter).
func (c *Context) SetLoRAs(l []LoRA) {
	if c.rs != nil && c.rs.s != nil {
		c.rs.s.loras = append([]LoRA(nil), l...)
	}
}

// lorasMap is the llm_graph_params loras: a map from each adapter (a
// llama_adapter_lora whose get_weight looks its ab_map up by the weight's
// name) to its scale.
func (s *GraphSession) lorasMap() *cpp.Map {
	m := &cpp.Map{Vals: []*cpp.Cell{}, Elem: ast.TF32}
	for _, l := range s.loras {
		ab := &cpp.Map{Vals: []*cpp.Cell{}, Elem: ast.TObj}
		for name, w := range l.Weights {
			o := newShared("llama_adapter_lora_weight")
			o.Fields["a"] = &cpp.Cell{T: ast.TPtr, V: cpp.Val{K: cpp.KNative, P: w[0]}}
			o.Fields["b"] = &cpp.Cell{T: ast.TPtr, V: cpp.Val{K: cpp.KNative, P: w[1]}}
			ab.Keys = append(ab.Keys, cpp.Str(name))
			ab.Vals = append(ab.Vals, &cpp.Cell{T: ast.TObj, V: cpp.Val{K: cpp.KObj, P: o}})
		}
		a := newShared("llama_adapter_lora")
		a.Fields["ab_map"] = &cpp.Cell{V: cpp.Val{K: cpp.KMap, P: ab}}
		a.Fields["alpha"] = &cpp.Cell{T: ast.TF32, V: cpp.Val{K: cpp.KFloat, T: ast.TF32, F: float64(l.Alpha)}}
		m.Keys = append(m.Keys, cpp.Val{K: cpp.KObj, P: a})
		m.Vals = append(m.Vals, &cpp.Cell{T: ast.TF32, V: cpp.Val{K: cpp.KFloat, T: ast.TF32, F: float64(l.Scale)}})
	}
	return m
}

// loraNodes answers llama_adapter_lora::get_n_nodes for the model's
// adapters that llama_context::graph_max_nodes counts: six nodes for each
// pair (a, b, the scale, the addition and the two products).
type loraNodes struct{ n int64 }

func (m loraNodes) HasMethod(_ *cpp.Object, name string) bool { return name == "get_n_nodes" }

func (m loraNodes) CallMethod(f *cpp.Frame, _ *cpp.Method, args []*ast.Node) (cpp.Val, error) {
	if len(args) != 0 {
		return cpp.Void, f.Errorf("get_n_nodes arguments")
	}
	return cpp.Int(m.n, ast.TU32), nil
}

// modelLoRAs is llama_model::loras as graph_max_nodes reads it: the
// adapters, each answering its node count.
func modelLoRAs(loras []LoRA) *cpp.Array {
	a := cpp.NewArray(ast.TPtr, len(loras), false)
	for i, l := range loras {
		o := cpp.NewObject("llama_adapter_lora")
		o.Shared, o.Methods = true, loraNodes{6 * int64(len(l.Weights))}
		a.Cells[i].V = cpp.Val{K: cpp.KObj, P: o}
	}
	return a
}
