// Port of llama.cpp ggml/src/ggml-backend-meta.cpp (v0.5.0): the split
// states of a graph on the meta backend.

package graph

import (
	"fmt"
	"strings"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp"
)

// The split states of a graph on ggml's meta backend, replayed in Go.
//
// A scheduler with a meta backend (split mode tensor) hands the meta
// backend's nodes to the meta buffer: when ggml_backend_sched_alloc_graph
// allocates the graph, ggml-alloc initializes each tensor the meta compute
// buffer (or, for a view, its source's meta buffer) holds, and the meta
// buffer's init_tensor derives the tensor's split state from its sources
// (ggml_backend_meta_get_split_state, with assume_sync); graph_compute then
// asks again for each node without assume_sync, which only turns the
// mirrored result of a matrix product of two dimension-0 splits into a
// partial sum and so aborts nowhere the allocation did not. Where no state
// can be derived, ggml asserts or aborts and the process ends. The check
// below finds the first such node before the scheduler's allocation: it
// splits the graph on a probe scheduler of the same backends (the real
// scheduler's assignment, its copies of other backends' inputs included),
// derives every meta tensor's state as the meta buffer does, and puts the
// graph back as it was. Graph reservations are not checked: reserving
// allocates buffers but initializes no tensor.
//
// Not replayed: the meta buffer's cache of states lives across graphs
// (keyed by tensor address and checked against the tensor's bytes, not
// its sources'); the replay derives every graph's states afresh, as the
// cache does for any tensor whose bytes changed.

// Split axes of enum ggml_backend_meta_split_axis.
const (
	axisMirrored int32 = 10
	axisPartial  int32 = 11
	axisNone     int32 = 98
	axisUnknown  int32 = 99
)

// isDim reports whether the axis is a dimension (0 to 3).
func isDim(a int32) bool { return a >= 0 && a < 4 }

// axisName is ggml_backend_meta_split_axis_name's spelling of an axis.
func axisName(a int32) string {
	switch {
	case isDim(a):
		return fmt.Sprint(a)
	case a == axisMirrored:
		return "MIRRORED"
	case a == axisPartial:
		return "PARTIAL"
	case a == axisNone:
		return "NONE"
	case a == axisUnknown:
		return "UNKNOWN"
	}
	return fmt.Sprintf("axis(%d)", a)
}

// splitState is a split state over n devices: ne holds len(nr) segments
// of n lengths each. States are never changed once made.
type splitState struct {
	axis int32
	ne   []int64
	nr   []uint32
}

// segs is n_segments.
func (s splitState) segs() int { return len(s.nr) }

// share is device j's length along the axis: each segment's length times
// its repeats.
func (s splitState) share(j, n int) int64 {
	var v int64
	for k := range s.nr {
		v += s.ne[k*n+j] * int64(s.nr[k])
	}
	return v
}

// String is the state as the meta backend's debug log writes it, with
// every segment.
func (s splitState) String() string {
	if !isDim(s.axis) {
		return axisName(s.axis)
	}
	n := len(s.ne) / max(1, len(s.nr))
	parts := make([]string, len(s.nr))
	for k, r := range s.nr {
		parts[k] = fmt.Sprintf("%vx%d", s.ne[k*n:(k+1)*n], r)
	}
	return "axis " + axisName(s.axis) + " " + strings.Join(parts, " ")
}

// metaSplitCheck derives the split states of one graph's meta tensors.
type metaSplitCheck struct {
	lib   *ops.Lib
	probe ops.Sched
	n     int                                     // the meta devices' device count
	pre   map[*ops.Tensor][ops.MaxSrc]*ops.Tensor // each node's sources before the split
	memo  map[*ops.Tensor]splitState
	meta  map[ops.Backend]ops.MetaStatic
	bufs  map[ops.Buffer]bufInfo
	loc   map[*ops.Tensor]location
	ops   map[int32]string
	tsize map[int32][2]int64 // type → block size, type size
}

// bufInfo is what the check needs of a buffer: the meta device's static
// answers if it is a meta buffer, and whether it is a compute buffer.
type bufInfo struct {
	static  ops.MetaStatic
	n       int
	compute bool
}

// abort is a GGML_ASSERT or GGML_ABORT of the meta backend's split
// states at node t.
func (c *metaSplitCheck) abort(t *ops.Tensor, what string) error {
	var srcs []string
	for i, s := range t.Src {
		if s == nil {
			continue
		}
		st := "no state"
		if ss, ok := c.memo[(*ops.Tensor)(s)]; ok {
			st = ss.String()
		}
		srcs = append(srcs, fmt.Sprintf("src%d %s (%s, %v, split %s)", i, ops.NameOf((*ops.Tensor)(s)), c.opName(s.Op), s.Ne, st))
	}
	return &cpp.Abort{
		Msg: fmt.Sprintf("%s in ggml_backend_meta_get_split_state: node %s (%s, %v, of %s) (llama.cpp would abort here)",
			what, ops.NameOf(t), c.opName(t.Op), t.Ne, strings.Join(srcs, ", ")),
		Where: "the meta backend's graph allocation",
	}
}

