package synth

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"

	"github.com/ggload/ggload/internal/replay/clip"
)

// A projector that clip loads may still not warm up: the warm-up builds
// the encoder's graph, whose ops need the tensors' shapes to agree.
// Warm reshapes the tensors until ggload's replay of the warm-up builds
// the graph, learning each shape from the op that refuses it: the
// weight of a matrix product takes its input's width, a bias or a norm's
// weight its operand's shape, a kernel its input's channels, a weight
// that is reshaped the shape asked for. libmtmd then judges the result.

// ProjectorWarmer runs ggload's warm-up of the projector file at path,
// telling learn each op that fails.
type ProjectorWarmer func(path string, learn func(op string, args []clip.OpArg)) error

// maxWarmSteps bounds the reshapes of one projector.
const maxWarmSteps = 200

// Warm reshapes p's tensors until warm builds its graphs, writing the
// file at path at each step. A tensor the graph needs and the file lacks
// is added (a null passed to an op, read, or asserted to be there names
// it), one the graph asserts absent removed. A type whose graph needs
// more than its refusals teach starts from its preset (keys and tensor
// shapes, see warmPresets). It fails with the warm-up's last error when
// nothing tells what to change, p then as far as its own geometry got.
func (p *Projector) Warm(path string, warm ProjectorWarmer) error {
	p.applyPreset()
	// a graph may take the image's grid for granted (a fixed number of
	// patches): the geometries of real vision encoders, in turn
	var first error
	var firstTry Projector
	for i, g := range warmGeometries {
		q := *p
		q.KV, q.Tensors, q.Log = slices.Clone(p.KV), slices.Clone(p.Tensors), slices.Clone(p.Log)
		if i > 0 {
			if !q.hasKey("clip.vision.image_size") || warmPresets[p.Type].fixedGeometry {
				break // an audio encoder, or a preset's grid: none to change
			}
			q.set("clip.vision.image_size", gguf.Uint32(uint32(g[0])))
			q.set("clip.vision.patch_size", gguf.Uint32(uint32(g[1])))
		}
		err := q.warm(path, warm)
		if err == nil {
			*p = q
			return nil
		}
		if first == nil {
			first, firstTry = err, q
		}
	}
	if first != nil {
		*p = firstTry // as far as the projector's own geometry got
	}
	return first
}

// warmGeometries are image and patch sizes to try: the projector's own,
// then those of common vision encoders.
var warmGeometries = [][2]int64{{0, 0}, {336, 14}, {224, 14}, {224, 16}, {384, 16}, {448, 14}}

