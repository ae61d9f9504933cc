package place

import (
	"fmt"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/clip"
)

// Mmproj is a multimodal projector file placed as the pin's clip_init
// places it beside a model: every encoder of the file (vision, audio,
// audio generation) is a clip context of its own on one device, the
// device MmprojDevice picks, and holds its weights in one buffer of that
// device's default buffer type, allocated with all of its tensors in the
// order clip creates them. clip reads the weights from the file into that
// buffer whatever the model's load mode: the projector is never mapped.
type Mmproj struct {
	Path   string
	Header *MmprojHeader
	// Device is the device clip runs every encoder on (the CPU without
	// offloading), and BufferType its default buffer type, the type of
	// every weight buffer of the projector.
	Device     *ggml.Device
	BufferType ggml.BufferType
	// Backend is the backend's name as clip logs it ("CPU", "Vulkan0").
	Backend string
	// Encoders are the file's clip contexts, in the order clip_init makes
	// them (vision, audio, gen_audio).
	Encoders []MmprojEncoder
	// ModelSize is the bytes of all the file's tensors (clip's "model
	// size"), whichever encoder loads them.
	ModelSize uint64
	// Log is clip's info lines for this file, worded as its own: the
	// loader's summary of the file, and per encoder the backend it uses,
	// its projector type and the model size (clip prints its other
	// hyperparameters between these, which ggload does not repeat).
	Log []LogLine
}

// MmprojEncoder is one clip context of a projector: its weight tensors,
// where each lies in its buffer, and the buffer.
type MmprojEncoder struct {
	Modality  string // "vision", "audio" or "gen_audio"
	Projector string // the projector type, as clip names it
	Embd      int64  // the width of the embeddings it gives the text model
	// Tensors are the encoder's weights in the order clip creates them,
	// each with its place in Buffer.
	Tensors []MmprojPlacedTensor
	Buffer  MmprojBuffer
	// Compute is the compute buffers the encoder's warm-up reserves, in
	// bytes by device name, as clip counts them (mem_compute): clip's
	// graphs replayed for its dummy image or audio. Nil for an encoder
	// clip does not warm up (audio generation), and where the replay
	// could not build the graph: ComputeErr says why.
	Compute    map[string]uint64
	ComputeErr error
	// FlashAttn is whether the warm-up left flash attention on.
	FlashAttn bool

	warmLog []LogLine
}

// MmprojPlacedTensor is a projector tensor and its place in its encoder's
// weight buffer.
type MmprojPlacedTensor struct {
	MmprojTensor
	At    uint64 // its offset in the buffer
	Alloc uint64 // the bytes it takes there, padded to the alignment
}

// MmprojBuffer is an encoder's weight buffer.
type MmprojBuffer struct {
	Name       string // as ggml names the buffer: its buffer type's name
	BufferType ggml.BufferType
	Device     *ggml.Device
	Requested  uint64 // the tensors' padded sizes
	Size       uint64 // as the buffer will report it
}

// Size is the bytes of the projector's weight buffers.
func (m *Mmproj) Size() uint64 {
	var n uint64
	for _, e := range m.Encoders {
		n += e.Buffer.Size
	}
	return n
}

// Encoder returns the projector's encoder of a modality, or nil.
func (m *Mmproj) Encoder(modality string) *MmprojEncoder {
	for i := range m.Encoders {
		if m.Encoders[i].Modality == modality {
			return &m.Encoders[i]
		}
	}
	return nil
}