// assert is GGML_ASSERT(cond) at node t.
func (c *metaSplitCheck) assert(t *ops.Tensor, cond bool, expr string) error {
	if cond {
		return nil
	}
	return c.abort(t, "GGML_ASSERT("+expr+") failed")
}

func (c *metaSplitCheck) opName(op int32) string {
	name, ok := c.ops[op]
	if !ok {
		name = c.lib.OpName(op)
		c.ops[op] = name
	}
	return name
}

// simple is the state {axis, {0}, {nr}, 1}.
func (c *metaSplitCheck) simple(axis int32, nr uint32) splitState {
	return splitState{axis: axis, ne: make([]int64, c.n), nr: []uint32{nr}}
}

// equal is split_states_equal: the same axis and, per device, the same
// share.
func (c *metaSplitCheck) equal(a, b splitState) bool {
	if a.axis != b.axis {
		return false
	}
	for j := 0; j < c.n; j++ {
		if a.share(j, c.n) != b.share(j, c.n) {
			return false
		}
	}
	return true
}

// buffer is what the check knows of buffer b (cached per buffer).
func (c *metaSplitCheck) buffer(b ops.Buffer) bufInfo {
	if bi, ok := c.bufs[b]; ok {
		return bi
	}
	var bi bufInfo
	if d := c.lib.BufferDevice(b); d != 0 {
		if n, static, ok := ops.MetaDeviceOf(d); ok {
			bi = bufInfo{static: static, n: n, compute: c.lib.BufferUsage(b) == ops.BufferUsageCompute}
		}
	}
	c.bufs[b] = bi
	return bi
}

// where says where tensor t will live once the graph is allocated: in a
// meta buffer (static for a weight or cache tensor that is no view) or
// not. A view lives in its source's buffer; a tensor with no buffer yet in
// the compute buffer of the backend the probe split gave it.
func (c *metaSplitCheck) where(t *ops.Tensor) (meta, static bool, ms ops.MetaStatic) {
	if l, ok := c.loc[t]; ok {
		return l.meta, l.static, l.ms
	}
	meta, static, ms = c.locate(t)
	c.loc[t] = location{meta, static, ms}
	return meta, static, ms
}

// location is where a tensor will live (where's answer).
type location struct {
	meta, static bool
	ms           ops.MetaStatic
}

// locate is where, uncached.
func (c *metaSplitCheck) locate(t *ops.Tensor) (meta, static bool, ms ops.MetaStatic) {
	root := t
	if t.ViewSrc != nil {
		root = (*ops.Tensor)(t.ViewSrc)
	}
	if root.Buffer != 0 {
		bi := c.buffer(ops.Buffer(root.Buffer))
		if bi.static == nil {
			return false, false, nil
		}
		return true, t.ViewSrc == nil && !bi.compute, bi.static
	}
	if be := c.lib.SchedTensorBackend(c.probe, root); be != 0 {
		if _, ok := c.meta[be]; ok {
			return true, false, nil
		}
	}
	return false, false, nil
}

// state is ggml_backend_meta_get_split_state(t, assume_sync = true) for a
// tensor in a meta buffer, derived once per check.
func (c *metaSplitCheck) state(t *ops.Tensor) (splitState, error) {
	if s, ok := c.memo[t]; ok {
		return s, nil
	}
	s, err := c.calculate(t)
	if err != nil {
		return splitState{}, err
	}
	if err := c.assert(t, s.axis != axisNone, "ret.axis != GGML_BACKEND_SPLIT_AXIS_NONE"); err != nil {
		return splitState{}, err
	}
	c.memo[t] = s
	return s, nil
}

// srcState is the state of source i of node t as the meta buffer sees
// it: where the split replaced the source with the scheduler's copy of
// another backend's tensor, that copy (an op-less tensor of the compute
// buffer, mirrored unless it is empty).
func (c *metaSplitCheck) srcState(t *ops.Tensor, i int) (splitState, error) {
	src := (*ops.Tensor)(t.Src[i])
	if pre, ok := c.pre[t]; ok && pre[i] != src {
		s := c.simple(axisMirrored, 1)
		if ops.NElements(src) == 0 {
			s = c.simple(axisUnknown, 1)
		}
		c.memo[src] = s
		return s, nil
	}
	if s, ok := c.memo[src]; ok {
		return s, nil
	}
	if meta, _, _ := c.where(src); !meta {
		return splitState{}, c.abort(t, fmt.Sprintf("GGML_ASSERT(ggml_backend_buffer_is_meta(buffer)) failed: source %s is in no meta buffer", ops.NameOf(src)))
	}
	return c.state(src)
}

