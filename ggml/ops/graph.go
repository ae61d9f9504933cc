package ops

import (
	"fmt"
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// Graph is a ggml_cgraph of a context, with the count of what it holds
// that ggml_visit_parents checks as it expands it.
type Graph struct {
	h     bindings.Graph
	size  int
	in    map[*Tensor]bool // what build_forward_expand has visited
	nodes int              // of them, the nodes
	leafs int              // and the leafs
}

// NewGraph is ggml_new_graph_custom(ctx, size, false).
func (l *Lib) NewGraph(c *Context, size int) *Graph {
	return &Graph{h: l.b.NewGraphCustom(c.h, uintptr(size), false), size: size, in: map[*Tensor]bool{}}
}

// Size is the graph's size (its most nodes, and its most leafs).
func (g *Graph) Size() int { return g.size }

// Leafs is the leafs expanded into the graph so far.
func (g *Graph) Leafs() int { return g.leafs }

// fits checks that expanding the graph by t stays within its size, as
// ggml_visit_parents asserts (its nodes and its leafs both count up to the
// graph's size), and counts what t adds.
func (g *Graph) fits(op string, t *Tensor) error {
	var add []*Tensor
	seen := map[*Tensor]bool{}
	var visit func(t *Tensor)
	visit = func(t *Tensor) {
		if t == nil || g.in[t] || seen[t] {
			return
		}
		seen[t] = true
		for _, s := range t.Src {
			visit(wrap(s))
		}
		add = append(add, t)
	}
	visit(t)
	nodes, leafs := g.nodes, g.leafs
	for _, t := range add {
		if t.Op == 0 {
			leafs++
		} else {
			nodes++
		}
	}
	if err := assert(op, nodes <= g.size && leafs <= g.size, "cgraph->n_nodes < cgraph->size"); err != nil {
		return err
	}
	for _, t := range add {
		g.in[t] = true
	}
	g.nodes, g.leafs = nodes, leafs
	return nil
}

// Expand is ggml_build_forward_expand(g, t).
func (l *Lib) Expand(g *Graph, t *Tensor) error {
	if err := g.fits("ggml_build_forward_expand", t); err != nil {
		return err
	}
	l.b.BuildForwardExpand(g.h, t.c())
	return nil
}

// Order is ggml_build_forward_order(g, t): t and its parents in the
// graph, in this order, none marked to compute until a node that computes
// reaches them.
func (l *Lib) Order(g *Graph, t *Tensor) error {
	if err := g.fits("ggml_build_forward_order", t); err != nil {
		return err
	}
	l.b.BuildForwardOrder(g.h, t.c())
	return nil
}

// Select is ggml_build_forward_select(g, ts, n, idx): the graph gets each
// of ts, and idx's result.
func (l *Lib) Select(g *Graph, ts []*Tensor, idx int) (*Tensor, error) {
	const op = "ggml_build_forward_select"
	if err := assert(op, len(ts) > 0 && idx >= 0 && idx < len(ts), "idx >= 0 && idx < n_tensors"); err != nil {
		return nil, err
	}
	for _, t := range ts {
		if err := g.fits(op, t); err != nil {
			return nil, err
		}
	}
	return wrap(l.b.BuildForwardSel(g.h, (**bindings.Tensor)(unsafe.Pointer(&ts[0])), int32(len(ts)), int32(idx))), nil
}

// NNodes is ggml_graph_n_nodes.
func (l *Lib) NNodes(g *Graph) int { return int(l.b.GraphNNodes(g.h)) }

// Node is ggml_graph_node(g, i).
func (l *Lib) Node(g *Graph, i int) *Tensor { return wrap(l.b.GraphNode(g.h, int32(i))) }

// InputTensors is llama_graph_n_input_tensors: the graph's tensors flagged
// as inputs that a node is or uses.
func (l *Lib) InputTensors(g *Graph) int {
	const flagInput = 1 // GGML_TENSOR_FLAG_INPUT
	seen := map[*bindings.Tensor]bool{}
	n := l.NNodes(g)
	for i := range n {
		node := l.Node(g, i)
		if node.Flags&flagInput != 0 {
			seen[node.c()] = true
		}
		for _, src := range node.Src {
			if src == nil {
				break
			}
			if src.Flags&flagInput != 0 {
				seen[src] = true
			}
		}
	}
	return len(seen)
}

// GraphShape is what a scheduler's split changes in a graph it is given:
// the order of its nodes (a backend's graph_optimize reorders a split's
// nodes in place) and their sources (an input from another backend is
// replaced by the scheduler's copy of it, which lives until the
// scheduler's next reset).
type GraphShape struct {
	nodes []*Tensor
	srcs  [][bindings.MaxSrc]*bindings.Tensor
}

// Shape records g's nodes and their sources as they are now.
func (l *Lib) Shape(g *Graph) GraphShape {
	n := int(l.b.GraphNNodes(g.h))
	s := GraphShape{nodes: make([]*Tensor, n), srcs: make([][bindings.MaxSrc]*bindings.Tensor, n)}
	for i := range n {
		t := wrap(l.b.GraphNode(g.h, int32(i)))
		s.nodes[i], s.srcs[i] = t, t.Src
	}
	return s
}

// Restore puts g's nodes and their sources back as s recorded them.
func (l *Lib) Restore(g *Graph, s GraphShape) error {
	n := int(l.b.GraphNNodes(g.h))
	if n != len(s.nodes) {
		return fmt.Errorf("ggml: a graph of %d nodes restored to %d", n, len(s.nodes))
	}
	if n == 0 {
		return nil
	}
	nodes := unsafe.Slice(l.b.GraphNodes(g.h), n)
	for i, t := range s.nodes {
		nodes[i] = t.c()
		t.Src = s.srcs[i]
	}
	return nil
}
