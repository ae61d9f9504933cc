package tests

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/synthmodel"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// The compute buffers of a context, planned by replaying the pin's graph
// builders and sched_reserve over the plan's backends, are libllama's
// own: per buffer type, byte for byte, with the same scheduler lines
// (fused ops resolved, compute buffer sizes, the graphs' nodes, splits
// and inputs). The demo llama on the CPU, on Vulkan (whole, partial,
// -nkvo, several sequences) and split over an RPC server and Vulkan.
//
//	go test -run TestComputeBufferMatchesLlamaCpp -v ./tests
func TestComputeBufferMatchesLlamaCpp(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	path, err := synthmodel.DemoModel(rt)
	if err != nil {
		t.Fatal(err)
	}
	vk := testenv.Vulkan(t).Name()
	cases := []struct {
		name string
		rpc  bool
		p    place.Params
	}{
		{"cpu", false, place.Params{DeviceNames: []string{"none"}}},
		{"cpu fa off", false, place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{FlashAttn: place.FlashAttnOff}}},
		{"cpu -c 2048 -ub 256 fa off", false, place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: 2048, NUBatch: 256, FlashAttn: place.FlashAttnOff}}},
		{"vulkan", false, place.Params{DeviceNames: []string{vk}}},
		{"vulkan -ngl 4", false, place.Params{DeviceNames: []string{vk}, NGPULayers: place.NLayers(4)}},
		{"vulkan -ngl 4 -nkvo", false, place.Params{DeviceNames: []string{vk}, NGPULayers: place.NLayers(4), Context: place.ContextParams{NoKVOffload: true}}},
		// the attention output pinned to the CPU by the graph itself
		{"vulkan -ngl 2 -nkvo fa off", false, place.Params{DeviceNames: []string{vk}, NGPULayers: place.NLayers(2), Context: place.ContextParams{NoKVOffload: true, FlashAttn: place.FlashAttnOff}}},
		{"vulkan -ngl 2 -np 2 fa off -ub 64", false, place.Params{DeviceNames: []string{vk}, NGPULayers: place.NLayers(2), Context: place.ContextParams{NParallel: 2, FlashAttn: place.FlashAttnOff, NUBatch: 64}}},
		{"vulkan -ot ffn=CPU", false, place.Params{DeviceNames: []string{vk}, Overrides: []place.Override{{Pattern: "ffn", BufferType: "CPU"}}}},
		{"rpc + vulkan", true, place.Params{DeviceNames: []string{"RPC0", vk}, TensorSplit: []float32{1, 1}}},
		{"rpc + vulkan -sm tensor", true, place.Params{DeviceNames: []string{"RPC0", vk}, TensorSplit: []float32{1, 1}, SplitMode: place.SplitTensor}},
		{"vulkan -sm tensor", false, place.Params{DeviceNames: []string{vk}, SplitMode: place.SplitTensor}},
	}
	var k int
	for _, c := range cases {
		if c.rpc {
			testenv.RPC(t, 1) // or skips, naming what to install
		}
		params := c.p
		params.LoadMode = place.LoadNone // as -fit loads: no_alloc
		ours, oursLines, err := computeOurs(rt, path, params)
		if err != nil {
			t.Errorf("%s: ggload: %v", c.name, err)
			continue
		}
		theirs, theirLines, err := computeTheirs(l, rt, path, params)
		if err != nil {
			t.Errorf("%s: libllama: %v", c.name, err)
			continue
		}
		t.Logf("%-34s ggload %v, libllama %v", c.name, ours, theirs)
		ok := true
		if fmt.Sprint(ours) != fmt.Sprint(theirs) || len(theirs) == 0 {
			t.Errorf("%s: compute buffers ggload %v, libllama %v", c.name, ours, theirs)
			ok = false
		}
		if !slices.Equal(oursLines, theirLines) {
			t.Errorf("%s: scheduler lines:\n ggload    %q\n llama.cpp %q", c.name, oursLines, theirLines)
			ok = false
		}
		if ok {
			k++
		}
	}
	t.Logf("%d/%d configurations' compute buffers and scheduler lines identical to libllama's", k, len(cases))
}