// calculate is calculate_split_state.
func (c *metaSplitCheck) calculate(t *ops.Tensor) (splitState, error) {
	if ops.NElements(t) == 0 {
		return c.simple(axisUnknown, 1), nil
	}
	if _, static, ms := c.where(t); static {
		return c.static(t, ms)
	}
	var src [ops.MaxSrc]splitState
	for i := range src {
		if t.Src[i] == nil || (*ops.Tensor)(t.Src[i]) == t {
			src[i] = c.simple(axisUnknown, 1)
			continue
		}
		s, err := c.srcState(t, i)
		if err != nil {
			return splitState{}, err
		}
		if err := c.assert(t, s.axis != axisUnknown, "src_ss[i].axis != GGML_BACKEND_SPLIT_AXIS_UNKNOWN"); err != nil {
			return splitState{}, err
		}
		src[i] = s
	}
	s, err := c.byOp(t, &src)
	if err != nil || !isDim(s.axis) {
		return s, err
	}
	return c.ratio(t, s, &src)
}

// static is the state of a tensor of a weights or cache buffer: the meta
// device's callback's, checked as the meta buffer checks it.
func (c *metaSplitCheck) static(t *ops.Tensor, ms ops.MetaStatic) (splitState, error) {
	got := ms(t)
	s := splitState{axis: got.Axis, ne: got.Ne, nr: got.Nr}
	if len(s.nr) == 0 || len(s.ne) < len(s.nr)*c.n {
		return splitState{}, c.abort(t, fmt.Sprintf("the meta device's split state of %d segments and %d lengths", len(s.nr), len(s.ne)))
	}
	switch {
	case isDim(s.axis):
		gran := int64(1)
		if s.axis == 0 {
			gran = c.typeSizes(t.Type)[0]
		}
		var sum int64
		for k := range s.nr {
			for j := 0; j < c.n; j++ {
				if err := c.assert(t, s.ne[k*c.n+j]%gran == 0, "ret.ne[s*n_bufs + j] % granularity == 0"); err != nil {
					return splitState{}, err
				}
				sum += s.ne[k*c.n+j] * int64(s.nr[k])
			}
		}
		if err := c.assert(t, sum == t.Ne[s.axis], "ne_sum == tensor->ne[ret.axis]"); err != nil {
			return splitState{}, err
		}
	case s.axis == axisPartial:
		if err := c.assert(t, s.segs() == 1, "ret.n_segments == 1"); err != nil {
			return splitState{}, err
		}
		if err := c.assert(t, s.nr[0] == 1, "ret.nr[0] == 1"); err != nil {
			return splitState{}, err
		}
	}
	return s, nil
}

// typeSizes is a type's block size and type size.
func (c *metaSplitCheck) typeSizes(typ int32) [2]int64 {
	v, ok := c.tsize[typ]
	if !ok {
		v = [2]int64{c.lib.BlckSize(typ), int64(c.lib.TypeSize(typ))}
		c.tsize[typ] = v
	}
	return v
}

// ratio is calculate_split_state's last step for a dimension split: each
// device's length taken over, in proportion, from the first source split
// along a dimension, and checked against every other such source.
func (c *metaSplitCheck) ratio(t *ops.Tensor, s splitState, src *[ops.MaxSrc]splitState) (splitState, error) {
	out := splitState{axis: s.axis, ne: append([]int64(nil), s.ne...), nr: s.nr}
	first := true
	for i := range src {
		if t.Src[i] == nil || !isDim(src[i].axis) {
			continue
		}
		ss, sne := src[i], t.Src[i].Ne[src[i].axis]
		if first {
			// the state's lengths are sized for its own segments; the
			// source's segments may be more
			if need := ss.segs() * c.n; len(out.ne) < need {
				out.ne = append(out.ne, make([]int64, need-len(out.ne))...)
			}
			for j := 0; j < c.n; j++ {
				for k := 0; k < ss.segs(); k++ {
					out.ne[k*c.n+j] = 0
				}
				out.ne[j] = ss.share(j, c.n) * t.Ne[out.axis]
				if out.ne[j] != 0 || sne != 0 {
					div := sne * int64(out.nr[0])
					if div == 0 {
						return splitState{}, c.abort(t, "an integer division by zero (llama.cpp would crash)")
					}
					if err := c.assert(t, out.ne[j]%div == 0, "split_state.ne[j] % div == 0"); err != nil {
						return splitState{}, err
					}
					out.ne[j] /= div
				}
			}
		} else {
			if err := c.assert(t, out.segs() == 1, "split_state.n_segments == 1"); err != nil {
				return splitState{}, err
			}
			for j := 0; j < c.n; j++ {
				if err := c.assert(t, out.ne[j]*int64(out.nr[0])*sne == ss.share(j, c.n)*t.Ne[out.axis],
					"split_state.ne[j]*split_state.nr[0] * tensor->src[i]->ne[src_ss[i].axis] == sum * tensor->ne[split_state.axis]"); err != nil {
					return splitState{}, err
				}
			}
		}
		first = false
	}
	if err := c.assert(t, !first, "!first_src_split_by_axis"); err != nil {
		return splitState{}, err
	}
	// lengths past the state's own segments are not part of it
	if len(out.ne) > out.segs()*c.n {
		out.ne = out.ne[:out.segs()*c.n]
	}
	return out, nil
}