// PlanMmproj reads the projector file at path and places it as clip_init
// would with the options: its encoders, the device and buffer type they
// use, each weight buffer's tensors, offsets and size. It checks the
// file as mtmd does when it opens one, but not against a text model
// (Plan.PlanMmproj does that too). Errors name the file and the reason.
func PlanMmproj(rt *ggml.Runtime, path string, opts MmprojOptions) (*Mmproj, error) {
	if rt == nil {
		return nil, fmt.Errorf("place: mmproj %s: no runtime", path)
	}
	if path == "" {
		return nil, fmt.Errorf("place: mmproj: no file named")
	}
	// the device first: a bad -mmdev is refused while the options are
	// parsed, before the file is read
	dev, err := MmprojDevice(rt, opts)
	if err != nil {
		return nil, err
	}
	f, err := gguf.Open(path)
	if err != nil {
		// gguf_init_from_file failed in clip_model_loader
		return nil, fmt.Errorf("place: mmproj %s: failed to load CLIP model: %w", path, err)
	}
	defer f.Close()
	h, err := readMmprojHeader(path, f, clip.Options{ImageMinTokens: opts.ImageMinTokens, ImageMaxTokens: opts.ImageMaxTokens})
	if err != nil {
		return nil, fmt.Errorf("place: %w", err)
	}
	bt := dev.BufferType()
	if bt.IsZero() {
		return nil, fmt.Errorf("place: mmproj %s: %s has no default buffer type", path, dev.Name())
	}
	m := &Mmproj{Path: path, Header: h, Device: dev, BufferType: bt, Backend: "CPU"}
	if dev.Type() != ggml.DeviceCPU {
		m.Backend = dev.Name()
	}
	for _, t := range f.Tensors {
		m.ModelSize += uint64(t.Size)
	}
	m.Log = mmprojLoaderLog(f)
	for _, c := range h.Contexts {
		e, err := planMmprojEncoder(rt, dev, bt, c)
		if err != nil {
			return nil, fmt.Errorf("place: mmproj %s: %s encoder: %w", path, c.Modality, err)
		}
		if c.Modality != "gen_audio" {
			warmMmproj(rt, dev, c, &e, opts.FlashAttn)
			m.Log = append(m.Log, e.warmLog...)
		}
		m.Encoders = append(m.Encoders, e)
		m.Log = append(m.Log,
			LogLine{"INFO", fmt.Sprintf("clip_ctx: CLIP using %s backend", m.Backend)},
			LogLine{"INFO", fmt.Sprintf("load_hparams: projector:          %s", mmprojTypeName(f, c.Modality))},
			LogLine{"INFO", fmt.Sprintf("load_hparams: model size:         %.2f MiB", float64(m.ModelSize)/1024/1024)},
		)
	}
	return m, nil
}

// PlanMmproj places the projector at path beside the plan's model, as
// PlanMmproj (the function) does, and refuses it, as mtmd refuses it,
// when its embeddings are not as wide as the text model's input
// embeddings (llama_model_n_embd_inp).
func (p *Plan) PlanMmproj(path string, opts MmprojOptions) (*Mmproj, error) {
	if opts.Devices == nil {
		opts.Devices = p.Params.DeviceNames
	}
	m, err := PlanMmproj(p.rt, path, opts)
	if err != nil {
		return nil, err
	}
	if err := p.CheckMmproj(m); err != nil {
		return nil, err
	}
	return m, nil
}

// CheckMmproj refuses a projector, as mtmd refuses it, whose embeddings
// are not as wide as the plan's model takes them (llama_model_n_embd_inp).
func (p *Plan) CheckMmproj(m *Mmproj) error {
	h, err := readHparams(p.Model, p.Params)
	if err != nil {
		return err
	}
	if err := m.Header.CheckText(h.probe.EmbdInp); err != nil {
		return fmt.Errorf("place: %w", err)
	}
	return nil
}

// mmprojTypeName is the projector type as the file names it for an
// encoder, before clip resolves a legacy name (qwen2.5o) to its encoder's
// type: clip logs this one.
func mmprojTypeName(f *gguf.File, modality string) string {
	for _, key := range []string{"clip.projector_type", map[string]string{"vision": "clip.vision.projector_type",
		"audio": "clip.audio.projector_type", "gen_audio": "clip.gen.audio.projector_type"}[modality]} {
		if v, ok := f.Lookup(key); ok {
			if s, ok := v.Str(); ok && s != "" {
				return s
			}
		}
	}
	return ""
}

// mmprojLoaderLog is clip_model_loader's summary of the file.
func mmprojLoaderLog(f *gguf.File) []LogLine {
	str := func(key string) string {
		if v, ok := f.Lookup(key); ok {
			if s, ok := v.Str(); ok {
				return s
			}
		}
		return ""
	}
	has := func(key string) bool {
		v, ok := f.Lookup(key)
		if !ok {
			return false
		}
		b, _ := v.Bool()
		return b
	}
	const fn = "clip_model_loader: "
	out := []LogLine{
		{"INFO", fn + "model name:   " + str("general.name")},
		{"INFO", fn + "description:  " + str("general.description")},
		{"INFO", fmt.Sprintf(fn+"GGUF version: %d", f.Version)},
		{"INFO", fmt.Sprintf(fn+"alignment:    %d", f.Alignment)},
		{"INFO", fmt.Sprintf(fn+"n_tensors:    %d", len(f.Tensors))},
		{"INFO", fmt.Sprintf(fn+"n_kv:         %d", len(f.KV))},
		{"INFO", ""},
	}
	for _, m := range []struct{ key, what string }{
		{"clip.has_vision_encoder", "has vision encoder"},
		{"clip.has_audio_encoder", "has audio encoder"},
		{"clip.has_gen_audio_encoder", "has audio generation (gen) encoder"},
	} {
		if has(m.key) {
			out = append(out, LogLine{"INFO", fn + m.what})
		}
	}
	return out
}