// schedLines are llama.cpp's lines of the scheduler's reservation.
func schedLines(text string) bool {
	for _, p := range []string{"sched_reserve: ", "resolve_fused_ops: ", "llama_context: pipeline parallelism"} {
		if strings.HasPrefix(text, p) && !strings.HasPrefix(text, "sched_reserve: reserving") && !strings.Contains(text, "reserve took") {
			return true
		}
	}
	return false
}

func computeOurs(rt *ggml.Runtime, path string, params place.Params) (map[string]uint64, []string, error) {
	m, err := gguf.OpenModel(path)
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	plan, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		return nil, nil, err
	}
	if plan.ContextErr != nil {
		return nil, nil, plan.ContextErr
	}
	if plan.Context == nil || !plan.Context.ComputeKnown {
		return nil, nil, fmt.Errorf("no compute planned")
	}
	out := map[string]uint64{}
	for _, e := range plan.Breakdown() {
		if e.Compute > 0 {
			out[rt.RPCName(e.BufferType.NativeName())] = e.Compute
		}
	}
	var lines []string
	for _, ln := range plan.Log {
		if ln.Level != "DEBUG" && schedLines(ln.Text) {
			lines = append(lines, ln.Text)
		}
	}
	return out, lines, nil
}

func computeTheirs(l *llama.Lib, rt *ggml.Runtime, path string, params place.Params) (map[string]uint64, []string, error) {
	ctx, lines, free, err := theirContext(l, rt, path, params)
	if err != nil {
		return nil, nil, err
	}
	defer free()
	lib := testenv.Lib(rt)
	out := map[string]uint64{}
	for _, e := range ctx.MemoryBreakdown() {
		if e.Compute > 0 {
			out[rt.RPCName(lib.BuftName(e.BufferType))] += e.Compute
		}
	}
	var sl []string
	for _, ln := range lines {
		text := strings.TrimRight(ln.Text, "\n")
		if ln.Level >= 2 && schedLines(text) {
			sl = append(sl, text)
		}
	}
	return out, sl, nil
}

