package arch

import (
	"sort"
	"strconv"
	"strings"
)

// Info is a tensor kind's entry of llama.cpp's LLM_TENSOR_INFOS.
type Info struct {
	Kind  string // the llm_tensor without its prefix ("ATTN_Q")
	Class Class
	Op    string // the probe's ggml op without its prefix ("MUL_MAT")
}

// KindInfo returns the info of a tensor kind ("OUTPUT").
func KindInfo(kind string) (Info, bool) {
	i, ok := tensorInfos["LLM_TENSOR_"+kind]
	if !ok {
		return Info{}, false
	}
	return Info{Kind: kind, Class: classes[i[0]], Op: strings.TrimPrefix(i[1], "GGML_OP_")}, true
}

// nameSuffixes are the suffixes the programs create tensors with.
var nameSuffixes = []string{"weight", "bias", "scale", "input_scale", "lora_a", "lora_b"}

// LookupTensor finds a file tensor's kind by its name alone: the name
// with its numbers replaced by %d and its suffix removed is a template of
// LLM_TENSOR_NAMES (the first kind that uses it). layer is the first
// number in the name, -1 if none. A bias is used with ADD (ADD_ID for
// experts), as llama.cpp's create_tensor decides.
func LookupTensor(name string) (info Info, layer int, ok bool) {
	base, suffix := name, ""
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		for _, s := range nameSuffixes {
			if name[i+1:] == s {
				base, suffix = name[:i], s
				break
			}
		}
	}
	tmpl, layer := templateOf(base)
	kind, found := templateKinds[tmpl]
	if !found {
		return Info{}, layer, false
	}
	info, ok = KindInfo(strings.TrimPrefix(kind, "LLM_TENSOR_"))
	if !ok {
		return Info{}, layer, false
	}
	if suffix == "bias" {
		if info.Op == "MUL_MAT_ID" {
			info.Op = "ADD_ID"
		} else {
			info.Op = "ADD"
		}
	}
	return info, layer, true
}

// templateOf replaces every all-digit dot-separated part of base with %d
// and returns the first as the layer (-1 if none).
func templateOf(base string) (string, int) {
	parts := strings.Split(base, ".")
	layer := -1
	for i, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			continue
		}
		if layer < 0 {
			n, err := strconv.Atoi(p)
			if err != nil {
				return base, -1
			}
			layer = n
		}
		parts[i] = "%d"
	}
	return strings.Join(parts, "."), layer
}

// Templates lists the tensor name templates of llama.cpp's table.
func Templates() []string {
	out := make([]string, 0, len(templateKinds))
	for t := range templateKinds {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