// byOp derives node t's state from its sources' by its op, as the meta
// buffer's per-op handlers do.
func (c *metaSplitCheck) byOp(t *ops.Tensor, src *[ops.MaxSrc]splitState) (splitState, error) {
	op := c.opName(t.Op)
	switch op {
	case "NONE":
		return c.simple(axisMirrored, 1), nil
	case "ADD", "ADD_ID", "SUB", "MUL", "DIV":
		return c.binBcast(t, src)
	case "SQR", "SQRT", "LOG", "SIN", "COS", "REPEAT", "REPEAT_BACK", "SILU_BACK", "SCALE", "SOFT_MAX", "SOFT_MAX_BACK",
		"CLAMP", "LEAKY_RELU", "FILL", "UNARY", "OPT_STEP_ADAMW", "OPT_STEP_SGD", "GLU":
		return c.generic(t, src, false)
	case "DUP", "ADD1", "ACC", "SUM", "OUT_PROD", "SET", "GET_ROWS_BACK", "DIAG", "DIAG_MASK_INF", "DIAG_MASK_ZERO",
		"CONV_TRANSPOSE_1D", "IM2COL", "IM2COL_BACK", "IM2COL_3D", "CONV_2D", "CONV_3D", "CONV_2D_DW", "CONV_TRANSPOSE_2D",
		"POOL_1D", "POOL_2D", "POOL_2D_BACK", "UPSCALE", "PAD_REFLECT_1D", "ROLL", "ARANGE", "TIMESTEP_EMBEDDING", "TRI",
		"FLASH_ATTN_BACK", "SSM_SCAN", "WIN_PART", "WIN_UNPART", "GET_REL_POS", "ADD_REL_POS", "RWKV_WKV6",
		"GATED_LINEAR_ATTN", "RWKV_WKV7", "SOLVE_TRI", "DSV4_HC_COMB", "DSV4_HC_PRE", "DSV4_HC_POST",
		"MAP_CUSTOM1", "MAP_CUSTOM2", "MAP_CUSTOM3", "CUSTOM":
		return c.generic(t, src, true)
	case "SUM_ROWS", "CUMSUM", "MEAN", "ARGMAX", "COUNT_EQUAL", "NORM", "RMS_NORM", "RMS_NORM_BACK", "GROUP_NORM", "L2_NORM",
		"ARGSORT", "TOP_K", "CROSS_ENTROPY_LOSS", "CROSS_ENTROPY_LOSS_BACK":
		if err := c.assert(t, src[0].axis != 0, "src_ss[0].axis != GGML_BACKEND_SPLIT_AXIS_0"); err != nil {
			return splitState{}, err
		}
		return src[0], nil
	case "CONCAT":
		return c.concat(t, src)
	case "MUL_MAT", "MUL_MAT_ID":
		return c.mulMat(t, src)
	case "CPY":
		if isDim(src[0].axis) {
			return c.reshape(t, src)
		}
		return c.generic(t, src, false)
	case "CONT", "RESHAPE":
		return c.reshape(t, src)
	case "VIEW":
		return c.view(t, src)
	case "PERMUTE":
		return c.permute(t, src)
	case "TRANSPOSE":
		return c.transpose(t, src)
	case "GET_ROWS":
		if src[0].axis == 0 && src[1].axis == axisMirrored {
			return src[0], nil
		}
		return c.generic(t, src, true)
	case "SET_ROWS":
		if err := c.assert(t, src[0].axis != 1, "src_ss[0].axis != GGML_BACKEND_SPLIT_AXIS_1"); err != nil {
			return splitState{}, err
		}
		if err := c.assert(t, src[1].axis == axisMirrored, "src_ss[1].axis == GGML_BACKEND_SPLIT_AXIS_MIRRORED"); err != nil {
			return splitState{}, err
		}
		if err := c.assert(t, c.equal(src[0], src[2]), "split_states_equal(src_ss[0], src_ss[2])"); err != nil {
			return splitState{}, err
		}
		return src[0], nil
	case "ROPE", "ROPE_BACK":
		if err := c.assert(t, src[1].axis == axisMirrored, "src_ss[1].axis == GGML_BACKEND_SPLIT_AXIS_MIRRORED"); err != nil {
			return splitState{}, err
		}
		return src[0], nil
	case "PAD":
		if a := src[0].axis; isDim(a) {
			if err := c.assert(t, t.OpParams[2*a] == 0, "tensor->op_params[2*src_ss[0].axis + 0] == 0"); err != nil {
				return splitState{}, err
			}
			if err := c.assert(t, t.OpParams[2*a+1] == 0, "tensor->op_params[2*src_ss[0].axis + 1] == 0"); err != nil {
				return splitState{}, err
			}
		}
		return src[0], nil
	case "FLASH_ATTN_EXT":
		return c.flashAttn(t, src)
	case "SSM_CONV":
		if src[0].axis == src[1].axis {
			switch src[0].axis {
			case 0:
				return c.simple(1, 1), nil
			case 1:
				return c.simple(0, 1), nil
			}
		}
		return c.generic(t, src, false)
	case "GATED_DELTA_NET":
		return c.gatedDeltaNet(t, src)
	case "LIGHTNING_INDEXER":
		for i := 0; i < 4; i++ {
			if err := c.assert(t, src[i].axis == axisMirrored, "src_ss[i].axis == GGML_BACKEND_SPLIT_AXIS_MIRRORED"); err != nil {
				return splitState{}, err
			}
		}
		return c.simple(axisMirrored, 1), nil
	}
	return splitState{}, c.abort(t, "GGML_ABORT(\"ggml op not implemented: "+op+"\")")
}