// The memory breakdown table ggload prints is the one llama.cpp's
// common_memory_breakdown_print prints (libllama-common's own, called on
// the same context): the same rows, devices, and per row the same total,
// self, model, context and compute MiB. Free is llama.cpp's as the device
// reports it; ggload's is what stays free once the plan's buffers are
// allocated, which a no_alloc context never does: it is compared as that
// (free - self, within the MiB each side rounds down), and unaccounted
// follows from it. The demo llama on the CPU, Vulkan and an RPC server, and
// a 907 MB llama with -c 4096 on Vulkan (ggload plan's table).
//
//	go test -run TestBreakdownTableMatchesLlamaCpp -v ./tests
func TestBreakdownTableMatchesLlamaCpp(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	if err := l.HaveCommon(); err != nil {
		testenv.Missing(t, "llama", "%v", err)
	}
	path, err := synthmodel.DemoModel(rt)
	if err != nil {
		t.Fatal(err)
	}
	vk := testenv.Vulkan(t).Name()
	// a llama model of 907 MB (q8_0), written here
	big := synth.BenchSpec(907e6, ggml.TypeQ8_0)
	cases := []struct {
		name string
		rpc  bool
		p    place.Params
		spec *synth.Spec
	}{
		{"cpu", false, place.Params{DeviceNames: []string{"none"}}, nil},
		{"vulkan -c 4096", false, place.Params{DeviceNames: []string{vk}, Context: place.ContextParams{NCtx: 4096}}, nil},
		{"vulkan -ngl 4 -ot ffn_up=CPU", false, place.Params{DeviceNames: []string{vk}, NGPULayers: place.NLayers(4), Overrides: []place.Override{{Pattern: "ffn_up", BufferType: "CPU"}}}, nil},
		{"rpc + vulkan", true, place.Params{DeviceNames: []string{"RPC0", vk}, TensorSplit: []float32{1, 1}}, nil},
		{"907 MB llama, vulkan -c 4096", false, place.Params{DeviceNames: []string{vk}, Context: place.ContextParams{NCtx: 4096}}, &big},
	}
	// a row: its name, and its numbers (total, free, self, model, context,
	// compute, unaccounted for a device; self, model, context, compute
	// otherwise)
	rowOf := func(line string) (string, []int64) {
		cols := strings.Split(strings.TrimPrefix(line, "common_memory_breakdown_print: "), "|")
		if len(cols) < 3 {
			return line, nil
		}
		var nums []int64
		for _, f := range strings.FieldsFunc(cols[2], func(r rune) bool { return strings.ContainsRune(" =+()", r) }) {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return strings.TrimSpace(cols[1]) + " " + f, nil // the header
			}
			nums = append(nums, n)
		}
		return strings.TrimSpace(cols[1]), nums
	}
	same := func(ours, theirs []string) bool {
		ok := len(ours) == len(theirs)
		for i := 0; ok && i < len(ours); i++ {
			on, onums := rowOf(ours[i])
			tn, tnums := rowOf(theirs[i])
			switch {
			case on != tn || len(onums) != len(tnums):
				ok = false
			case len(onums) == 7:
				// total, self, model, context, compute equal; free once
				// allocated within the two roundings of llama.cpp's
				d := tnums[1] - tnums[2] - onums[1]
				ok = onums[0] == tnums[0] && slices.Equal(onums[2:6], tnums[2:6]) && d >= -1 && d <= 1
			default:
				ok = slices.Equal(onums, tnums)
			}
		}
		return ok
	}
	var k int
	var tables [][2][]string
	for _, c := range cases {
		if c.rpc {
			testenv.RPC(t, 1) // or skips, naming what to install
		}
		params := c.p
		params.LoadMode = place.LoadNone
		path := path
		if c.spec != nil {
			path = testenv.ModelFile(t, rt, *c.spec)
		}
		m, err := gguf.OpenModel(path)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := place.New(context.Background(), rt, m, params)
		if err != nil {
			m.Close()
			t.Fatalf("%s: %v", c.name, err)
		}
		var b strings.Builder
		plan.WriteBreakdown(&b)
		m.Close()
		ours := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
		theirs, err := breakdownTableTheirs(l, rt, path, params)
		if err != nil {
			t.Errorf("%s: libllama: %v", c.name, err)
			continue
		}
		for i := range theirs {
			// libllama in this process reaches an RPC server through
			// ggload's guard: its description names the server as a
			// llama.cpp of its own would
			theirs[i] = rt.RPCName(theirs[i])
		}
		ok := same(ours, theirs)
		tables = append(tables, [2][]string{ours, theirs})
		t.Logf("%s:\n  ggload    %s\n  llama.cpp %s", c.name, strings.Join(ours, "\n            "), strings.Join(theirs, "\n            "))
		if !ok {
			t.Errorf("%s: the tables differ", c.name)
			continue
		}
		k++
	}
	t.Logf("%d/%d memory breakdown tables as llama.cpp's", k, len(cases))
	// a negative control: one configuration's table is not another's
	if len(tables) >= 3 && same(tables[1][0], tables[2][1]) {
		t.Errorf("the comparison finds no difference between the tables of %s and %s", cases[1].name, cases[2].name)
	}
}

func breakdownTableTheirs(l *llama.Lib, rt *ggml.Runtime, path string, params place.Params) ([]string, error) {
	ctx, _, free, err := theirContext(l, rt, path, params)
	if err != nil {
		return nil, err
	}
	defer free()
	return ctx.BreakdownTable()
}

// theirContext is libllama's context of the model, made as -fit makes it
// (a no_alloc model), with its log lines; free frees both.
func theirContext(l *llama.Lib, rt *ggml.Runtime, path string, params place.Params) (*llama.Context, []llama.LogLine, func(), error) {
	ld, err := llama.LoadFor(rt, path, params)
	if err != nil {
		return nil, nil, nil, err
	}
	ld.NoAlloc = true
	lm, _, err := l.LoadModel(ld)
	if err != nil {
		return nil, nil, nil, err
	}
	cp, err := l.ContextParamsFor(params.Context)
	if err != nil {
		lm.Free()
		return nil, nil, nil, err
	}
	ctx, lines, err := lm.NewContext(cp)
	if err != nil {
		lm.Free()
		return nil, nil, nil, err
	}
	return ctx, lines, func() { ctx.Free(); lm.Free() }, nil
}
