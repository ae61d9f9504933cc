package replay_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/synthmodel"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var demoParams = arch.ContextParams{NCtx: 512, NBatch: 2048, NUBatch: 512, NSeqMax: 2, FlashAttn: -1,
	TypeK: ggml.TypeF16, TypeV: ggml.TypeF16, OffloadKQV: true}

// The demo model made anew for a context: its context as llama_context's
// constructor resolves the parameters (n_batch to n_ctx, each of two
// sequences half the cache), its memory a KV cache of one K and V tensor
// per layer; llama.cpp's lines of the making are the replay's.
func TestNew(t *testing.T) {
	path, err := synthmodel.DemoModel(testenv.Runtime(t))
	if err != nil {
		t.Fatal(err)
	}
	m := testenv.OpenModel(t, path)
	r, err := replay.New(m, arch.Options{}, demoParams)
	if err != nil {
		t.Fatal(err)
	}
	if r.Run == nil || r.Context.NCtx != 512 || r.Context.NSeqMax != 2 || r.Context.NCtxSeq != 256 || r.Context.NBatch != 512 || !r.Context.CausalAttn {
		t.Fatalf("context %+v", r.Context)
	}
	if r.Memory == nil || r.Memory.Class != "llama_kv_cache" || len(r.Memory.Caches) != 1 || len(r.Memory.Caches[0].Tensors) != 2*synthmodel.Demo.Layers {
		t.Fatalf("memory %+v", r.Memory)
	}
	// a quantized V cache asks for flash attention, as llama.cpp says
	q := demoParams
	q.TypeK, q.TypeV = ggml.TypeQ8_0, ggml.TypeQ8_0
	if r, err = replay.New(m, arch.Options{}, q); err != nil {
		t.Fatal(err)
	}
	if want := "INFO llama_init_from_model: enabling flash_attn since it is required for quantized V cache"; !slices.Contains(r.Log, want) {
		t.Errorf("log %q, want %q", r.Log, want)
	}
	// more sequences than LLAMA_MAX_SEQ: llama.cpp's own check refuses
	// it, wrapped as refused with the file
	small := demoParams
	small.NSeqMax = 600
	_, err = replay.New(m, arch.Options{}, small)
	if err == nil || !errors.Is(err, replay.ErrRefused) || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("600 sequences: %v", err)
	}
}

// A model of an architecture the pin does not know has no context; a
// model the pin's loader refuses is refused with llama.cpp's reason.
func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, kv map[string]gguf.Value) *gguf.Model {
		t.Helper()
		w := gguf.NewWriter()
		for k, v := range kv {
			if err := w.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
		path := filepath.Join(dir, name)
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		return testenv.OpenModel(t, path)
	}
	unknown := write("unknown.gguf", map[string]gguf.Value{"general.architecture": gguf.String("nosuch")})
	if _, err := replay.New(unknown, arch.Options{}, demoParams); err == nil || !strings.Contains(err.Error(), "does not know architecture 'nosuch': it has no graph to run") {
		t.Errorf("an unknown architecture: %v", err)
	}
	bare := write("bare.gguf", map[string]gguf.Value{"general.architecture": gguf.String("llama")})
	_, err := replay.New(bare, arch.Options{}, demoParams)
	if !errors.Is(err, replay.ErrRefused) || !strings.Contains(err.Error(), "key not found in model: llama.context_length") {
		t.Errorf("a llama without its keys: %v", err)
	}
	// Refused names the file and says llama.cpp's reason
	plain := errors.New("plain")
	if got := replay.Refused(bare, plain); errors.Is(got, replay.ErrRefused) || got.Error() != bare.Paths[0]+": plain" {
		t.Errorf("a plain error: %v", got)
	}
	if got := replay.Refused(bare, &arch.Abort{Msg: "GGML_ASSERT(x) failed"}); !errors.Is(got, replay.ErrRefused) || !strings.Contains(got.Error(), "(llama.cpp would abort here)") {
		t.Errorf("an abort: %v", got)
	}
}
