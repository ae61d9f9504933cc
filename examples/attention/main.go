// Command attention computes with loaded weights: it loads the demo model
// (or -model) onto each device, computes the first layer's attention
// projections Q, K and V for a few tokens where the weights live, and checks
// every result against the same computation on the CPU.
//
//	go run ./examples/attention [-devices Vulkan0,RPC0] [-rpc host:port] [-tokens 1,17,42,99]
//
// The graph is the start of a llama layer: the tokens' embeddings
// (get_rows), RMS norm, the norm's weight, then the three projections.
// A ggml scheduler runs each op on the device that holds its weights and
// moves the activations between devices.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/synthmodel"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "attention:", err)
		os.Exit(1)
	}
}

// projections are the results for one device.
type projections struct {
	Device string
	Ran    string // the backend that ran the Q projection
	Out    map[string][]float32
}

var outputs = []string{"Q", "K", "V"}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("attention", flag.ContinueOnError)
	model := fs.String("model", "", "GGUF model (default: the demo model in the user cache directory)")
	devices := fs.String("devices", "", "devices to compute on, comma-separated (default: every GPU, iGPU and RPC device)")
	rpc := fs.String("rpc", "", "ggml-rpc-server endpoints to add as devices")
	tokenList := fs.String("tokens", "1,17,42,99", "token ids")
	tol := fs.Float64("tol", 0.02, "largest accepted difference from the CPU, relative to the CPU result's largest magnitude")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var tokens []int32
	for _, s := range strings.Split(*tokenList, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return fmt.Errorf("-tokens: %q is not a token id", s)
		}
		tokens = append(tokens, int32(v))
	}
	var eps []string
	if *rpc != "" {
		eps = strings.Split(*rpc, ",")
	}
	rt, err := ggml.Open(context.Background(), ggml.Options{RPC: eps})
	if err != nil {
		return err
	}
	path := *model
	if path == "" {
		if path, err = synthmodel.DemoModel(rt); err != nil {
			return err
		}
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		return err
	}
	defer m.Close()
	var targets []string
	if *devices != "" {
		targets = strings.Split(*devices, ",")
	} else {
		for _, d := range rt.Devices() {
			if d.Type() == ggml.DeviceGPU || d.Type() == ggml.DeviceIGPU {
				targets = append(targets, d.Name())
			}
		}
	}
	ref, err := project(rt, m, "none", tokens)
	if err != nil {
		return fmt.Errorf("CPU: %w", err)
	}
	fmt.Fprintf(w, "%s: layer 0 Q, K, V for tokens %v\n", path, tokens)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "device\tran on\tQ diff\tK diff\tV diff\tresult")
	fmt.Fprintf(tw, "CPU\t%s\t\t\t\treference\n", ref.Ran)
	var bad []string
	for _, target := range targets {
		res, err := project(rt, m, target, tokens)
		if err != nil {
			tw.Flush()
			return fmt.Errorf("%s: %w", target, err)
		}
		diffs, ok := compare(ref, res, *tol)
		verdict := "ok"
		if !ok {
			verdict = "MISMATCH"
			bad = append(bad, target)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2g\t%.2g\t%.2g\t%s\n", target, res.Ran, diffs[0], diffs[1], diffs[2], verdict)
	}
	tw.Flush()
	if len(bad) > 0 {
		return fmt.Errorf("results differ from the CPU's on %s", strings.Join(bad, ", "))
	}
	return nil
}

// compare gives, per projection, the largest difference relative to the
// reference's largest magnitude, and whether all are within tol.
func compare(ref, got projections, tol float64) ([3]float64, bool) {
	var out [3]float64
	ok := true
	for i, name := range outputs {
		a, b := ref.Out[name], got.Out[name]
		if len(a) != len(b) {
			out[i] = math.Inf(1)
			ok = false
			continue
		}
		var peak, diff float64
		for j := range a {
			peak = max(peak, math.Abs(float64(a[j])))
			diff = max(diff, math.Abs(float64(a[j]-b[j])))
		}
		if peak > 0 {
			diff /= peak
		}
		out[i] = diff
		if !(diff <= tol) || peak == 0 {
			ok = false
		}
	}
	return out, ok
}

