package arch

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/ggload/ggload/ggml/gtype"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// tnVal is LLM_TN_IMPL: a tensor kind, a suffix and up to two numbers.
type tnVal struct {
	tensor string // LLM_TENSOR_ name
	tmpl   *tmplParts
	suffix string
	hasSfx bool
	bid    int
	xid    int
	name   string // formatted on first use
}

// tmplParts is a name template cut at its %d.
type tmplParts struct {
	parts []string // len(parts) = number of %d + 1
}

var tmplCache sync.Map // LLM_TENSOR_ name → *tmplParts

func templateOfKind(kind string) *tmplParts {
	if t, ok := tmplCache.Load(kind); ok {
		return t.(*tmplParts)
	}
	t := &tmplParts{parts: strings.Split(tensorNames[kind], "%d")}
	tmplCache.Store(kind, t)
	return t
}

// String is LLM_TN_IMPL::str: the template formatted with the block and
// the expert, then the suffix.
func (t *tnVal) String() string {
	if t.name != "" {
		return t.name
	}
	if t.tmpl == nil {
		t.tmpl = templateOfKind(t.tensor)
	}
	var buf [96]byte
	b := buf[:0]
	nums := [2]int{t.bid, t.xid}
	for i, p := range t.tmpl.parts {
		b = append(b, p...)
		if i+1 < len(t.tmpl.parts) && i < 2 {
			b = strconv.AppendInt(b, int64(nums[i]), 10)
		}
	}
	if t.hasSfx {
		b = append(b, '.')
		b = append(b, t.suffix...)
	}
	t.name = string(b)
	return t.name
}

// tn is LLM_TN(arch)(tensor, [suffix], [bid], [xid]).
func (r *Run) tn(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
	var buf [4]cpp.Val
	if len(args) > len(buf) || len(args) == 0 {
		return cpp.Void, f.Errorf("tn with %d arguments", len(args))
	}
	vs := buf[:len(args)]
	for i, a := range args {
		v, err := f.Eval(a)
		if err != nil {
			return cpp.Void, err
		}
		vs[i] = v
	}
	if vs[0].K != cpp.KEnum || vs[0].I != famTensor {
		return cpp.Void, f.Errorf("tn without a tensor")
	}
	t := &tnVal{tensor: vs[0].S, bid: -1, xid: -1}
	if p, ok := vs[0].P.(*tmplParts); ok {
		t.tmpl = p
	} else if _, ok := tensorNames[t.tensor]; !ok {
		return cpp.Void, &cpp.Abort{Msg: "unknown tensor name for tensor id " + t.tensor, Where: f.Fn}
	}
	rest := vs[1:]
	if len(rest) > 0 && (rest[0].K == cpp.KStr || rest[0].K == cpp.KNull) {
		if rest[0].K == cpp.KStr {
			t.suffix, t.hasSfx = rest[0].S, true
		}
		rest = rest[1:]
	}
	if len(rest) > 0 {
		t.bid = int(int32(rest[0].I))
	}
	if len(rest) > 1 {
		t.xid = int(int32(rest[1].I))
	}
	return cpp.Val{K: cpp.KTN, P: t}, nil
}

var (
	flagNotRequired = enumConsts["TENSOR_NOT_REQUIRED"]
	flagDuplicated  = enumConsts["TENSOR_DUPLICATED"]
	flagSkip        = enumConsts["TENSOR_SKIP"]
	flagReshape     = enumConsts["TENSOR_ALLOW_RESHAPE"]
	flagLazy        = enumConsts["TENSOR_READ_LAZY"]
)

var classes = map[string]Class{
	"LLM_TENSOR_LAYER_INPUT":     ClassInput,
	"LLM_TENSOR_LAYER_OUTPUT":    ClassOutput,
	"LLM_TENSOR_LAYER_REPEATING": ClassRepeating,
}

