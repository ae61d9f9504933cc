package place

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/place/internal/probe"
)

// hparams are the model's hyperparameters as the pinned llama.cpp reads
// them (its own load_hparams, replayed by internal/replay/arch), reduced to what
// placement asks of them: the layer count, the sliding-window layers, and
// the sizes llama.cpp's supports_op probes build their ops with.
type hparams struct {
	arch        string    // general.architecture, as the file has it
	shown       string    // arch as messages print it: escaped and cut
	run         *arch.Run // the replay; CreateTensors is nil-safe only for exact runs
	exact       bool      // the architecture's own tensor creation is known
	nLayerAll   int
	nLayerNextn int
	nCtxTrain   int64 // n_ctx_train
	nExpert     int64 // n_expert
	nEmbd       int64
	isSWA       []bool

	// probe is what the supports_op probes build their ops with (and
	// n_embd_inp(), which a projector's output must match)
	probe probe.Model

	log []LogLine // llama.cpp's lines of the replay (overrides used or ignored)

	contexts []*contextMemo // the contexts the model's plans made (planContextOnce)
	plans    int
}

func (h *hparams) swa(il int) bool { return il >= 0 && il < len(h.isSWA) && h.isSWA[il] }

// ErrRefused is wrapped by New's error for a model the pinned llama.cpp
// refuses to load (a missing key or tensor, a wrong shape, a failed check
// of its hyperparameters); the error's text is llama.cpp's.
var ErrRefused = replay.ErrRefused

// ErrNeedsTarget is wrapped by Plan.ContextErr for a draft model of
// speculative decoding (EAGLE-3, DFlash, the Gemma 4 assistant) whose
// context llama.cpp makes only beside its target model's (ctx_other):
// the model places and loads as llama.cpp's does, and llama.cpp's -fit
// takes the missing context as a warning.
var ErrNeedsTarget = errors.New("a draft model: its context is made beside its target model's")

// needsTarget is the error of a context refused for want of a target
// model's (llama_context's constructor throws "... requires ctx_other to
// be set"), wrapping ErrNeedsTarget; nil for any other error.
func needsTarget(m *gguf.Model, err error) error {
	var t *arch.Throw
	if !errors.As(err, &t) || !strings.Contains(t.Msg, "requires ctx_other to be set") {
		return nil
	}
	file := ""
	if len(m.Paths) > 0 && m.Paths[0] != "" {
		file = m.Paths[0] + ": "
	}
	return fmt.Errorf("place: %s%s is %w, as llama.cpp's speculative decoding makes it (llama.cpp alone: %s)", file, m.Architecture(), ErrNeedsTarget, t.Msg)
}

// refused wraps an error of the replay with the model's file.
func refused(m *gguf.Model, err error) error {
	return fmt.Errorf("place: %w", replay.Refused(m, err))
}

// readHparams replays llama.cpp's load_hparams for the model; an
// architecture the pin does not know gets the shared part only.
func readHparams(m *gguf.Model, params Params) (*hparams, error) {
	for _, o := range params.KVOverrides {
		if strings.HasPrefix(o.Key, "split.") {
			return nil, fmt.Errorf("place: --override-kv %s: the split keys say which files the model is made of; ggload reads them from the files", o.Key)
		}
	}
	var log []LogLine
	opts := arch.Options{LoadMTP: params.LoadMTP, Overrides: params.KVOverrides,
		Log: func(level, text string) { log = append(log, LogLine{level, text}) }}
	run, err := arch.Load(m, opts)
	if errors.Is(err, arch.ErrUnknownArch) && m.Architecture() != "" && !arch.Projector(m.Architecture()) {
		log = nil
		run, err = arch.LoadGeneric(m, opts)
	}
	if err != nil {
		return nil, refused(m, err)
	}
	hp := run.Hparams()
	h := &hparams{arch: run.Arch, shown: gguf.Printable(run.Arch, 64), run: run, exact: run.Exact(), log: log}
	field := func(name string) int64 {
		v, _ := hp.Field(name)
		return v
	}
	call := func(name string, args ...int64) int64 {
		v, err2 := hp.Call(name, args...)
		if err2 != nil && err == nil {
			err = err2
		}
		return v
	}
	h.nLayerAll = int(field("n_layer_all"))
	h.nLayerNextn = int(field("n_layer_nextn"))
	if h.nLayerAll <= 0 || h.nLayerAll > 1<<16 {
		return nil, refused(m, fmt.Errorf("%s.block_count = %d, must be in [1, 65536]", h.shown, h.nLayerAll))
	}
	h.nEmbd = field("n_embd")
	h.nCtxTrain = field("n_ctx_train")
	h.nExpert = field("n_expert")
	h.isSWA = make([]bool, h.nLayerAll)
	for il := range h.isSWA {
		h.isSWA[il] = call("is_swa", int64(il)) != 0
	}
	h.probe = probe.Model{Arch: h.shown, ExpertUsedMax: call("n_expert_used_max"), RouterLayer: field("router_layer"),
		Head0: call("n_head"), EmbdHeadV: call("n_embd_head_v"), EmbdInp: call("n_embd_inp"),
		SSMDState: field("ssm_d_state"), SSMDInner: field("ssm_d_inner"), SSMNGroup: field("ssm_n_group")}
	if err != nil {
		return nil, refused(m, err)
	}
	return h, nil
}
