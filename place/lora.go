// Port of llama.cpp src/llama-adapter.cpp (v0.5.0):
// llama_adapter_lora_init's checks and buffer types.

package place

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/place/internal/probe"
)

// ErrBadLoRA is wrapped by the error of an adapter file llama.cpp would
// refuse (llama_adapter_lora_init returns NULL for it): the wrong kind of
// GGUF, another architecture, a tensor the model lacks, a shape that does
// not fit the model's tensor, a lora_a without its lora_b.
var ErrBadLoRA = errors.New("bad LoRA adapter")

// LoRA is a LoRA adapter checked against the model of a plan and placed
// beside it as llama_adapter_lora_init does: each pair of low-rank
// matrices in the buffer type of the model tensor it modifies (the CPU's
// own type where that is one of the CPU's extra types, CPU_REPACK), one
// buffer per buffer type. llama.cpp loads adapters after the model and
// its -fit, so a plan's memory and Fit do not count them; Buffers says
// what they add.
type LoRA struct {
	Path string
	Arch string // general.architecture, the model's
	// Alpha is adapter.lora.alpha (0 when absent: the scale is then the
	// one asked for, not divided by the rank).
	Alpha float32
	// InvocationTokens are the aLoRA invocation tokens
	// (adapter.alora.invocation_tokens); nil for a plain LoRA.
	InvocationTokens []int32
	// TaskName and PromptPrefix are adapter.lora.task_name and
	// adapter.lora.prompt_prefix, as llama.cpp's common code reads them.
	TaskName, PromptPrefix string
	// Pairs are the adapted model tensors, by name (llama.cpp's order).
	Pairs []LoRAPair
	// Buffers are the adapter's buffers in llama.cpp's allocation order.
	Buffers []LoRABuffer
	// Log is llama.cpp's lines for this adapter, worded as its own.
	Log []LogLine
}

// LoRAPair is the two matrices that adapt one model tensor: its product
// B·A (scaled) is added to the tensor's matrix multiplications.
type LoRAPair struct {
	Base       string // the model tensor
	A, B       LoRATensor
	BufferType ggml.BufferType
	Device     *ggml.Device // the buffer type's device (the CPU for CPU_Mapped)
	Buffer     int          // index into LoRA.Buffers
}

// Rank is the adapter's rank for this tensor (B's first dimension).
func (p *LoRAPair) Rank() int64 { return p.B.Shape[0] }

// LoRATensor is one tensor of an adapter file.
type LoRATensor struct {
	Name   string
	Type   ggml.Type
	Shape  ggml.Shape
	Bytes  int64
	Offset int64  // absolute offset of its data in the file
	Alloc  uint64 // bytes it takes in its buffer, padded to the alignment
	At     uint64 // its offset in its buffer
}

// LoRABuffer is one buffer of an adapter: the tensors of one buffer type.
type LoRABuffer struct {
	Name       string // as llama.cpp names it ("CPU", "CPU_Mapped", "Vulkan0")
	BufferType ggml.BufferType
	Device     *ggml.Device
	Requested  uint64 // what is asked for: the tensors' padded sizes
	Size       uint64 // as the buffer will report it
	Pairs      []int  // indexes into LoRA.Pairs, in allocation order
	// Parts are, on the meta device of split mode tensor, what the buffer
	// allocates on each of its devices (every tensor whole on each).
	Parts []BufferPart
}

// LoRA keys of the GGUF metadata.
const (
	keyGeneralType      = "general.type"
	keyAdapterType      = "adapter.type"
	keyLoRAAlpha        = "adapter.lora.alpha"
	keyLoRATaskName     = "adapter.lora.task_name"
	keyLoRAPromptPrefix = "adapter.lora.prompt_prefix"
	keyALoRATokens      = "adapter.alora.invocation_tokens"
)

// PlanLoRA reads the LoRA adapter at path, checks it against the plan's
// model and places it as llama_adapter_lora_init would on the loaded
// model. An adapter llama.cpp refuses gives an error naming the file and
// the reason (wrapping ErrBadLoRA); an adapter llama.cpp would abort on
// (a metadata value of the wrong type) is refused the same way.
func (p *Plan) PlanLoRA(path string) (*LoRA, error) {
	f, err := gguf.Open(path)
	if err != nil {
		// gguf_init_from_file_ptr failed
		return nil, fmt.Errorf("place: LoRA adapter %s: failed to load lora adapter from file: %w", path, err)
	}
	defer f.Close()
	l, err := p.planLoRA(path, f)
	if err != nil {
		return nil, fmt.Errorf("place: LoRA adapter %s: %w", path, err)
	}
	return l, nil
}

func badLoRA(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadLoRA}, args...)...)
}