// planMmprojEncoder lays an encoder's tensors out in its weight buffer as
// ggml_backend_alloc_ctx_tensors_from_buft does: one after another, each
// padded to the buffer type's alignment.
func planMmprojEncoder(rt *ggml.Runtime, dev *ggml.Device, bt ggml.BufferType, c MmprojContext) (MmprojEncoder, error) {
	e := MmprojEncoder{Modality: c.Modality, Projector: c.Projector, Embd: c.Embd}
	size, err := MmprojBufferSize(rt, bt, c.Tensors)
	if err != nil {
		return e, err
	}
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: len(c.Tensors) + 1, NoAlloc: true})
	if err != nil {
		return e, err
	}
	defer ctx.Free()
	align := max(bt.Alignment(), 1)
	var at uint64
	for _, t := range c.Tensors {
		gt, err := ctx.NewTensor(t.Type, t.Shape[:]...)
		if err != nil {
			return e, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		n := (bt.AllocSize(gt) + align - 1) / align * align
		e.Tensors = append(e.Tensors, MmprojPlacedTensor{MmprojTensor: t, At: at, Alloc: n})
		at += n
	}
	e.Buffer = MmprojBuffer{Name: bt.Name(), BufferType: bt, Device: dev, Requested: at, Size: size}
	return e, nil
}

// warmMmproj replays clip's warm-up of an encoder on dev (and the CPU, the
// scheduler's last backend): its compute buffers by device.
func warmMmproj(rt *ggml.Runtime, dev *ggml.Device, c MmprojContext, e *MmprojEncoder, fa FlashAttn) {
	cpu := rt.CPUDevice()
	if c.enc == nil || cpu == nil {
		e.ComputeErr = fmt.Errorf("no CPU device")
		return
	}
	mode := clip.FlashAttnAuto
	switch fa {
	case FlashAttnOn:
		mode = clip.FlashAttnEnabled
	case FlashAttnOff:
		mode = clip.FlashAttnDisabled
	}
	w, err := c.enc.Warmup(clip.WarmupParams{Lib: rt.Ops(), Device: dev.Handle(), CPU: cpu.Handle(), FlashAttn: mode})
	if err != nil {
		e.ComputeErr = err
		return
	}
	e.FlashAttn = w.FlashAttn
	e.Compute = map[string]uint64{}
	for _, b := range w.Buffers {
		e.Compute[rt.Ops().DevName(b.Dev)] += b.Bytes
	}
	for _, l := range w.Log {
		level, text, _ := strings.Cut(l, " ")
		e.warmLog = append(e.warmLog, LogLine{level, text})
	}
}

// Memory is what llama-server's mtmd_get_memory_usage counts of the
// projector, by device: each warmed-up encoder's weights (their bytes,
// unpadded, on the projector's device) and its warm-up's compute
// buffers; an encoder for audio generation counts nothing. An error where
// an encoder's warm-up was not replayed.
func (m *Mmproj) Memory() (map[*ggml.Device]uint64, error) {
	out := map[*ggml.Device]uint64{}
	for _, e := range m.Encoders {
		if e.Modality == "gen_audio" {
			continue
		}
		if e.ComputeErr != nil {
			return nil, fmt.Errorf("place: mmproj %s: %s encoder: its warm-up: %w", m.Path, e.Modality, e.ComputeErr)
		}
		for _, t := range e.Tensors {
			out[m.Device] += uint64(t.Bytes)
		}
		for name, n := range e.Compute {
			d, err := m.Device.Runtime().DeviceByName(name)
			if err != nil {
				return nil, err
			}
			out[d] += n
		}
	}
	return out, nil
}

// MmprojFitTargets are the fit targets llama-server fits the model with
// beside a projector: targets (as FitOptions takes them) for each of
// llama.cpp's device slots, the projector's memory on each device added
// to the slot of the device's place in ggml's registry, as
// server-context.cpp adds it, where there is such a slot.
func MmprojFitTargets(rt *ggml.Runtime, targets []uint64, mem map[*ggml.Device]uint64) []uint64 {
	out := make([]uint64, llamaMaxDevices)
	o := FitOptions{Targets: targets}
	for i := range out {
		out[i] = o.Target(i)
	}
	for i, d := range rt.Devices() {
		if n, ok := mem[d]; ok && i < len(out) {
			out[i] += n
		}
	}
	return out
}

// llamaMaxDevices is llama_max_devices() of the pin: fit's targets.
const llamaMaxDevices = 16