func (p *Projector) warm(path string, warm ProjectorWarmer) error {
	p.convShapes()
	for step := 0; step < maxWarmSteps; step++ {
		if err := p.WriteFile(path); err != nil {
			return err
		}
		var fix *shapeFix
		var members []clip.OpArg
		add := ""
		failed := ""
		err := warm(path, func(op string, args []clip.OpArg) {
			if op == "" {
				members = args
				return
			}
			if failed == "" {
				failed = fmt.Sprintf(" (%s %+v)", op, args)
				for _, a := range args {
					if a.Null && a.Weight != "" && add == "" {
						add = a.Weight
					}
				}
				if add == "" {
					fix = learnShape(op, args)
				}
			}
		})
		if err == nil {
			return nil
		}
		msg := err.Error()
		if m := reAbsent.FindStringSubmatch(msg); m != nil && add == "" {
			add = m[1]
		}
		if m := reF16.FindStringSubmatch(msg); m != nil && add == "" && fix == nil {
			// a kernel whose product with an f16 im2col no backend runs:
			// f16, as the converter writes convolution kernels
			changed := false
			for i := range p.Tensors {
				if p.Tensors[i].Name == m[1] && p.Tensors[i].Type != ggml.TypeF16 {
					p.Tensors[i].Type, changed = ggml.TypeF16, true
				}
			}
			if changed {
				p.Log = append(p.Log, "warm-up f16 "+m[1])
				continue
			}
		}
		if strings.Contains(msg, "GGML_ASSERT(pos_embd)") && add == "" {
			// the graph's position embedding, made from the model's
			for _, a := range members {
				if a.Member == "position_embeddings" && a.Null {
					add = a.Weight
				}
			}
		}
		remove := ""
		if add == "" && fix == nil {
			if strings.Contains(msg, "scale_factor > 1") && !p.hasKey("clip.vision.projector.scale_factor") {
				p.set("clip.vision.projector.scale_factor", gguf.Uint32(2))
				p.Log = append(p.Log, "warm-up key clip.vision.projector.scale_factor")
				continue
			}
			if m := reAtLeast.FindStringSubmatch(msg); m != nil {
				for _, a := range members {
					if a.Member == m[1] && !a.Null {
						for i := range p.Tensors {
							if t := &p.Tensors[i]; t.Name == a.Weight {
								d, _ := strconv.Atoi(m[2])
								ne := pad4(t.Shape)
								ne[d] *= 8
								fix = &shapeFix{name: t.Name, ne: ne[:]}
							}
						}
					}
				}
			}
		}
		if add == "" && fix == nil {
			for _, m := range reMember.FindAllStringSubmatch(msg, -1) {
				for _, a := range members {
					if a.Member != m[1] && a.Member != "layer."+m[2] {
						continue
					}
					switch {
					case a.Null && !strings.Contains(msg, m[0]+" == nullptr"):
						add = a.Weight
					case !a.Null && strings.Contains(msg, m[0]+" == nullptr"):
						remove = a.Weight
					}
				}
				if add != "" || remove != "" {
					break
				}
			}
		}
		switch {
		case add != "" && !p.has(add):
			// a block's tensor: every block's
			names := []string{add}
			if strings.Contains(add, ".blk.0.") {
				for il := 1; p.has(strings.Replace(p.firstBlockTensor(), ".blk.0.", fmt.Sprintf(".blk.%d.", il), 1)); il++ {
					names = append(names, strings.Replace(add, ".blk.0.", fmt.Sprintf(".blk.%d.", il), 1))
				}
			}
			for _, n := range names {
				p.Tensors = append(p.Tensors, ArchTensor{Name: n, Type: projectorTensorType(n), Shape: projectorShape(n, len(p.Tensors), ProjectorOptions{Embd: p.embd(), ProjDim: p.embd()})})
			}
			p.convShapes()
			p.Log = append(p.Log, "warm-up tensor "+add)
		case remove != "":
			p.Tensors = slices.DeleteFunc(p.Tensors, func(t ArchTensor) bool { return t.Name == remove })
			p.Log = append(p.Log, "warm-up without "+remove)
		case fix != nil && p.reshape(*fix):
			p.Log = append(p.Log, fmt.Sprintf("shape %s %v", fix.name, fix.ne))
		default:
			return fmt.Errorf("synth: projector %s: warm-up: %w%s", p.Type, err, failed)
		}
	}
	return fmt.Errorf("synth: projector %s: the warm-up still fails after %d reshapes", p.Type, maxWarmSteps)
}

var (
	reAbsent  = regexp.MustCompile(`of the absent tensor (\S+)`)
	reMember  = regexp.MustCompile(`(?:model\.(?:layers\[0\]\.)?|layer\.)((\w+))`)
	reAtLeast = regexp.MustCompile(`model\.(\w+)\.ne\[(\d)\] >= `)
	reF16     = regexp.MustCompile(`MUL_MAT of f32 (\S+) .*, f16 `)
	// the weights and biases of norms, by their names' conventions
	reNormName = regexp.MustCompile(`norm|(^|[._])ln(_?\d|_[a-z]+)?[._]`)
)

// firstBlockTensor is a tensor of block 0 ("" if none).
func (p *Projector) firstBlockTensor() string {
	for _, t := range p.Tensors {
		if strings.Contains(t.Name, ".blk.0.") {
			return t.Name
		}
	}
	return ""
}

// embd is the encoder's width, as its metadata says (32 if it does not).
func (p *Projector) embd() int64 {
	for _, kv := range p.KV {
		if kv.Key == "clip.vision.embedding_length" || kv.Key == "clip.audio.embedding_length" {
			if n, ok := kv.Value.Int(); ok && n > 0 {
				return n
			}
		}
	}
	return 32
}

