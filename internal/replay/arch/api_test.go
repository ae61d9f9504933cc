package arch_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/lab/synth"
)

// The package's lookups answer from the pin's tables.
func TestTables(t *testing.T) {
	if info, ok := arch.KindInfo("OUTPUT"); !ok || info.Kind != "OUTPUT" {
		t.Errorf("KindInfo(OUTPUT) = %+v, %v", info, ok)
	}
	if _, ok := arch.KindInfo("NO_SUCH_KIND"); ok {
		t.Error("KindInfo of no kind")
	}
	for _, c := range []struct {
		name  string
		kind  string
		layer int
		op    string
	}{
		{"blk.7.attn_q.weight", "ATTN_Q", 7, "MUL_MAT"},
		{"blk.3.attn_q.bias", "ATTN_Q", 3, "ADD"},
		{"blk.2.ffn_down_exps.bias", "FFN_DOWN_EXPS", 2, "ADD_ID"},
		{"token_embd.weight", "TOKEN_EMBD", -1, "GET_ROWS"},
	} {
		info, layer, ok := arch.LookupTensor(c.name)
		if !ok || info.Kind != c.kind || layer != c.layer || info.Op != c.op {
			t.Errorf("LookupTensor(%s) = %+v, %d, %v; want %s, %d, %s", c.name, info, layer, ok, c.kind, c.layer, c.op)
		}
	}
	if _, _, ok := arch.LookupTensor("blk.0.no_such_tensor.weight"); ok {
		t.Error("LookupTensor of no tensor")
	}
	if ts := arch.Templates(); len(ts) < 100 || !contains(ts, "blk.%d.attn_q") {
		t.Errorf("%d templates", len(ts))
	}
	if arch.LayerLimit() != 512 {
		t.Errorf("LLAMA_MAX_LAYERS = %d", arch.LayerLimit())
	}
	if n := arch.ProgramNames(); len(n) < 300 || !contains(n, "llama_meta_device_get_split_state") {
		t.Errorf("%d programs", len(n))
	}
	if !arch.Projector("clip") || arch.Projector("llama") || !arch.Known("llama") || arch.Known("nonesuch") {
		t.Error("Projector or Known")
	}
}

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

// A model llama.cpp does not know has its generic hyperparameters and no
// programs of its own; a known one answers what it created.
func TestRunQueries(t *testing.T) {
	m := archModel(t, "llama", synth.ConverterTypes)
	gm, err := m.Model(false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := arch.Load(gm, arch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CreateTensors(&countPlacer{}); err != nil {
		t.Fatal(err)
	}
	if !r.HasTensor("tok_embd") || r.HasTensor("no_such_member") || r.VocabSize() != 64 {
		t.Errorf("HasTensor, VocabSize %d", r.VocabSize())
	}
	hp := r.Hparams()
	if n, err := hp.Field("n_embd"); err != nil || n != 64 {
		t.Errorf("n_embd = %d, %v", n, err)
	}
	if _, err := hp.Field("no_such_field"); err == nil {
		t.Error("Field of no member")
	}
	if n, err := hp.Call("n_head", 0); err != nil || n != 4 {
		t.Errorf("n_head(0) = %d, %v", n, err)
	}
	if _, err := hp.Call("no_such_method"); err == nil {
		t.Error("Call of no method")
	}

	setKV(m, "general.architecture", gguf.String("nonesuch"))
	for i := range m.KV {
		m.KV[i].Key = strings.Replace(m.KV[i].Key, "llama.", "nonesuch.", 1)
	}
	gm, err = m.Model(false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := arch.Load(gm, arch.Options{}); !errors.Is(err, arch.ErrUnknownArch) {
		t.Errorf("unknown architecture: %v", err)
	}
	g, err := arch.LoadGeneric(gm, arch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Exact() {
		t.Error("a generic run is exact")
	}
	if err := g.CreateTensors(&countPlacer{}); err == nil {
		t.Error("a generic run creates tensors")
	}
	if _, err := g.CreateMemory(arch.MemoryParams{}); err == nil {
		t.Error("a generic run has a memory module")
	}
	if _, err := g.InitContext(arch.ContextParams{}, nil); err == nil {
		t.Error("a generic run has a context")
	}
	if _, err := g.SupportsTensorSplit(); err == nil {
		t.Error("a generic run answers for split mode tensor")
	}
}

// --override-kv as common parses it, and the architecture's name taken
// from a string override only.
func TestOverrides(t *testing.T) {
	for _, c := range []struct {
		in   string
		want arch.KVOverride
		err  string
	}{
		{"a.b=int:42", arch.KVOverride{Key: "a.b", Type: arch.OverrideInt, Int: 42}, ""},
		{"a.b=float:1.5", arch.KVOverride{Key: "a.b", Type: arch.OverrideFloat, Float: 1.5}, ""},
		{"a.b=bool:true", arch.KVOverride{Key: "a.b", Type: arch.OverrideBool, Bool: true}, ""},
		{"a.b=str:x", arch.KVOverride{Key: "a.b", Type: arch.OverrideStr, Str: "x"}, ""},
		{"a.b=bool:maybe", arch.KVOverride{}, "invalid boolean value"},
		{"a.b", arch.KVOverride{}, "malformed KV override"},
		{"a.b=char:x", arch.KVOverride{}, "invalid type"},
	} {
		got, err := arch.ParseKVOverride(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s = %+v, %v", c.in, got, err)
		}
	}
	for _, tt := range []arch.OverrideType{arch.OverrideInt, arch.OverrideFloat, arch.OverrideBool, arch.OverrideStr, 9} {
		if tt.String() == "" {
			t.Errorf("type %d has no name", tt)
		}
	}
	m := archModel(t, "llama", synth.ConverterTypes)
	setKV(m, "general.architecture", gguf.String("nonesuch"))
	gm, err := m.Model(false)
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	opts := arch.Options{Log: func(level, s string) { log = append(log, level+" "+s) },
		Overrides: []arch.KVOverride{{Key: "general.architecture", Type: arch.OverrideStr, Str: "llama"}}}
	r, err := arch.Load(gm, opts)
	if err != nil || r.Arch != "llama" || len(log) == 0 || !strings.Contains(log[0], "Using metadata override") {
		t.Errorf("a string override of the architecture: %v, %v", err, log)
	}
	log = nil
	opts.Overrides = []arch.KVOverride{{Key: "general.architecture", Type: arch.OverrideInt, Int: 1}}
	if _, err := arch.Load(gm, opts); !errors.Is(err, arch.ErrUnknownArch) || len(log) == 0 || !strings.Contains(log[0], "Bad metadata override type") {
		t.Errorf("an int override of the architecture: %v, %v", err, log)
	}
}