// generic is handle_generic: the sources' common state (every source
// split the same way), a dimension split refused where scalarOnly.
func (c *metaSplitCheck) generic(t *ops.Tensor, src *[ops.MaxSrc]splitState, scalarOnly bool) (splitState, error) {
	ret := c.simple(axisNone, 1)
	for i := range src {
		if t.Src[i] == nil || (*ops.Tensor)(t.Src[i]) == t {
			continue
		}
		if ret.axis == axisNone {
			ret = src[i]
		} else if !c.equal(src[i], ret) {
			ret = c.simple(axisUnknown, 1)
			break
		}
	}
	if ret.axis == axisNone || (scalarOnly && isDim(ret.axis)) {
		ret = c.simple(axisUnknown, 1)
	}
	if err := c.assert(t, ret.axis != axisUnknown, "ret.axis != GGML_BACKEND_SPLIT_AXIS_UNKNOWN"); err != nil {
		return splitState{}, err
	}
	return ret, nil
}

// binBcast is handle_bin_bcast: src1 broadcast over a split src0, or
// ADD_ID's partial sum, or the generic rule.
func (c *metaSplitCheck) binBcast(t *ops.Tensor, src *[ops.MaxSrc]splitState) (splitState, error) {
	if a := src[0].axis; isDim(a) && t.Src[1] != nil && t.Src[1].Ne[a] == 1 && src[1].axis == axisMirrored {
		return src[0], nil
	}
	if src[2].axis == axisMirrored && (src[0].axis == src[1].axis || (src[0].axis == axisMirrored && src[1].axis == axisPartial)) {
		return src[0], nil
	}
	if err := c.assert(t, t.Src[2] == nil || src[2].axis == axisMirrored, "tensor->src[2] == nullptr || src_ss[2].axis == GGML_BACKEND_SPLIT_AXIS_MIRRORED"); err != nil {
		return splitState{}, err
	}
	return c.generic(t, src, false)
}

// concat is handle_concat.
func (c *metaSplitCheck) concat(t *ops.Tensor, src *[ops.MaxSrc]splitState) (splitState, error) {
	axis := t.OpParams[0]
	if src[0].axis == axisMirrored && isDim(src[1].axis) {
		if err := c.assert(t, axis != src[1].axis, "concat_axis != src_ss[1].axis"); err != nil {
			return splitState{}, err
		}
		return src[1], nil
	}
	if src[1].axis == axisMirrored && isDim(src[0].axis) {
		if err := c.assert(t, axis != src[0].axis, "concat_axis != src_ss[0].axis"); err != nil {
			return splitState{}, err
		}
		return src[0], nil
	}
	if src[0].axis == src[1].axis && src[0].axis != axis {
		return src[0], nil
	}
	return c.generic(t, src, true)
}

// mulMat is handle_mul_mat (with assume_sync: a product of two
// dimension-0 splits is mirrored).
func (c *metaSplitCheck) mulMat(t *ops.Tensor, src *[ops.MaxSrc]splitState) (splitState, error) {
	a, b := src[0].axis, src[1].axis
	switch {
	case a == axisMirrored && b == axisMirrored:
		return c.simple(axisMirrored, 1), nil
	case a == 1 && b == axisMirrored:
		return splitState{axis: 0, ne: src[0].ne[:c.n], nr: []uint32{1}}, nil
	case b == 1 && a == axisMirrored:
		return src[1], nil
	case a == 0 && b == 0:
		if err := c.assert(t, c.equal(src[0], src[1]), "split_states_equal(src_ss[0], src_ss[1])"); err != nil {
			return splitState{}, err
		}
		return c.simple(axisMirrored, 1), nil
	case a == b && a >= 2 && a < 4:
		if err := c.assert(t, c.equal(src[0], src[1]), "split_states_equal(src_ss[0], src_ss[1])"); err != nil {
			return splitState{}, err
		}
		return src[0], nil
	case a >= 2 && a < 4 && b == axisMirrored:
		return src[0], nil
	}
	return splitState{}, c.abort(t, fmt.Sprintf("GGML_ABORT(\"unsupported mul_mat split states: node=%s src0=%s axis=%d src1=%s axis=%d\")",
		ops.NameOf(t), ops.NameOf((*ops.Tensor)(t.Src[0])), a, ops.NameOf((*ops.Tensor)(t.Src[1])), b))
}