// project loads the model with its layers on target ("none": the CPU) and
// computes the projections there.
func project(rt *ggml.Runtime, m *gguf.Model, target string, tokens []int32) (projections, error) {
	res := projections{Device: target, Out: map[string][]float32{}}
	params := place.Params{}
	params.DeviceNames = []string{target}
	p, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		return res, err
	}
	lm, err := loader.Load(context.Background(), p, loader.Options{})
	if err != nil {
		return res, err
	}
	defer lm.Close()
	eps, err := rmsEpsilon(m)
	if err != nil {
		return res, err
	}
	ws, err := layerWeights(lm, tokens)
	if err != nil {
		return res, err
	}

	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 16, Graphs: 1, NoAlloc: true})
	if err != nil {
		return res, err
	}
	defer ctx.Free()
	pg, err := buildProjections(ctx, ws, eps, len(tokens))
	if err != nil {
		return res, err
	}

	cpu, err := rt.CPUDevice().NewBackend()
	if err != nil {
		return res, err
	}
	defer cpu.Free()
	backends := []*ggml.Backend{cpu}
	if target != "none" {
		be, err := targetBackend(rt, lm, target)
		if err != nil {
			return res, err
		}
		defer be.Free()
		backends = []*ggml.Backend{be, cpu}
	}
	if err := pg.compute(rt, backends, tokens, &res); err != nil {
		return res, err
	}
	if target != "none" && res.Ran != backends[0].Name() {
		return res, errors.New("the projections did not run on the device holding the weights (ran on " + res.Ran + ")")
	}
	return res, nil
}

// rmsEpsilon is the epsilon of the model's RMS norm, 1e-5 where the model
// has none.
func rmsEpsilon(m *gguf.Model) (float32, error) {
	arch, err := m.String("general.architecture")
	if err != nil {
		return 0, err
	}
	eps := float32(1e-5)
	if v, err := m.Float(arch + ".attention.layer_norm_rms_epsilon"); err == nil {
		eps = float32(v)
	}
	return eps, nil
}

// layerWeights are the weights the projections take, in this order: the
// token embeddings, layer 0's attention norm, Q, K and V. It checks the
// tokens are in the embeddings' vocabulary.
func layerWeights(lm *loader.Model, tokens []int32) ([]*ggml.Tensor, error) {
	names := []string{"token_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}
	ws := make([]*ggml.Tensor, len(names))
	for i, n := range names {
		t, ok := lm.Tensor(n)
		if !ok {
			return nil, fmt.Errorf("the model has no %s", n)
		}
		ws[i] = t
	}
	vocab := ws[0].Shape()[1]
	for _, tok := range tokens {
		if tok < 0 || int64(tok) >= vocab {
			return nil, fmt.Errorf("token %d outside the vocabulary of %d", tok, vocab)
		}
	}
	return ws, nil
}

// projGraph is the graph of the projections: the token ids it takes and
// Q, K and V, its outputs.
type projGraph struct {
	g    *ggml.Graph
	ids  *ggml.Tensor
	outs []*ggml.Tensor
}

// buildProjections builds in ctx the graph of the projections of n tokens
// with the weights ws (as layerWeights gives them) and RMS norm epsilon eps.
func buildProjections(ctx *ggml.Context, ws []*ggml.Tensor, eps float32, n int) (projGraph, error) {
	var pg projGraph
	ids, err := ctx.NewTensor(ggml.TypeI32, int64(n))
	if err != nil {
		return pg, err
	}
	ids.SetInput()
	pg.ids = ids
	x, err := ctx.GetRows(ws[0], ids)
	if err != nil {
		return pg, err
	}
	if x, err = ctx.RMSNorm(x, eps); err != nil {
		return pg, err
	}
	if x, err = ctx.Mul(x, ws[1]); err != nil {
		return pg, err
	}
	if pg.g, err = ctx.NewGraph(0); err != nil {
		return pg, err
	}
	pg.outs = make([]*ggml.Tensor, 3)
	for i := range pg.outs {
		if pg.outs[i], err = ctx.MulMat(ws[2+i], x); err != nil {
			return pg, err
		}
		pg.outs[i].SetOutput()
		if err := pg.g.Expand(pg.outs[i]); err != nil {
			return pg, err
		}
	}
	return pg, nil
}

// targetBackend is a backend of the device named target, which must hold
// layer 0 of lm.
func targetBackend(rt *ggml.Runtime, lm *loader.Model, target string) (*ggml.Backend, error) {
	d, err := rt.DeviceByName(target)
	if err != nil {
		return nil, err
	}
	if lm.Plan.LayerDevices[0] != d {
		return nil, fmt.Errorf("layer 0 was placed on %s, not %s", lm.Plan.LayerDevices[0].Name(), target)
	}
	return d.NewBackend()
}

// compute runs the graph for tokens on a scheduler of backends and records
// in res Q, K and V and the backend that ran Q.
func (pg projGraph) compute(rt *ggml.Runtime, backends []*ggml.Backend, tokens []int32, res *projections) error {
	s, err := rt.NewScheduler(backends, ggml.SchedulerOptions{})
	if err != nil {
		return err
	}
	defer s.Free()
	if err := s.Alloc(pg.g); err != nil {
		return err
	}
	if err := pg.ids.SetInts(tokens); err != nil {
		return err
	}
	if err := s.Compute(pg.g); err != nil {
		return err
	}
	if b := s.Backend(pg.outs[0]); b != nil {
		res.Ran = b.Name()
	}
	for i, name := range outputs {
		v, err := pg.outs[i].Floats()
		if err != nil {
			return err
		}
		res.Out[name] = v
	}
	return nil
}
