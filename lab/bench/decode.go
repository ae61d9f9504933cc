package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// DecodeOptions are bench --decode's: llama-bench's two measurements, a
// prompt of PP tokens in one decode (ppN) and TG single-token steps after
// a one-token prompt (tgN), on ggload's context and on libllama's, the
// same model, options and threads, in one process, alternating run by
// run.
type DecodeOptions struct {
	Targets []string // device names per target ("none": the CPU)
	Layers  place.Layers
	PP, TG  int
	Runs    int
	Threads int
	JSON    bool
	// Processes runs each side in processes of its own, run after run,
	// and compares their peak resident memory too; Command starts one
	// (ggload-bench runs its own executable with a hidden command that calls
	// RunDecodeChild).
	Processes bool
	Command   func(ctx context.Context, c DecodeChild) (*exec.Cmd, error)
}

// DecodeRow is one target's figures: the medians of the runs.
type DecodeRow struct {
	Target           string  `json:"target"`
	GgloadPP         float64 `json:"ggload_pp_tokens_per_s"`
	LlamaPP          float64 `json:"llama_pp_tokens_per_s"`
	GgloadTG         float64 `json:"ggload_tg_tokens_per_s"`
	LlamaTG          float64 `json:"llama_tg_tokens_per_s"`
	RatioPP          float64 `json:"pp_time_ratio"` // ggload's time per token over llama.cpp's
	RatioTG          float64 `json:"tg_time_ratio"`
	BuildPerTokenMS  float64 `json:"graph_build_ms_per_token"` // ggload's, in tg
	GraphsBuiltTG    int     `json:"graphs_built_tg"`
	GraphsReusedTG   int     `json:"graphs_reused_tg"`
	GraphsKeptPP     int     `json:"graphs_kept_pp"` // prompts whose graph was kept from before the steps, not built
	GraphsBuiltPP    int     `json:"graphs_built_pp"`
	LogitsIdentical  bool    `json:"logits_identical"`
	FirstDifference  string  `json:"first_difference,omitempty"`
	Runs             int     `json:"runs"`
	ThreadsPerDecode int     `json:"threads"`
	// Processes: each side ran in processes of its own; their peak
	// resident memory (VmHWM), medians of the runs.
	Processes bool   `json:"processes,omitempty"`
	GgloadRSS uint64 `json:"ggload_peak_rss,omitempty"`
	LlamaRSS  uint64 `json:"llama_peak_rss,omitempty"`
}

// RunDecode measures each target.
func RunDecode(ctx context.Context, rt *ggml.Runtime, path string, o DecodeOptions, w io.Writer) error {
	if o.PP <= 0 || o.TG <= 0 || o.Runs <= 0 || o.Threads <= 0 {
		return fmt.Errorf("bench: --decode: pp %d, tg %d, runs %d, threads %d", o.PP, o.TG, o.Runs, o.Threads)
	}
	l, err := llama.Open(rt)
	if err != nil {
		return fmt.Errorf("bench: --decode compares with libllama: %w", err)
	}
	if o.Processes && o.Command == nil {
		return errNoDecodeCommand
	}
	var rows []DecodeRow
	for _, target := range o.Targets {
		var row DecodeRow
		if o.Processes {
			row, err = o.decodeProcesses(ctx, path, target)
		} else {
			row, err = o.decodeTarget(ctx, rt, l, path, target)
		}
		if err != nil {
			return fmt.Errorf("bench: %s: %w", target, err)
		}
		rows = append(rows, row)
		if !o.JSON && o.Processes {
			fmt.Fprintf(w, "%-10s pp%d: ggload %8.1f t/s, llama.cpp %8.1f t/s, time ratio %.3f | tg%d: ggload %7.1f t/s, llama.cpp %7.1f t/s, time ratio %.3f | peak RSS: ggload %.1f MiB, llama.cpp %.1f MiB (%.3f×) | logits identical: %v\n",
				row.Target, o.PP, row.GgloadPP, row.LlamaPP, row.RatioPP, o.TG, row.GgloadTG, row.LlamaTG, row.RatioTG,
				float64(row.GgloadRSS)/(1<<20), float64(row.LlamaRSS)/(1<<20), float64(row.GgloadRSS)/float64(max(row.LlamaRSS, 1)), row.LogitsIdentical)
			continue
		}
		if !o.JSON {
			fmt.Fprintf(w, "%-10s pp%d: ggload %8.1f t/s, llama.cpp %8.1f t/s, time ratio %.3f | tg%d: ggload %7.1f t/s, llama.cpp %7.1f t/s, time ratio %.3f | graph build %.3f ms/token (%d built, %d reused) | prompt graphs: %d built, %d kept | logits identical: %v\n",
				row.Target, o.PP, row.GgloadPP, row.LlamaPP, row.RatioPP, o.TG, row.GgloadTG, row.LlamaTG, row.RatioTG,
				row.BuildPerTokenMS, row.GraphsBuiltTG, row.GraphsReusedTG, row.GraphsBuiltPP, row.GraphsKeptPP, row.LogitsIdentical)
		}
	}
	if o.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	return nil
}

// decodeSide is one implementation under measurement: a fresh sequence,
// a decode, the last output's logits.
type decodeSide struct {
	clear  func() error
	decode func(tokens []int32) error
	logits func() ([]float32, error)
}