// nDims is ggml_n_dims.
func nDims(t *ops.Tensor) int {
	for i := 3; i >= 1; i-- {
		if t.Ne[i] > 1 {
			return i + 1
		}
	}
	return 1
}

// reshape is handle_reshape: a dimension split moved to the dimension of
// the result where the elements before it line up.
func (c *metaSplitCheck) reshape(t *ops.Tensor, src *[ops.MaxSrc]splitState) (splitState, error) {
	s0, a := src[0], src[0].axis
	if a == axisMirrored || a == axisPartial {
		return s0, nil
	}
	if !isDim(a) {
		return splitState{}, c.abort(t, "GGML_ABORT(\"fatal error\") (a reshape of a tensor split "+axisName(a)+")")
	}
	in := (*ops.Tensor)(t.Src[0])
	base := int64(1)
	for d := int32(0); d <= a; d++ {
		base *= in.Ne[d]
	}
	if s0.segs() == 1 {
		base /= int64(s0.nr[0])
		if int(a) == nDims(in)-1 && s0.nr[0] == 1 {
			return c.simple(int32(nDims(t)-1), 1), nil
		}
		if a == 0 && t.Ne[0] == in.Ne[0] && t.Ne[1] == 1 && s0.nr[0] == 1 {
			whole := true
			for j := 0; j < c.n; j++ {
				ne := s0.ne[j]
				whole = whole && (ne == 0 || ne == in.Ne[0])
			}
			if whole {
				return c.simple(1, 1), nil
			}
		}
	}
	if base == 0 {
		return splitState{}, c.abort(t, "an integer division by zero in the reshape of a split (llama.cpp would crash)")
	}
	out := int64(1)
	for d := int32(0); d < 4; d++ {
		out *= t.Ne[d]
		if out%base == 0 {
			return c.simple(d, uint32(out/base)), nil
		}
		if out > base {
			if err := c.assert(t, s0.segs() == 1, "src_ss[0].n_segments == 1"); err != nil {
				return splitState{}, err
			}
			if err := c.assert(t, s0.nr[0] == 1, "src_ss[0].nr[0] == 1"); err != nil {
				return splitState{}, err
			}
			return c.simple(d, 1), nil
		}
	}
	return splitState{}, c.abort(t, "GGML_ABORT(\"shape mismatch for "+c.opName(t.Op)+"\")")
}

// permuted is ggml_is_permuted.
func permuted(t *ops.Tensor) bool {
	return t.Nb[0] > t.Nb[1] || t.Nb[1] > t.Nb[2] || t.Nb[2] > t.Nb[3]
}

// view is handle_view.
func (c *metaSplitCheck) view(t *ops.Tensor, src *[ops.MaxSrc]splitState) (splitState, error) {
	in := (*ops.Tensor)(t.Src[0])
	if in == nil {
		return splitState{}, c.abort(t, "a view without a source (llama.cpp would crash)")
	}
	if c.lib.Contiguous(t) && c.lib.Contiguous(in) {
		return c.reshape(t, src)
	}
	same := true
	for d := 0; d < 4; d++ {
		if t.Ne[d] == 1 && in.Ne[d] == 1 {
			continue
		}
		if t.Nb[d] != in.Nb[d] {
			same = false
			break
		}
	}
	if same {
		return src[0], nil
	}
	a := src[0].axis
	if !permuted(t) && !permuted(in) && a >= 0 && a < 3 {
		for d := int32(0); d < 3; d++ {
			if t.Nb[d+1] == in.Nb[a+1] {
				return c.simple(d, 1), nil
			}
		}
		return splitState{}, c.abort(t, "GGML_ABORT(\"fatal error\") (a view whose strides match none of its split source's)")
	}
	if a == axisMirrored || a == axisPartial {
		return src[0], nil
	}
	return splitState{}, c.abort(t, "GGML_ABORT(\"view of permuted tensor not implemented\")")
}