// loraStr is a string value of the metadata ("" when absent).
func loraStr(f *gguf.File, key string) (string, error) {
	v, ok := f.Lookup(key)
	if !ok {
		return "", nil
	}
	s, ok := v.Str()
	if !ok || v.IsArray() {
		return "", badLoRA("%s is a %s, not a string", key, v.TypeName())
	}
	return s, nil
}

func (p *Plan) planLoRA(path string, f *gguf.File) (*LoRA, error) {
	const fn = "llama_adapter_lora_init_impl: "
	l := &LoRA{Path: path}
	l.Log = append(l.Log, LogLine{"INFO", fmt.Sprintf("llama_adapter_lora_init: loading lora adapter from '%s' ...", path)})

	// the metadata, checked in llama.cpp's order
	gtype, err := loraStr(f, keyGeneralType)
	if err != nil {
		return nil, err
	}
	if gtype != "adapter" {
		return nil, badLoRA("expect general.type to be 'adapter', but got: %s", gtype)
	}
	arch, err := loraStr(f, gguf.KeyArchitecture)
	if err != nil {
		return nil, err
	}
	if arch != p.Arch {
		return nil, badLoRA("model arch and LoRA arch mismatch (the adapter is for %q, the model is %q)", arch, p.Arch)
	}
	l.Arch = arch
	atype, err := loraStr(f, keyAdapterType)
	if err != nil {
		return nil, err
	}
	if atype != "lora" {
		return nil, badLoRA("expect adapter.type to be 'lora', but got: %s", atype)
	}
	if v, ok := f.Lookup(keyLoRAAlpha); ok {
		if v.IsArray() || v.Kind() != gguf.TypeFloat32 {
			return nil, badLoRA("%s is a %s, not a float32", keyLoRAAlpha, v.TypeName())
		}
		x, _ := v.Float()
		l.Alpha = float32(x)
	}
	if v, ok := f.Lookup(keyALoRATokens); ok {
		if !v.IsArray() {
			return nil, badLoRA("invalid gguf type for %s", keyALoRATokens)
		}
		if v.ElemType() != gguf.TypeUint32 {
			return nil, badLoRA("invalid gguf element type for %s", keyALoRATokens)
		}
		ints, err := v.Ints()
		if err != nil {
			return nil, badLoRA("%s: %v", keyALoRATokens, err)
		}
		l.InvocationTokens = make([]int32, len(ints))
		for i, x := range ints {
			l.InvocationTokens[i] = int32(uint32(x)) // llama_token is an int32
		}
	}
	// llama.cpp's common code reads these with llama_adapter_meta_val_str,
	// which knows only the non-array values
	for key, dst := range map[string]*string{keyLoRATaskName: &l.TaskName, keyLoRAPromptPrefix: &l.PromptPrefix} {
		if v, ok := f.Lookup(key); ok && !v.IsArray() {
			if s, ok := v.Str(); ok {
				*dst = s
			} else {
				*dst = v.String()
			}
		}
	}

	// pair lora_a and lora_b by the name of the tensor they adapt
	type half struct{ a, b *gguf.TensorInfo }
	pairs := map[string]*half{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		switch {
		case strings.HasSuffix(t.Name, ".lora_a"):
			base := strings.ReplaceAll(t.Name, ".lora_a", "")
			if pairs[base] == nil {
				pairs[base] = &half{}
			}
			pairs[base].a = t
		case strings.HasSuffix(t.Name, ".lora_b"):
			base := strings.ReplaceAll(t.Name, ".lora_b", "")
			if pairs[base] == nil {
				pairs[base] = &half{}
			}
			pairs[base].b = t
		case strings.HasSuffix(t.Name, "_norm.weight"):
			// llama.cpp skips norm vectors of adapters
		default:
			return nil, badLoRA("LoRA tensor '%s' has unexpected suffix", t.Name)
		}
	}
	names := make([]string, 0, len(pairs))
	for n := range pairs {
		names = append(names, n)
	}
	slices.Sort(names) // std::map's order

	cpu := p.rt.CPUDevice()
	if cpu == nil {
		return nil, fmt.Errorf("llama_adapter_lora_init_impl: no CPU backend found")
	}
	extra := cpu.ExtraBufferTypes()
	model := p.loraModelTensors()
	var mapped ggml.BufferType
	type group struct {
		buft ggml.BufferType
		dev  *ggml.Device
		idx  []int
	}
	var groups []*group
	byBuft := map[ggml.BufferType]*group{}
	var pb *probe.Prober // (made for the first pair)
	for _, name := range names {
		h := pairs[name]
		if h.a == nil || h.b == nil {
			return nil, badLoRA("LoRA tensor pair for '%s' is missing one component", name)
		}
		mt := model[name]
		if mt == nil {
			return nil, badLoRA("LoRA tensor '%s' does not exist in base model (hint: maybe wrong base model?)", name)
		}
		c := &p.Contexts[mt.Context]
		buft, dev := c.BufferType, c.Device
		switch {
		case c.Mapped:
			// a weight in a buffer made over the mapped file: the buffer's
			// type is the host-pointer type (CPU_Mapped), not the device's
			if mapped.IsZero() {
				if mapped, err = c.Device.HostPtrBufferType(); err != nil {
					return nil, err
				}
			}
			buft = mapped
		}
		if slices.Contains(extra, buft) {
			l.Log = append(l.Log, LogLine{"WARN", fmt.Sprintf(fn+"lora for '%s' cannot use buft '%s', fallback to CPU", mt.Name, buft.Name())})
			buft, dev = cpu.BufferType(), cpu
		}
		l.Log = append(l.Log, LogLine{"DEBUG", fmt.Sprintf(fn+"lora for '%s' -> '%s'", mt.Name, buft.Name())})
		ne := mt.Shape
		a, b := h.a.Shape, h.b.Shape
		if strings.HasSuffix(name, "token_embd.weight") {
			// B is not transposed and A, B are swapped (llm_build_inp_embd)
			if ne[0] != b[1] || ne[1] != a[1] {
				return nil, badLoRA("tensor '%s' has incorrect shape (hint: maybe wrong base model?): the model's is %v, lora_a %v, lora_b %v", name, ne, a, b)
			}
		} else {
			if ne[0] != a[0] || ne[1] != b[1] {
				return nil, badLoRA("tensor '%s' has incorrect shape (hint: maybe wrong base model?): the model's is %v, lora_a %v, lora_b %v", name, ne, a, b)
			}
			if a[1] != b[0] {
				return nil, badLoRA("lora_a tensor is not transposed (hint: adapter from \"finetune\" example is no longer supported): '%s' lora_a %v, lora_b %v", name, a, b)
			}
		}
		pair := LoRAPair{Base: name, A: loraTensor(f, h.a), B: loraTensor(f, h.b), BufferType: buft, Device: dev}
		if pb == nil {
			h, err := readHparams(p.Model, p.Params)
			if err != nil {
				return nil, err
			}
			pb = probe.New(context.Background(), p.rt, h.probe, false)
		}
		if err := p.loraComputable(pb, &pair, mt.Op); err != nil {
			return nil, err
		}
		pi := len(l.Pairs)
		l.Pairs = append(l.Pairs, pair)
		g := byBuft[buft]
		if g == nil {
			g = &group{buft: buft, dev: dev}
			byBuft[buft] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, pi)
	}

	// one buffer per buffer type, allocated in the order of std::map over
	// the buffer type pointers
	slices.SortFunc(groups, func(x, y *group) int { return cmp.Compare(x.buft.Handle(), y.buft.Handle()) })
	for _, g := range groups {
		bi := len(l.Buffers)
		lb := LoRABuffer{Name: g.buft.Name(), BufferType: g.buft, Device: g.dev, Pairs: g.idx}
		align := max(g.buft.Alignment(), 1)
		maxSize := g.buft.MaxSize()
		parts := 1
		var cur uint64
		for _, pi := range g.idx {
			pr := &l.Pairs[pi]
			pr.Buffer = bi
			for _, t := range []*LoRATensor{&pr.A, &pr.B} {
				n, err := loraAllocSize(p.rt, g.buft, t)
				if err != nil {
					return nil, err
				}
				t.Alloc = (n + align - 1) / align * align
				if cur > 0 && maxSize > 0 && cur+t.Alloc > maxSize {
					// ggml_backend_alloc_ctx_tensors_from_buft starts another
					// buffer and joins them in a multi-buffer
					parts++
					cur = 0
				}
				t.At = lb.Requested
				cur += t.Alloc
				lb.Requested += t.Alloc
			}
		}
		if g.dev.IsMeta() {
			// split mode tensor: the meta device's callback has no rule
			// for an adapter's names and mirrors each tensor whole on every
			// device; the buffer reports its largest device's share
			if err := lb.metaParts(p.rt, g.dev, l.Pairs); err != nil {
				return nil, err
			}
		} else {
			slack, err := g.buft.AllocSlack()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", g.buft.Name(), err)
			}
			lb.Size = lb.Requested + uint64(parts)*slack
		}
		l.Buffers = append(l.Buffers, lb)
		l.Log = append(l.Log, LogLine{"INFO", fmt.Sprintf(fn+"%10s LoRA buffer size = %8.2f MiB", lb.Name, float64(lb.Size)/1024/1024)})
	}
	l.Log = append(l.Log, LogLine{"INFO", fmt.Sprintf(fn+"loaded %d tensors from lora file", 2*len(l.Pairs))})
	return l, nil
}

