// Port of llama.cpp src/llama-kv-cache-dsv4.cpp (v0.5.0):
// llama_kv_cache_dsv4_context, the memory's view a graph reads.

package graph

import (
	"fmt"

	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// The DeepSeek-V4 memory's decoding view: what the pin's
// llama_kv_cache_dsv4_context holds for one ubatch once init_batch has
// planned it and apply has put it in the raw caches. The bookkeeping that
// computes it is infer's; here it becomes the members the graph builder
// reads (the raw context's read and write slot infos and its write
// ubatch, each compressed context's slot info, the three compressor
// plans).

// SlotInfo is a llama_kv_cache::slot_info: the streams s0 to s1 a ubatch
// spans and, for each stream it writes, that stream and its cells.
type SlotInfo struct {
	S0, S1 uint32
	Strm   []int32
	Idxs   [][]uint32
}

// CompPlan is llama_kv_cache_dsv4_context::comp_plan: one compressor's
// rows for a ubatch (state updates, rollback restores and snapshots,
// committed blocks) and the visibility of its compressed rows.
type CompPlan struct {
	StatePos                 []int32
	PersistSrc, PersistDst   []int32
	RestoreSrc, RestoreDst   []int32
	SnapshotSrc, SnapshotDst []int32
	ReadIdxs                 []int32
	WriteIdxs                []int64
	WritePos                 []int32
	NVisible                 []int32
	NStream, NKV             int64
}

// DSV4View is what a ubatch's graph sees of the DSV4 memory.
type DSV4View struct {
	// Write is the raw caches' ubatch: the ubatch itself, or for one
	// whose tokens are in several sequences, each token once per
	// sequence, sequence after sequence.
	Write             *Ubatch
	RawWrite, RawRead SlotInfo // the raw SWA cache's
	RawNKV            uint32
	Comp              [3]SlotInfo // the CSA, HCA and indexer caches'
	Plans             [3]*CompPlan
}

// BuildDSV4 builds and allocates the graph of a ubatch over the DSV4
// memory as v shows it.
func (c *Context) BuildDSV4(u *Ubatch, nOutputs int, v *DSV4View) (*Step, error) {
	rs := c.rs
	if rs == nil {
		return nil, fmt.Errorf("arch: the context is closed")
	}
	if err := rs.s.setDSV4View(v); err != nil {
		return nil, err
	}
	return c.build(u, nOutputs, nil, nil, false, true)
}

// setDSV4View puts v in the session's llama_kv_cache_dsv4_context: one
// ubatch (i_next 0) of plans built by init_batch, not the reserve's.
func (s *GraphSession) setDSV4View(v *DSV4View) error {
	mc, ok := s.mctx.P.(*cpp.Object)
	if !ok || s.mctx.K != cpp.KObj || mc.Class != "llama_kv_cache_dsv4_context" {
		return fmt.Errorf("arch: a DSV4 view of a memory that is not DSV4's")
	}
	if v == nil || v.Write == nil {
		return fmt.Errorf("arch: a DSV4 view without its write ubatch")
	}
	obj := func(o *cpp.Object, name string) (*cpp.Object, error) {
		c, ok := o.Fields[name]
		if !ok {
			return nil, fmt.Errorf("arch: %s has no %s", o.Class, name)
		}
		p, ok := c.V.P.(*cpp.Object)
		if !ok {
			return nil, fmt.Errorf("arch: %s.%s is not an object", o.Class, name)
		}
		return p, nil
	}
	one := func(v cpp.Val) *cpp.Cell {
		a := cpp.NewArray(ast.TAuto, 1, false)
		a.Cells[0].V = v
		return &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: a}}
	}
	u32 := func(x int64) cpp.Val { return cpp.Int(x, ast.TU32) }
	zero := func(t ast.Type) cpp.Val { return cpp.Int(0, t) }
	raw, err := obj(mc, "ctx_raw")
	if err != nil {
		return err
	}
	raw.Fields["sinfos_read"] = one(slotInfoVal(v.RawRead))
	raw.Fields["sinfos_write"] = one(slotInfoVal(v.RawWrite))
	raw.Fields["ubatches_write"] = one(cpp.Val{K: cpp.KObj, P: v.Write.object()})
	raw.Fields["i_next"] = &cpp.Cell{T: ast.TU64, V: zero(ast.TU64)}
	raw.Fields["n_kv"] = &cpp.Cell{T: ast.TU32, V: u32(int64(v.RawNKV))}
	for i, name := range []string{"csa", "hca", "lid"} {
		comp, err := obj(mc, "ctx_"+name)
		if err != nil {
			return err
		}
		comp.Fields["sinfos"] = one(slotInfoVal(v.Comp[i]))
		comp.Fields["i_cur"] = &cpp.Cell{T: ast.TU64, V: zero(ast.TU64)}
		if v.Plans[i] == nil {
			return fmt.Errorf("arch: a DSV4 view without its %s plan", name)
		}
		mc.Fields["plans_"+name] = one(compPlanVal(v.Plans[i]))
	}
	mc.Fields["reserve_plans"] = &cpp.Cell{T: ast.TBool, V: cpp.False}
	mc.Fields["i_next"] = &cpp.Cell{T: ast.TU64, V: zero(ast.TU64)}
	return nil
}