// permute is handle_permute.
func (c *metaSplitCheck) permute(t *ops.Tensor, src *[ops.MaxSrc]splitState) (splitState, error) {
	s0, a := src[0], src[0].axis
	switch {
	case isDim(a):
		if err := c.assert(t, s0.segs() == 1 || s0.nr[0] == 1, "src_ss[0].n_segments == 1 || src_ss[0].nr[0] == 1"); err != nil {
			return splitState{}, err
		}
		return c.simple(t.OpParams[a], s0.nr[0]), nil
	case a == axisMirrored || a == axisPartial:
		return s0, nil
	}
	return splitState{}, c.abort(t, "GGML_ABORT(\"fatal error\") (a permutation of a tensor split "+axisName(a)+")")
}

// transpose is handle_transpose.
func (c *metaSplitCheck) transpose(t *ops.Tensor, src *[ops.MaxSrc]splitState) (splitState, error) {
	s0, a := src[0], src[0].axis
	switch {
	case a == 0 || a == 1:
		if err := c.assert(t, s0.segs() == 1 || s0.nr[0] == 1, "src_ss[0].n_segments == 1 || src_ss[0].nr[0] == 1"); err != nil {
			return splitState{}, err
		}
		return c.simple(a^1, s0.nr[0]), nil
	case a == 2 || a == 3 || a == axisMirrored || a == axisPartial:
		return s0, nil
	}
	return splitState{}, c.abort(t, "GGML_ABORT(\"fatal error\") (a transposition of a tensor split "+axisName(a)+")")
}

// cond is one GGML_ASSERT: its condition and its text.
type cond struct {
	ok   bool
	expr string
}

// asserts is GGML_ASSERT of each of conds in turn, at node t.
func (c *metaSplitCheck) asserts(t *ops.Tensor, conds ...cond) error {
	for _, ck := range conds {
		if err := c.assert(t, ck.ok, ck.expr); err != nil {
			return err
		}
	}
	return nil
}

// flashAttn is handle_flash_attn_ext: all mirrored, or the heads split
// along dimension 2 of Q (and of K and V, or those mirrored).
func (c *metaSplitCheck) flashAttn(t *ops.Tensor, src *[ops.MaxSrc]splitState) (splitState, error) {
	if err := c.asserts(t, cond{t.Src[3] == nil || src[3].axis == axisMirrored,
		"tensor->src[3] == nullptr || src_ss[3].axis == GGML_BACKEND_SPLIT_AXIS_MIRRORED"}); err != nil {
		return splitState{}, err
	}
	if src[0].axis == axisMirrored {
		err := c.asserts(t,
			cond{src[1].axis == axisMirrored, "src_ss[1].axis == GGML_BACKEND_SPLIT_AXIS_MIRRORED"},
			cond{src[2].axis == axisMirrored, "src_ss[2].axis == GGML_BACKEND_SPLIT_AXIS_MIRRORED"},
			cond{t.Src[4] == nil || src[4].axis == axisMirrored, "tensor->src[4] == nullptr || src_ss[4].axis == GGML_BACKEND_SPLIT_AXIS_MIRRORED"})
		if err != nil {
			return splitState{}, err
		}
		return c.simple(axisMirrored, 1), nil
	}
	split := src[1].axis == 2 && src[2].axis == 2
	mirrored := src[1].axis == axisMirrored && src[2].axis == axisMirrored
	err := c.asserts(t,
		cond{src[0].axis == 2, "src_ss[0].axis == GGML_BACKEND_SPLIT_AXIS_2"},
		cond{split || mirrored, "kv_split || kv_mirrored"},
		cond{t.Src[4] == nil || src[4].axis == 0, "tensor->src[4] == nullptr || src_ss[4].axis == GGML_BACKEND_SPLIT_AXIS_0"})
	if err != nil {
		return splitState{}, err
	}
	return c.simple(1, 1), nil
}

// gatedDeltaNet is handle_gated_delta_net.
func (c *metaSplitCheck) gatedDeltaNet(t *ops.Tensor, src *[ops.MaxSrc]splitState) (splitState, error) {
	all := true
	for i := 0; i < 6; i++ {
		all = all && src[i].axis == axisMirrored
	}
	if all {
		return src[0], nil
	}
	for i := 0; i < 5; i++ {
		if err := c.assert(t, src[i].axis == 1, fmt.Sprintf("src_ss[%d].axis == GGML_BACKEND_SPLIT_AXIS_1", i)); err != nil {
			return splitState{}, err
		}
	}
	a5 := src[5].axis
	if err := c.assert(t, a5 == 2 || a5 == 1 || a5 == 0,
		"src_ss[5].axis == GGML_BACKEND_SPLIT_AXIS_2 || src_ss[5].axis == GGML_BACKEND_SPLIT_AXIS_1 || src_ss[5].axis == GGML_BACKEND_SPLIT_AXIS_0"); err != nil {
		return splitState{}, err
	}
	return c.simple(0, 1), nil
}