// createTensor is llama_model_base::create_tensor and
// llama_model_loader::create_tensor, up to the buffer type, which the
// placer chooses.
func (r *Run) createTensor(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
	tn, neBuf, nDims, flags, err := r.createArgs(f, args)
	if err != nil {
		return cpp.Void, err
	}
	ne := neBuf[:nDims]
	name := tn.String()
	// the layer's buffer type list: dev_layer.at(bid)
	nLayerAll := r.hparams.obj.Fields["n_layer_all"].V.I
	if tn.bid != -1 && (tn.bid < 0 || int64(tn.bid) >= nLayerAll) {
		return cpp.Void, &cpp.Throw{Msg: fmt.Sprintf("vector::_M_range_check: __n (which is %d) >= this->size() (which is %d)", uint64(int64(tn.bid)), nLayerAll)}
	}
	w, ok := r.gm.Weight(name)
	if !ok {
		w, ok = r.extraWeights[name]
	}
	if !ok {
		if w, err = r.missingTensor(tn, ne, flags); w == nil {
			return cpp.Null, err
		}
		ne = append([]int64(nil), ne...) // kept by the supplied weight
	}
	reshape := flags&flagReshape != 0
	if !shapeOK(ne, w.Shape, reshape) {
		return cpp.Void, &cpp.Throw{Msg: fmt.Sprintf("check_tensor_dims: tensor '%s' has wrong shape; expected %s, got %s",
			name, formatShape(ne), formatShape(w.Shape[:])), Need: r.need(tn, ne, flags)}
	}
	shape := w.Shape
	if reshape {
		for i := range shape {
			shape[i] = 1
			if i < len(ne) {
				shape[i] = ne[i]
			}
		}
		a, err1 := w.Type.Bytes(shape)
		b, err2 := w.Type.Bytes(w.Shape)
		if err1 != nil || err2 != nil || a != b {
			return cpp.Void, &cpp.Abort{Msg: "GGML_ASSERT(ggml_nbytes(&t_meta) == ggml_nbytes(cur)) failed", Where: name}
		}
	}
	dup := flags&flagDuplicated != 0
	kind := tn.tensor
	if kind == "LLM_TENSOR_TOKEN_EMBD" && dup {
		kind = "LLM_TENSOR_OUTPUT"
	}
	info, ok := tensorInfos[kind]
	if !ok {
		return cpp.Void, &cpp.Throw{Msg: fmt.Sprintf("missing tensor info mapping for %s", name)}
	}
	c := &r.creation
	*c = Creation{
		Name:   name,
		Kind:   strings.TrimPrefix(kind, "LLM_TENSOR_"),
		Class:  classes[info[0]],
		Op:     strings.TrimPrefix(info[1], "GGML_OP_"),
		Bid:    tn.bid,
		Shape:  shape,
		Weight: w,
		Dup:    dup,
		Lazy:   flags&flagLazy != 0,
	}
	if c.Op == "NONE" || flags&flagSkip != 0 {
		c.Skip = true
		if err := r.placer.Place(c); err != nil {
			return cpp.Void, err
		}
		r.nPlaced++
		r.nCreated++
		r.created[name] = true
		return cpp.Null, nil
	}
	switch {
	case tn.hasSfx && tn.suffix == "bias":
		if c.Op == "MUL_MAT_ID" {
			c.Op = "ADD_ID"
		} else {
			c.Op = "ADD"
		}
	case tn.hasSfx && (tn.suffix == "lora_a" || tn.suffix == "lora_b") && r.hparams.obj.Fields["router_layer"].V.I >= 0:
		c.Op = "MUL_MAT_ID"
	}
	if (c.Class == ClassInput || c.Class == ClassOutput) && tn.bid != -1 {
		return cpp.Void, &cpp.Abort{Msg: fmt.Sprintf("input/output layer tensor %s used with a layer number", name), Where: f.Fn}
	}
	if c.Class == ClassRepeating && tn.bid == -1 {
		return cpp.Void, &cpp.Abort{Msg: fmt.Sprintf("repeating layer tensor %s used without a layer number", name), Where: f.Fn}
	}
	if err := r.placer.Place(c); err != nil {
		return cpp.Void, err
	}
	if !dup {
		r.nCreated++
		r.created[name] = true
	}
	t := &Tensor{Name: name, Type: int(w.Type), Ne: shape, Index: r.nPlaced}
	r.nPlaced++
	return cpp.Val{K: cpp.KTensor, P: t}, nil
}