func (o DecodeOptions) decodeTarget(ctx context.Context, rt *ggml.Runtime, l *llama.Lib, path, target string) (DecodeRow, error) {
	params := decodeParams(target, o.Layers, o.PP)
	m, err := gguf.OpenModel(path)
	if err != nil {
		return DecodeRow{}, err
	}
	defer m.Close()
	plan, err := place.New(ctx, rt, m, params)
	if err != nil {
		return DecodeRow{}, err
	}
	mdl, err := loader.Load(ctx, plan, loader.Options{})
	if err != nil {
		return DecodeRow{}, err
	}
	defer mdl.Close()
	ic, err := infer.New(mdl, infer.Params{Threads: o.Threads})
	if err != nil {
		return DecodeRow{}, err
	}
	defer ic.Close()
	lm, lc, err := l.OpenContext(rt, path, params, o.Threads)
	if err != nil {
		return DecodeRow{}, err
	}
	defer lm.Free()
	defer lc.Free()
	nVocab, err := lm.NVocab()
	if err != nil {
		return DecodeRow{}, err
	}
	ours := decodeSide{
		clear:  func() error { return ic.SeqRm(-1, -1, -1) },
		decode: func(t []int32) error { return ic.Decode(infer.Batch{Tokens: t}) },
		logits: func() ([]float32, error) { return ic.Logits(-1) },
	}
	theirs := decodeSide{
		clear:  func() error { return lc.SeqRm(-1, -1, -1) },
		decode: func(t []int32) error { return lc.Decode(t, nil, nil, nil) },
		logits: func() ([]float32, error) { return lc.Logits(-1, nVocab) },
	}
	prompt := decodePrompt(o.PP, nVocab)
	row := DecodeRow{Target: target, LogitsIdentical: true, Runs: o.Runs, ThreadsPerDecode: o.Threads}
	var ppA, ppB, tgA, tgB []float64
	var build time.Duration
	for r := 0; r < o.Runs+1; r++ { // the first run warms both up
		start := ic.Timings()
		a, la, err := timeDecode(ours, prompt)
		if err != nil {
			return row, fmt.Errorf("ggload: %w", err)
		}
		before := ic.Timings()
		if r > 0 {
			row.GraphsBuiltPP += before.Graphs - start.Graphs
			row.GraphsKeptPP += before.Kept - start.Kept
		}
		tgOurs, _, err := timeTG(ours, o.TG, nVocab)
		if err != nil {
			return row, fmt.Errorf("ggload: %w", err)
		}
		after := ic.Timings()
		b, lb, err := timeDecode(theirs, prompt)
		if err != nil {
			return row, fmt.Errorf("llama.cpp: %w", err)
		}
		tgTheirs, _, err := timeTG(theirs, o.TG, nVocab)
		if err != nil {
			return row, fmt.Errorf("llama.cpp: %w", err)
		}
		if row.LogitsIdentical {
			for i := range la {
				if i >= len(lb) || la[i] != lb[i] {
					row.LogitsIdentical = false
					row.FirstDifference = fmt.Sprintf("pp logit %d: ggload %v, llama.cpp %v", i, la[i], lb[i])
					break
				}
			}
		}
		if r == 0 {
			continue
		}
		ppA, ppB = append(ppA, a.Seconds()), append(ppB, b.Seconds())
		tgA, tgB = append(tgA, tgOurs.Seconds()), append(tgB, tgTheirs.Seconds())
		build += after.Build - before.Build
		row.GraphsBuiltTG += after.Graphs - before.Graphs
		row.GraphsReusedTG += after.Reused - before.Reused
	}
	pa, pb, ta, tb := median(ppA), median(ppB), median(tgA), median(tgB)
	row.GgloadPP, row.LlamaPP = float64(o.PP)/pa, float64(o.PP)/pb
	row.GgloadTG, row.LlamaTG = float64(o.TG)/ta, float64(o.TG)/tb
	row.RatioPP, row.RatioTG = pa/pb, ta/tb
	row.BuildPerTokenMS = build.Seconds() * 1000 / float64(o.Runs*o.TG)
	return row, nil
}

// timeDecode times the prompt on an empty memory and returns its last
// logits.
func timeDecode(s decodeSide, prompt []int32) (time.Duration, []float32, error) {
	if err := s.clear(); err != nil {
		return 0, nil, err
	}
	// (until the logits are out: libllama's decode returns while its
	// backends may still compute)
	t0 := time.Now()
	if err := s.decode(prompt); err != nil {
		return 0, nil, err
	}
	lg, err := s.logits()
	return time.Since(t0), lg, err
}

// timeTG is llama-bench's tg: n steps of one token after a one-token
// prompt (not timed), on an empty memory, each step's logits read.
func timeTG(s decodeSide, n, nVocab int) (time.Duration, []float32, error) {
	if err := s.clear(); err != nil {
		return 0, nil, err
	}
	if err := s.decode([]int32{1}); err != nil {
		return 0, nil, err
	}
	t0 := time.Now()
	var lg []float32
	for i := range n {
		if err := s.decode([]int32{int32((i*31 + 7) % nVocab)}); err != nil {
			return 0, nil, err
		}
		// a generation reads each step's logits
		var err error
		if lg, err = s.logits(); err != nil {
			return 0, nil, err
		}
	}
	return time.Since(t0), lg, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