func loraTensor(f *gguf.File, t *gguf.TensorInfo) LoRATensor {
	return LoRATensor{Name: t.Name, Type: t.Type, Shape: t.Shape, Bytes: t.Size, Offset: f.DataOffset + int64(t.Offset)}
}

// metaParts lays the buffer out on the devices of meta device d, every
// tensor mirrored, and sizes it as ggml's meta buffer reports itself.
func (lb *LoRABuffer) metaParts(rt *ggml.Runtime, d *ggml.Device, pairs []LoRAPair) error {
	var ts []metaSlices
	for _, pi := range lb.Pairs {
		for _, t := range []*LoRATensor{&pairs[pi].A, &pairs[pi].B} {
			ts = append(ts, metaSlices{t.Type, t.Shape, nil})
		}
	}
	parts, err := metaPartsOf(d.Parts(), ts, func(b ggml.BufferType, typ ggml.Type, ne ggml.Shape) (uint64, error) {
		return loraAllocSize(rt, b, &LoRATensor{Name: "", Type: typ, Shape: ne})
	})
	if err != nil {
		return err
	}
	lb.Parts, lb.Size, lb.Requested = parts, 0, 0
	for _, part := range parts {
		lb.Size, lb.Requested = max(lb.Size, part.Size), max(lb.Requested, part.Requested)
	}
	return nil
}