// createArgs evaluates create_tensor's arguments: the name, the shape
// (nDims of ne) and the flags.
func (r *Run) createArgs(f *cpp.Frame, args []*ast.Node) (tn *tnVal, ne [4]int64, nDims int, flags int64, err error) {
	if len(args) == 4 {
		args = args[1:] // the overload that takes the loader first
	}
	if len(args) < 2 || len(args) > 3 || args[1].Op != ast.OpList || len(args[1].Kids) > 4 {
		return nil, ne, 0, 0, f.Errorf("create_tensor arguments")
	}
	tv, err := f.Eval(args[0])
	if err != nil {
		return nil, ne, 0, 0, err
	}
	if tv.K != cpp.KTN {
		return nil, ne, 0, 0, f.Errorf("create_tensor of %s", tv.Describe())
	}
	for i, k := range args[1].Kids {
		v, err := f.Eval(k)
		if err != nil {
			return nil, ne, 0, 0, err
		}
		x, err := cpp.Convert(v, ast.TI64)
		if err != nil {
			return nil, ne, 0, 0, f.Errorf("create_tensor shape: %v", err)
		}
		ne[i] = x.I
	}
	if len(args) > 2 {
		v, err := f.Eval(args[2])
		if err != nil {
			return nil, ne, 0, 0, err
		}
		flags = v.I
	}
	return tv.P.(*tnVal), ne, len(args[1].Kids), flags, nil
}

// missingTensor is create_tensor of a tensor the file lacks: nil and no
// error for an optional one, a weight SupplyTensor gives, or llama.cpp's
// error.
func (r *Run) missingTensor(tn *tnVal, ne []int64, flags int64) (*gguf.Weight, error) {
	name := tn.String()
	if flags&flagNotRequired != 0 {
		if r.opts.Optional != nil && flags&flagSkip == 0 {
			r.opts.Optional(r.need(tn, ne, flags))
		}
		return nil, nil
	}
	n := r.need(tn, ne, flags)
	typ, supplied := gtype.Type(0), false
	if r.opts.SupplyTensor != nil && validShape(ne) {
		typ, supplied = r.opts.SupplyTensor(n)
	}
	if !supplied {
		return nil, &cpp.Throw{Msg: fmt.Sprintf("check_tensor_dims: tensor '%s' not found", name), Need: n}
	}
	w := &gguf.Weight{Name: name, Type: typ, NDims: len(ne), File: -1}
	w.Shape = gtype.Shape{1, 1, 1, 1}
	copy(w.Shape[:], ne)
	r.extraWeights[name] = w
	return w, nil
}

// need describes a tensor a model lacks.
func (r *Run) need(tn *tnVal, ne []int64, flags int64) *cpp.Need {
	kind := tn.tensor
	if kind == "LLM_TENSOR_TOKEN_EMBD" && flags&flagDuplicated != 0 {
		kind = "LLM_TENSOR_OUTPUT"
	}
	op := strings.TrimPrefix(tensorInfos[kind][1], "GGML_OP_")
	if tn.hasSfx && tn.suffix == "bias" {
		op = "ADD"
	}
	return &cpp.Need{Tensor: tn.String(), Shape: append([]int64(nil), ne...), Op: op}
}

func validShape(ne []int64) bool {
	for _, x := range ne {
		if x <= 0 {
			return false
		}
	}
	return len(ne) > 0 && len(ne) <= 4
}

// shapeOK is check_tensor_dims's test.
func shapeOK(ne []int64, got gtype.Shape, reshape bool) bool {
	if reshape {
		n, m := int64(1), int64(1)
		for _, x := range ne {
			n *= x
		}
		for _, x := range got {
			m *= x
		}
		return n == m
	}
	for i := range got {
		if i < len(ne) && ne[i] != got[i] || i >= len(ne) && got[i] != 1 {
			return false
		}
	}
	return true
}

// formatShape is llama_format_tensor_shape.
func formatShape(ne []int64) string {
	var b strings.Builder
	for i, x := range ne {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%6d", x)
	}
	return b.String()
}