func i32Array(vals []int32) cpp.Val {
	a := cpp.NewArray(ast.TI32, len(vals), false)
	for i, x := range vals {
		a.Cells[i].V = cpp.Int(int64(x), ast.TI32)
	}
	return cpp.Val{K: cpp.KArr, P: a}
}

// slotInfoVal is the slot info as the programs read it.
func slotInfoVal(si SlotInfo) cpp.Val {
	o := newShared("llama_kv_cache::slot_info")
	o.Fields["s0"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(si.S0), ast.TU32)}
	o.Fields["s1"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(si.S1), ast.TU32)}
	o.Fields["strm"] = &cpp.Cell{V: i32Array(si.Strm)}
	idxs := cpp.NewArray(ast.TAuto, len(si.Idxs), false)
	for k, cells := range si.Idxs {
		a := cpp.NewArray(ast.TU32, len(cells), false)
		for i, x := range cells {
			a.Cells[i].V = cpp.Int(int64(x), ast.TU32)
		}
		idxs.Cells[k].V = cpp.Val{K: cpp.KArr, P: a}
	}
	o.Fields["idxs"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: idxs}}
	return cpp.Val{K: cpp.KObj, P: o}
}

// compPlanVal is the plan as the programs read it.
func compPlanVal(p *CompPlan) cpp.Val {
	o := newShared("llama_kv_cache_dsv4_context::comp_plan")
	for name, vals := range map[string][]int32{
		"state_pos": p.StatePos, "state_persist_src_idxs": p.PersistSrc, "state_persist_dst_idxs": p.PersistDst,
		"state_restore_src_idxs": p.RestoreSrc, "state_restore_dst_idxs": p.RestoreDst,
		"state_snapshot_src_idxs": p.SnapshotSrc, "state_snapshot_dst_idxs": p.SnapshotDst,
		"state_read_idxs": p.ReadIdxs, "state_write_pos": p.WritePos, "n_visible": p.NVisible,
	} {
		o.Fields[name] = &cpp.Cell{V: i32Array(vals)}
	}
	w := cpp.NewArray(ast.TI64, len(p.WriteIdxs), false)
	for i, x := range p.WriteIdxs {
		w.Cells[i].V = cpp.Int(x, ast.TI64)
	}
	o.Fields["state_write_idxs"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: w}}
	o.Fields["n_stream"] = &cpp.Cell{T: ast.TI64, V: cpp.Int(p.NStream, ast.TI64)}
	o.Fields["n_kv"] = &cpp.Cell{T: ast.TI64, V: cpp.Int(p.NKV, ast.TI64)}
	return cpp.Val{K: cpp.KObj, P: o}
}