// loraAllocSize is ggml_backend_buft_get_alloc_size of the tensor.
func loraAllocSize(rt *ggml.Runtime, b ggml.BufferType, t *LoRATensor) (uint64, error) {
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	if err != nil {
		return 0, err
	}
	defer ctx.Free()
	x, err := ctx.NewTensor(t.Type, t.Shape[:]...)
	if err != nil {
		return 0, fmt.Errorf("LoRA tensor '%s': %w", t.Name, err)
	}
	return b.AllocSize(x), nil
}

// loraModelTensors maps each name to the tensor llama_model::get_tensor
// finds: the first of that name in the model's contexts, in their order.
func (p *Plan) loraModelTensors() map[string]*TensorPlan {
	out := map[string]*TensorPlan{}
	for ci := range p.Contexts {
		for _, ti := range p.Contexts[ci].Tensors {
			t := &p.Tensors[ti]
			if _, ok := out[t.Name]; !ok {
				out[t.Name] = t
			}
		}
	}
	return out
}

// Size is the bytes of the adapter's buffers.
func (l *LoRA) Size() uint64 {
	var n uint64
	for _, b := range l.Buffers {
		n += b.Size
	}
	return n
}

// loraComputable refuses an adapter tensor of a type the ops it feeds
// cannot take, asking as llama.cpp asks for weights (the probe's op, over
// a buffer of the pair's type, to supports_op of its device): llama.cpp
// loads such an adapter and dies computing it. The graphs multiply the
// input by lora_a, then that by lora_b (MUL_MAT, or for expert weights
// MUL_MAT_ID); the token embedding's lora_a gives rows (GET_ROWS) that
// lora_b multiplies. A device that refuses the op leaves it to the CPU,
// whose supports_op takes every type: there the CPU's own table of
// kernels says (ggml_get_type_traits_cpu: a type without a dot product,
// an integer type or f64, is called through a null function).
func (p *Plan) loraComputable(pb *probe.Prober, pr *LoRAPair, baseOp ggml.Op) error {
	opA, opB := ggml.OpMulMat, ggml.OpMulMat
	switch baseOp {
	case ggml.OpMulMatID:
		opA, opB = ggml.OpMulMatID, ggml.OpMulMatID
	case ggml.OpGetRows:
		opA = ggml.OpGetRows
	}
	for _, c := range []struct {
		t  *LoRATensor
		op ggml.Op
	}{{&pr.A, opA}, {&pr.B, opB}} {
		ok, err := pb.Supported(c.t.Name, c.t.Type, c.t.Shape, c.op, pr.BufferType, pr.Device)
		if err != nil {
			return badLoRA("LoRA tensor '%s' (%s): %v", c.t.Name, c.t.Type, err)
		}
		onCPU := pr.Device.Type() == ggml.DeviceCPU
		switch has, known := p.rt.CPUMatMulKernel(c.t.Type); {
		case !ok && onCPU:
			return badLoRA("LoRA tensor '%s' is %s, which the CPU's %s cannot take (supports_op): llama.cpp would abort computing it", c.t.Name, c.t.Type, p.rt.OpName(c.op))
		case (!ok || onCPU) && known && !has:
			return badLoRA("LoRA tensor '%s' is %s, which the matrix product cannot take: ggml's CPU has no dot product for %s (ggml_get_type_traits_cpu), and llama.cpp would crash computing it", c.t.Name, c.t.Type, c.t.Type)
		}
	}
	return nil
}
