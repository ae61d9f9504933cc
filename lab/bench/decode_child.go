package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"strings"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// DecodeChild is one side of bench --decode --processes, in a process of
// its own: the model loaded and a context made, by ggload or by libllama,
// one untimed prompt and generation, then the timed ones.
type DecodeChild struct {
	Impl            string // ImplGgload or ImplLlama
	Target          string
	Layers          place.Layers
	PP, TG, Threads int
	Model           string
}

// DecodeResult is what a decode child prints.
type DecodeResult struct {
	PPS float64 `json:"pp_s"`
	TGS float64 `json:"tg_s"`
	// Logits is a hash of the bits of the prompt's last logits (FNV-1a):
	// the two sides' are equal where their logits are.
	Logits  uint64 `json:"logits_fnv"`
	PeakRSS uint64 `json:"peak_rss"`
	Err     string `json:"error,omitempty"`
}

// decodeParams are the plan and context options of a target.
func decodeParams(target string, layers place.Layers, pp int) place.Params {
	params := place.Params{DeviceNames: []string{target}, NGPULayers: layers}
	if target == "auto" {
		params.DeviceNames = nil
	}
	params.Context.NBatch, params.Context.NUBatch = max(pp, 512), 512
	return params
}

// RunDecodeChild makes c's measurement in this process and writes its
// DecodeResult as JSON to w; an error of the measurement is the result's.
func RunDecodeChild(ctx context.Context, rt *ggml.Runtime, c DecodeChild, w io.Writer) error {
	res, err := c.run(ctx, rt)
	if err != nil {
		res.Err = err.Error()
	}
	res.PeakRSS = peakRSS()
	return json.NewEncoder(w).Encode(res)
}

func (c DecodeChild) run(ctx context.Context, rt *ggml.Runtime) (DecodeResult, error) {
	var res DecodeResult
	params := decodeParams(c.Target, c.Layers, c.PP)
	var side decodeSide
	var nVocab int
	switch c.Impl {
	case ImplGgload:
		m, err := gguf.OpenModel(c.Model)
		if err != nil {
			return res, err
		}
		defer m.Close()
		plan, err := place.New(ctx, rt, m, params)
		if err != nil {
			return res, err
		}
		mdl, err := loader.Load(ctx, plan, loader.Options{})
		if err != nil {
			return res, err
		}
		defer mdl.Close()
		ic, err := infer.New(mdl, infer.Params{Threads: c.Threads})
		if err != nil {
			return res, err
		}
		defer ic.Close()
		t, _ := mdl.Tensor("token_embd.weight")
		if t == nil {
			return res, fmt.Errorf("the model has no token_embd.weight")
		}
		nVocab = int(t.Shape()[1])
		side = decodeSide{
			clear:  ic.Clear,
			decode: func(t []int32) error { return ic.Decode(infer.Batch{Tokens: t}) },
			logits: func() ([]float32, error) { return ic.Logits(-1) },
		}
	case ImplLlama:
		l, err := llama.Open(rt)
		if err != nil {
			return res, err
		}
		lm, lc, err := l.OpenContext(rt, c.Model, params, c.Threads)
		if err != nil {
			return res, err
		}
		defer lm.Free()
		defer lc.Free()
		if nVocab, err = lm.NVocab(); err != nil {
			return res, err
		}
		side = decodeSide{
			clear:  lc.Clear,
			decode: func(t []int32) error { return lc.Decode(t, nil, nil, nil) },
			logits: func() ([]float32, error) { return lc.Logits(-1, nVocab) },
		}
	default:
		return res, fmt.Errorf("bench: a decode child of %q", c.Impl)
	}
	prompt := decodePrompt(c.PP, nVocab)
	var pp, tg time.Duration
	var lg []float32
	for range 2 { // the first warms up
		var err error
		if pp, lg, err = timeDecode(side, prompt); err != nil {
			return res, err
		}
		if tg, _, err = timeTG(side, c.TG, nVocab); err != nil {
			return res, err
		}
	}
	h := fnv.New64a()
	var b [4]byte
	for _, v := range lg {
		bits := math.Float32bits(v)
		b[0], b[1], b[2], b[3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
		h.Write(b[:])
	}
	res.PPS, res.TGS, res.Logits = pp.Seconds(), tg.Seconds(), h.Sum64()
	return res, nil
}

// decodePrompt is the measured prompt: n tokens spread over the
// vocabulary.
func decodePrompt(n, nVocab int) []int32 {
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32((i*7919 + 13) % nVocab)
	}
	return prompt
}

// decodeChildRun runs c's process and reads its result.
func (o DecodeOptions) decodeChildRun(ctx context.Context, c DecodeChild) (DecodeResult, error) {
	cmd, err := o.Command(ctx, c)
	if err != nil {
		return DecodeResult{}, err
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var res DecodeResult
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		if err == nil {
			err = jerr
		}
		return res, fmt.Errorf("%s decode child: %v %s", c.Impl, err, lastLine(strings.TrimSpace(errb.String())))
	}
	if res.Err != "" {
		return res, errors.New(res.Err)
	}
	return res, nil
}

// decodeProcesses is a target's measurement with each side in processes
// of its own, alternating run by run: the medians, and each side's peak
// resident memory (the median of its runs).
func (o DecodeOptions) decodeProcesses(ctx context.Context, path, target string) (DecodeRow, error) {
	row := DecodeRow{Target: target, LogitsIdentical: true, Runs: o.Runs, ThreadsPerDecode: o.Threads, Processes: true}
	var pp, tg, rss [2][]float64
	for range o.Runs {
		var hash [2]uint64
		for k, impl := range []string{ImplGgload, ImplLlama} {
			r, err := o.decodeChildRun(ctx, DecodeChild{Impl: impl, Target: target, Layers: o.Layers, PP: o.PP, TG: o.TG, Threads: o.Threads, Model: path})
			if err != nil {
				return row, fmt.Errorf("%s: %w", impl, err)
			}
			pp[k], tg[k], rss[k] = append(pp[k], r.PPS), append(tg[k], r.TGS), append(rss[k], float64(r.PeakRSS))
			hash[k] = r.Logits
		}
		if hash[0] != hash[1] {
			row.LogitsIdentical = false
			row.FirstDifference = "the prompt's last logits differ (their hashes)"
		}
	}
	pa, pb, ta, tb := median(pp[0]), median(pp[1]), median(tg[0]), median(tg[1])
	row.GgloadPP, row.LlamaPP = float64(o.PP)/pa, float64(o.PP)/pb
	row.GgloadTG, row.LlamaTG = float64(o.TG)/ta, float64(o.TG)/tb
	row.RatioPP, row.RatioTG = pa/pb, ta/tb
	row.GgloadRSS, row.LlamaRSS = uint64(median(rss[0])), uint64(median(rss[1]))
	return row, nil
}

// errNoDecodeCommand: --processes without the command of a child.
var errNoDecodeCommand = errors.New("bench: --decode --processes needs the command of a decode child")
