package place

import (
	"strconv"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/replay/arch"
)

// LayerClass is where a tensor belongs in llama.cpp's layer model.
type LayerClass int

// Layer classes (llm_tensor_layer).
const (
	LayerInput LayerClass = iota
	LayerOutput
	LayerRepeating
)

func (c LayerClass) String() string {
	switch c {
	case LayerInput:
		return "input"
	case LayerOutput:
		return "output"
	case LayerRepeating:
		return "repeating"
	}
	return "LayerClass(" + strconv.Itoa(int(c)) + ")"
}

// TensorInfo is llama.cpp's llm_tensor_info for one tensor kind.
type TensorInfo struct {
	Kind  string // the llm_tensor enum name without its prefix, e.g. "ATTN_Q"
	Layer LayerClass
	Op    ggml.Op
}

// infoOps maps the ggml ops of llama.cpp's tensor info table to ggml's.
var infoOps = map[string]ggml.Op{
	"NONE": ggml.OpNone, "ADD": ggml.OpAdd, "ADD_ID": ggml.OpAddID, "MUL": ggml.OpMul, "DIV": ggml.OpDiv,
	"MUL_MAT": ggml.OpMulMat, "MUL_MAT_ID": ggml.OpMulMatID, "SCALE": ggml.OpScale, "GET_ROWS": ggml.OpGetRows,
	"ROPE": ggml.OpRope, "IM2COL": ggml.OpIm2Col, "SSM_CONV": ggml.OpSSMConv, "SSM_SCAN": ggml.OpSSMScan,
	"RWKV_WKV6": ggml.OpRWKVWKV6,
}

func tensorInfo(i arch.Info) (TensorInfo, bool) {
	op, ok := infoOps[i.Op]
	return TensorInfo{Kind: i.Kind, Layer: LayerClass(i.Class), Op: op}, ok
}

// LookupTensor is llama.cpp's info for a tensor name (its kind, layer
// class and the op a weight of that name is used with) and the layer
// number in the name (-1 if none). ok is false for a name no kind of the
// pinned llama.cpp's table has.
func LookupTensor(name string) (info TensorInfo, layer int, ok bool) {
	i, layer, ok := arch.LookupTensor(name)
	if !ok {
		return TensorInfo{}, layer, false
	}
	info, ok = tensorInfo(i)
	return info, layer, ok
}

// TensorTemplates lists the tensor name templates of llama.cpp's table.
func TensorTemplates() []string { return arch.Templates() }

// Architectures lists the architectures whose tensor creation ggload
// replays exactly (the pinned llama.cpp's own).
func Architectures() []string { return arch.Architectures() }

// KnownArchitecture reports whether ggload replays the architecture's own
// tensor creation (false: the generic path, by tensor name).
func KnownArchitecture(name string) bool { return arch.Known(name) && !arch.Projector(name) }