func (p *Projector) hasKey(key string) bool {
	for _, kv := range p.KV {
		if kv.Key == key {
			return true
		}
	}
	return false
}

// shapeFix is a weight's new shape.
type shapeFix struct {
	name string
	ne   []int64
}

// reshape gives the tensor its new shape; false if it has it already
// (the same fix again would loop) or the file has no such tensor.
func (p *Projector) reshape(f shapeFix) bool {
	for i := range p.Tensors {
		if p.Tensors[i].Name != f.name {
			continue
		}
		ne := slices.Clone(f.ne)
		for len(ne) > 1 && ne[len(ne)-1] == 1 {
			ne = ne[:len(ne)-1]
		}
		if pad4(p.Tensors[i].Shape) == pad4(ne) {
			return false
		}
		p.Tensors[i].Shape = ne
		return true
	}
	return false
}

func pad4(ne []int64) [4]int64 {
	out := [4]int64{1, 1, 1, 1}
	copy(out[:], ne)
	return out
}

// fitKernel is a kernel's width no larger than its input's: its own, or
// 3 (the input's where that is less).
func fitKernel(k, in int64) int64 {
	if k <= in {
		return k
	}
	return min(3, in)
}

// learnShape is the change to a weight that the failed op asks for, nil
// when it asks for none this knows. args[0] is the context for every op
// below.
func learnShape(op string, args []clip.OpArg) *shapeFix {
	t := func(i int) *clip.OpArg {
		if i < len(args) && args[i].Tensor {
			return &args[i]
		}
		return nil
	}
	w := func(a *clip.OpArg) bool { return a != nil && a.Weight != "" }
	set := func(a *clip.OpArg, ne [4]int64) *shapeFix {
		return &shapeFix{name: a.Weight, ne: ne[:]}
	}
	a, b := t(1), t(2)
	switch op {
	case "ggml_mul_mat":
		switch {
		case w(a) && b != nil && a.Ne[0] != b.Ne[0]:
			return set(a, [4]int64{b.Ne[0], a.Ne[1], 1, 1})
		case w(a) && b != nil:
			return set(a, [4]int64{a.Ne[0], a.Ne[1], 1, 1})
		case w(b) && a != nil:
			return set(b, [4]int64{a.Ne[0], b.Ne[1], b.Ne[2], b.Ne[3]})
		}
	case "ggml_add", "ggml_sub", "ggml_mul", "ggml_div", "ggml_add_inplace":
		switch {
		case w(b) && a != nil && reNormName.MatchString(b.Weight):
			// a norm's weight (or bias): a vector of a's width
			return set(b, [4]int64{a.Ne[0], 1, 1, 1})
		case w(b) && a != nil:
			// repeatable to a: each of its dims divides a's
			ne := b.Ne
			for i := range ne {
				if ne[i] == 0 || a.Ne[i]%ne[i] != 0 {
					ne[i] = a.Ne[i]
				}
			}
			if ne == b.Ne {
				ne = a.Ne
			}
			return set(b, ne)
		case w(a) && b != nil:
			return set(a, b.Ne)
		}
	case "ggml_conv_2d", "ggml_conv_2d_direct":
		if w(a) && b != nil {
			// the input's channels, a kernel no larger than the input
			return set(a, [4]int64{fitKernel(a.Ne[0], b.Ne[0]), fitKernel(a.Ne[1], b.Ne[1]), b.Ne[2], a.Ne[3]})
		}
	case "ggml_conv_2d_dw", "ggml_conv_2d_dw_direct":
		if w(a) && b != nil {
			return set(a, [4]int64{fitKernel(a.Ne[0], b.Ne[0]), fitKernel(a.Ne[1], b.Ne[1]), 1, b.Ne[2]})
		}
	case "ggml_conv_1d", "ggml_conv_1d_ph":
		if w(a) && b != nil {
			return set(a, [4]int64{a.Ne[0], b.Ne[1], a.Ne[2], 1})
		}
	case "ggml_conv_1d_dw", "ggml_conv_1d_dw_ph":
		if w(a) && b != nil {
			return set(a, [4]int64{a.Ne[0], 1, b.Ne[1], 1})
		}
	case "ggml_concat":
		if len(args) > 3 {
			dim := args[3].Int
			switch {
			case w(a) && b != nil:
				ne := b.Ne
				ne[dim] = a.Ne[dim]
				return set(a, ne)
			case w(b) && a != nil:
				ne := a.Ne
				ne[dim] = b.Ne[dim]
				return set(b, ne)
			}
		}
	case "ggml_reshape_1d", "ggml_reshape_2d", "ggml_reshape_3d", "ggml_reshape_4d":
		if w(a) {
			ne := [4]int64{1, 1, 1, 1}
			for i := 2; i < len(args) && i-2 < 4; i++ {
				ne[i-2] = args[i].Int
			}
			return set(a, ne)
		}
	case "ggml_flash_attn_ext_add_sinks":
		// a sink per head: the result is [d_head, n_head, tokens]
		if s, r := t(1), t(0); w(s) && r != nil {
			return set(s, [4]int64{r.Ne[1], 1, 1, 1})
		}
	case "ggml_ssm_conv":
		// a kernel row per channel of the input
		if w(b) && a != nil {
			k := b.Ne[0]
			if k > 8 {
				k = 4
			}
			return set(b, [4]int64{k, a.Ne[1], 1, 1})
		}
	case "ggml_view_2d":
		// a weight viewed past its end: as many more rows as the view
		// reaches (f32)
		if w(a) && len(args) == 6 {
			ne0, ne1, nb1, off := args[2].Int, args[3].Int, args[4].Int, args[5].Int
			need := off + nb1*(ne1-1) + 4*ne0
			row := 4 * a.Ne[0]
			if rows := (need + row - 1) / row; row > 0 && rows <= 1<<18 {
				ne := a.Ne
				ne[1] = max(ne[1], rows)
				return set(a, ne)
			}
		}
	case "ggml_reshape":
		if w(a) && b != nil {
			return set(a, b.Ne)
		}
	}
	return nil
}