// MetaSplits checks a built graph, before sched allocates it, for what
// ggml's meta backend would abort on when the graph is allocated and
// computed: the first node whose split state
// ggml_backend_meta_get_split_state cannot derive, as a *cpp.Abort that
// names the node, its sources and their states. bes are sched's backends;
// where none is a meta device's, there is nothing to check. probe is a
// scheduler of the same backends, buffer types and options as sched, for
// the check's own use: the graph is split on it (with the backends set on
// sched for the graph's tensors), then put back as it was built.
func MetaSplits(lib *ops.Lib, sched, probe ops.Sched, bes []ops.Backend, g *ops.Graph) error {
	c := &metaSplitCheck{lib: lib, probe: probe, meta: map[ops.Backend]ops.MetaStatic{}}
	for _, be := range bes {
		n, static, ok := ops.MetaDeviceOf(lib.BackendDevice(be))
		if !ok {
			continue
		}
		if c.n != 0 && n != c.n {
			return fmt.Errorf("arch: meta backends over %d and %d devices in one scheduler: their split states are not replayed", c.n, n)
		}
		c.n, c.meta[be] = n, static
	}
	if len(c.meta) == 0 {
		return nil
	}
	if probe == 0 || probe == sched {
		return fmt.Errorf("arch: the meta backend's split states need a probe scheduler of their own")
	}
	c.pre, c.memo = map[*ops.Tensor][ops.MaxSrc]*ops.Tensor{}, map[*ops.Tensor]splitState{}
	c.bufs, c.ops, c.tsize = map[ops.Buffer]bufInfo{}, map[int32]string{}, map[int32][2]int64{}
	c.loc = map[*ops.Tensor]location{}

	// the probe scheduler as the real one will be when it allocates: the
	// backends the graph's builder set, nothing else
	lib.SchedReset(probe)
	set := map[*ops.Tensor]bool{}
	pin := func(t *ops.Tensor) {
		if t == nil || set[t] {
			return
		}
		set[t] = true
		if be := lib.SchedTensorBackend(sched, t); be != 0 {
			lib.SchedSetTensorBackend(probe, t, be)
		}
	}
	n := lib.NNodes(g)
	for i := 0; i < n; i++ {
		node := lib.Node(g, i)
		var src [ops.MaxSrc]*ops.Tensor
		for k, s := range node.Src {
			src[k] = (*ops.Tensor)(s)
			pin(src[k])
		}
		c.pre[node] = src
		pin(node)
	}
	shape := lib.Shape(g)
	lib.SchedSplitGraph(probe, g)
	defer func() { _ = lib.Restore(g, shape) }()

	// ggml-alloc initializes every tensor a meta buffer will hold, in the
	// split graph's order: the meta buffer derives its state, then checks
	// what it makes of it
	for i := 0; i < lib.NNodes(g); i++ {
		node := lib.Node(g, i)
		if meta, _, _ := c.where(node); !meta {
			continue
		}
		if err := c.initTensor(node); err != nil {
			return err
		}
	}
	return nil
}

// initTensor is the meta buffer's init_tensor of node t: its state, at
// most 16 segments, and, for a view at an offset into a split, a source
// split along a dimension.
func (c *metaSplitCheck) initTensor(t *ops.Tensor) error {
	s, err := c.state(t)
	if err != nil {
		return err
	}
	if err := c.assert(t, s.segs() <= 16, "split_state.n_segments <= 16"); err != nil {
		return err
	}
	if t.ViewSrc == nil || t.ViewOffs == 0 || !isDim(s.axis) {
		return nil
	}
	if err := c.assert(t, t.Ne[s.axis] != 0, "tensor->ne[split_dim] != 0"); err != nil {
		return err
	}
	vs, err := c.state((*ops.Tensor)(t.ViewSrc))
	if err != nil {
		return err
	}
	return c.assert(t, isDim(vs.axis), "split_dim_view_src >= 0 && split_dim_view_src < GGML_MAX_DIMS")
}

// metaSplits is MetaSplits for a graph on the context's scheduler, where
// one of its backends is a meta device's; its probe scheduler is made the
// first time.
func (rs *reserver) metaSplits(g *ops.Graph) error {
	if rs.metaKnown == 0 {
		rs.metaKnown = -1
		for _, be := range rs.bes {
			if _, _, ok := ops.MetaDeviceOf(rs.lib.BackendDevice(be)); ok {
				rs.metaKnown = 1
			}
		}
	}
	if rs.metaKnown < 0 {
		return nil
	}
	if rs.metaProbe == 0 {
		rs.metaProbe = rs.lib.SchedNew(rs.bes, rs.bufts, rs.out.MaxNodes, rs.out.PipelineParallel, rs.b("op_offload"))
		if rs.metaProbe == 0 {
			return fmt.Errorf("arch: ggml_backend_sched_new failed (the meta backend's probe scheduler)")
		}
	}
	return MetaSplits(rs.lib, rs.sched, rs.metaProbe, rs.bes, g)
}