// convShapes gives the convolution kernels, which an op accepts at any
// size, the shapes of their kind: a patch embedding a patch of the image
// (patch_size square, 3 channels) per output channel, another kernel 3
// wide, as many channels in as out.
func (p *Projector) convShapes() {
	num := func(key string, def int64) int64 {
		for _, kv := range p.KV {
			if kv.Key == key {
				if n, ok := kv.Value.Int(); ok && n > 0 {
					return n
				}
			}
		}
		return def
	}
	patch := num("clip.vision.patch_size", 8)
	heads := num("clip.vision.attention.head_count", 0)
	if heads == 0 {
		heads = num("clip.audio.attention.head_count", 4)
	}
	for i := range p.Tensors {
		t := &p.Tensors[i]
		width := t.Shape[len(t.Shape)-1]
		if strings.Contains(t.Name, "q_norm") || strings.Contains(t.Name, "k_norm") {
			// per head, where the graph normalizes heads (a whole row's
			// norm is learned from the op)
			t.Shape = []int64{max(t.Shape[0]/heads, 1)}
			continue
		}
		if strings.Contains(t.Name, "qkv") {
			// the three projections in one: views take q, k and v apart
			if strings.HasSuffix(t.Name, ".bias") {
				t.Shape = []int64{3 * t.Shape[0]}
			} else if len(t.Shape) == 2 {
				t.Shape = []int64{t.Shape[0], 3 * t.Shape[0]}
			}
			continue
		}
		if !strings.HasSuffix(t.Name, ".weight") && !strings.Contains(t.Name, ".weight.") {
			continue
		}
		switch {
		case strings.Contains(t.Name, "patch_embd"):
			t.Shape = []int64{patch, patch, 3, width}
		case strings.Contains(t.Name, "conv1d") || strings.HasPrefix(t.Name, "a.") && strings.Contains(t.Name, "conv"):
			t.Shape = []int64{3, width, width}
		case strings.Contains(t.Name, "conv"):
			t.Shape = []int64{3, 3, width, width}
		}
	}
	p.presetShapes()
}
