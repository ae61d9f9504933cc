package tests

import (
	"fmt"
	"os"
	"testing"

	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// DeepSeek-V4's memory (llama_kv_cache_dsv4: a raw sliding-window cache,
// compressed caches and their compressors' states) against libllama: a
// prompt longer than a ubatch, than the window and than an HCA block (128
// positions), steps across the CSA blocks' boundaries (4 positions), with
// flash attention off and a quantized cache, two sequences in streams of
// their own, removed, copied and kept, and the removals llama.cpp refuses;
// every output's logits bit for bit libllama's, every sequence's last
// position too, the steps of a generation reusing their graph.
//
//	go test -run TestDecodeDSV4 -v ./tests
func TestDecodeDSV4(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	path := filledArchs(t, rt, "deepseek4")["deepseek4"]
	nEmbd, err := testenv.OpenModel(t, path).Uint("deepseek4.embedding_length")
	if err != nil {
		t.Fatal(err)
	}
	gpu := testenv.Vulkan(t).Name()
	cpu := func(c place.ContextParams) place.Params {
		return place.Params{DeviceNames: []string{"none"}, Context: c}
	}
	for _, c := range []struct {
		name   string
		params place.Params
		run    func(p *dsv4Pair)
	}{
		{"cpu-ub32", cpu(place.ContextParams{NCtx: 512, NUBatch: 32}), func(p *dsv4Pair) {
			p.prompt("prompt", 0, 150)
			for k := range 7 {
				p.step(fmt.Sprintf("step %d", k), 0)
			}
			// over an emptied memory, a short prompt and steps again
			p.clear()
			p.prompt("second prompt", 0, 5)
			for k := range 4 {
				p.step(fmt.Sprintf("second step %d", k), 0)
			}
			if tm := p.ours.Timings(); tm.Reused == 0 && os.Getenv("LLAMA_GRAPH_REUSE_DISABLE") == "" {
				p.t.Errorf("no step reused its graph (%+v)", tm)
			}
		}},
		{"cpu-fa-off", cpu(place.ContextParams{NCtx: 256, NUBatch: 16, FlashAttn: place.FlashAttnOff}), func(p *dsv4Pair) {
			p.prompt("prompt", 0, 41)
			for k := range 6 {
				p.step(fmt.Sprintf("step %d", k), 0)
			}
		}},
		// (a quantized V cache takes flash attention)
		{"cpu-q8_0", cpu(place.ContextParams{NCtx: 256, NUBatch: 16, FlashAttn: place.FlashAttnOn, TypeK: place.CacheQ8_0, TypeV: place.CacheQ8_0}), func(p *dsv4Pair) {
			p.prompt("prompt", 0, 41)
			for k := range 6 {
				p.step(fmt.Sprintf("step %d", k), 0)
			}
		}},
		{"cpu-np2", cpu(place.ContextParams{NCtx: 512, NUBatch: 16, NParallel: 2}), func(p *dsv4Pair) {
			p.decode("prompts", [][2]int{{0, 20}, {1, 37}})
			for k := range 4 {
				p.decode(fmt.Sprintf("step %d", k), [][2]int{{0, 1}, {1, 1}})
			}
			p.seqRm("sequence 0 whole", 0, -1, -1, true)
			p.step("sequence 1 alone", 1)
			p.seqCp("sequence 1 copied to 0", 1, 0)
			for k := range 3 {
				p.decode(fmt.Sprintf("both again %d", k), [][2]int{{0, 1}, {1, 1}})
			}
			p.seqRm("a closed range", 1, 3, 5, false)
			p.seqRm("past the end", 1, p.ours.SeqPosMax(1)+1, -1, true)
			p.seqRm("a rollback without snapshots", 1, p.ours.SeqPosMax(1)-1, -1, false)
			p.seqKeep("sequence 1 kept", 1)
			p.step("sequence 1 on", 1)
			p.prompt("sequence 0 anew", 0, 9)
			p.decode("both on", [][2]int{{0, 1}, {1, 1}})
			// the memory cannot shift: a move of no cell goes on as
			// llama.cpp's does, one of cells is refused (llama.cpp's next
			// decode would end the process)
			p.move("a move past the end", 1, p.ours.SeqPosMax(1)+1, 2, true)
			p.move("a move of every position", 1, 0, 2, false)
			p.decode("both on after the moves", [][2]int{{0, 1}, {1, 1}})
		}},
		// -kvu: the memory keeps a stream per sequence all the same
		{"cpu-np2-kvu", cpu(place.ContextParams{NCtx: 512, NUBatch: 16, NParallel: 2, KVUnified: true}), func(p *dsv4Pair) {
			p.decode("prompts", [][2]int{{0, 11}, {1, 26}})
			for k := range 3 {
				p.decode(fmt.Sprintf("step %d", k), [][2]int{{0, 1}, {1, 1}})
			}
			p.seqCp("sequence 0 copied to 1", 0, 1)
			p.decode("both on", [][2]int{{0, 1}, {1, 1}})
		}},
		// one sequence with rollback snapshots: its batches split simply,
		// its draft taken back, twice refused
		{"cpu-rollback", cpu(place.ContextParams{NCtx: 256, NUBatch: 8, NRSSeq: 2}), func(p *dsv4Pair) {
			p.prompt("prompt", 0, 13)
			p.all = true
			p.prompt("draft", 0, 3)
			last := p.ours.SeqPosMax(0)
			p.seqRm("reject 2", 0, last-1, -1, true)
			p.seqRm("a second rollback", 0, last-2, -1, false)
			p.prompt("after the rollback", 0, 4)
			p.seqRm("past the snapshots", 0, p.ours.SeqPosMax(0)-2, -1, false)
			p.seqRm("reject 1", 0, p.ours.SeqPosMax(0), -1, true)
			p.prompt("a longer draft", 0, 11)
			p.seqRm("reject 2 again", 0, p.ours.SeqPosMax(0)-1, -1, true)
			p.all = false
			p.step("on", 0)
		}},
		// the memory full: the raw base cache has n_ctx cells, and a batch
		// past them finds no slot, on both sides
		{"cpu-full", cpu(place.ContextParams{NCtx: 256, NUBatch: 64}), func(p *dsv4Pair) {
			p.prompt("prompt", 0, 250)
			for k := range 6 {
				p.step(fmt.Sprintf("step %d", k), 0)
			}
			p.refused("past the cells", [][2]int{{0, 1}})
			p.seqRm("the last 100 positions", 0, 156, -1, false)
			p.seqRm("all", 0, 0, -1, true)
			p.prompt("anew", 0, 7)
		}},
		// input embeddings in place of tokens, then tokens after them
		{"cpu-embd-batch", cpu(place.ContextParams{NCtx: 256}), func(p *dsv4Pair) {
			p.embd("embeddings", 6)
			p.step("a token after them", 0)
			p.embd("more embeddings", 3)
		}},
		// on Vulkan0: two sequences with rollback snapshots, a sequence
		// copied into another's stream (the buffers' copies and clears of
		// a device's memory)
		{"vulkan-np2-rollback", place.Params{DeviceNames: []string{gpu}, Context: place.ContextParams{NCtx: 256, NUBatch: 8, NParallel: 2, NRSSeq: 2}}, func(p *dsv4Pair) {
			p.decode("prompts", [][2]int{{0, 9}, {1, 14}})
			p.all = true
			p.decode("drafts", [][2]int{{0, 3}, {1, 2}})
			p.seqRm("reject 2 of sequence 0", 0, p.ours.SeqPosMax(0)-1, -1, true)
			p.seqRm("reject 1 of sequence 1", 1, p.ours.SeqPosMax(1), -1, true)
			p.decode("after the rollbacks", [][2]int{{0, 2}, {1, 2}})
			p.all = false
			p.seqCp("sequence 0 copied to 1", 0, 1)
			p.decode("both on", [][2]int{{0, 1}, {1, 1}})
			p.seqKeep("sequence 1 kept", 1)
			p.step("sequence 1 on", 1)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ours, theirs, nVocab := bothContexts(t, rt, l, path, c.params)
			c.run(&dsv4Pair{t: t, ours: ours, theirs: theirs, nVocab: nVocab, nEmbd: int(nEmbd)})
		})
	}
}

// dsv4Pair is ggload's context and libllama's, driven alike.
type dsv4Pair struct {
	t      *testing.T
	ours   *infer.Context
	theirs *llama.Context
	nVocab int
	n      int  // tokens decoded so far, for the next tokens' values
	all    bool // every token of a batch an output
	nEmbd  int  // the input embeddings' width
}

// batch is, for each {sequence, count}, count tokens of the sequence
// after its last position, its last token an output (every token, with
// all).
func (p *dsv4Pair) batch(runs [][2]int) ([]int32, [][]int32, []bool) {
	var tokens []int32
	var seqs [][]int32
	var logits []bool
	for _, r := range runs {
		for i := range r[1] {
			p.n++
			tokens = append(tokens, int32((p.n*7919+13)%p.nVocab))
			seqs = append(seqs, []int32{int32(r[0])})
			logits = append(logits, p.all || i == r[1]-1)
		}
	}
	return tokens, seqs, logits
}

// decode decodes the batch of runs on both sides.
func (p *dsv4Pair) decode(what string, runs [][2]int) {
	p.t.Helper()
	tokens, seqs, logits := p.batch(runs)
	if err := p.ours.Decode(infer.Batch{Tokens: tokens, SeqIDs: seqs, Logits: logits}); err != nil {
		p.t.Fatalf("%s: ggload: %v", what, err)
	}
	if err := p.theirs.Decode(tokens, nil, seqs, logits); err != nil {
		p.t.Fatalf("%s: llama.cpp: %v", what, err)
	}
	sameLogits(p.t, what, p.ours, p.theirs, logits, p.nVocab)
	p.positions(what)
}

// refused decodes the batch of runs on both sides, which both refuse.
func (p *dsv4Pair) refused(what string, runs [][2]int) {
	p.t.Helper()
	tokens, seqs, logits := p.batch(runs)
	errO := p.ours.Decode(infer.Batch{Tokens: tokens, SeqIDs: seqs, Logits: logits})
	errT := p.theirs.Decode(tokens, nil, seqs, logits)
	if errO == nil || errT == nil {
		p.t.Fatalf("%s: ggload %v, llama.cpp %v (both refusing wanted)", what, errO, errT)
	}
	p.t.Logf("%s: refused by both: %v", what, errO)
	p.positions(what)
}

// embd decodes n input embeddings in sequence 0, the last an output.
func (p *dsv4Pair) embd(what string, n int) {
	p.t.Helper()
	width := int(p.nEmbd)
	rows := make([][]float32, n)
	for i := range rows {
		p.n++
		rows[i] = make([]float32, width)
		for j := range rows[i] {
			rows[i][j] = float32((p.n*131+j*17)%97-48) / 64
		}
	}
	logits := make([]bool, n)
	logits[n-1] = true
	if err := p.ours.Decode(infer.Batch{Embd: rows}); err != nil {
		p.t.Fatalf("%s: ggload: %v", what, err)
	}
	if err := p.theirs.DecodeEmbd(rows, nil, nil, nil); err != nil {
		p.t.Fatalf("%s: llama.cpp: %v", what, err)
	}
	sameLogits(p.t, what, p.ours, p.theirs, logits, p.nVocab)
	p.positions(what)
}

func (p *dsv4Pair) prompt(what string, seq, n int) { p.t.Helper(); p.decode(what, [][2]int{{seq, n}}) }
func (p *dsv4Pair) step(what string, seq int)      { p.t.Helper(); p.decode(what, [][2]int{{seq, 1}}) }

// positions checks each sequence's last position.
func (p *dsv4Pair) positions(what string) {
	p.t.Helper()
	for s := range int32(2) {
		if a, b := p.ours.SeqPosMax(s), p.theirs.SeqPosMax(s); a != b {
			p.t.Fatalf("%s: sequence %d ends at %d, llama.cpp's at %d", what, s, a, b)
		}
	}
}

// seqRm removes [p0, p1) of seq on both sides; ok: whether llama.cpp
// does.
func (p *dsv4Pair) seqRm(what string, seq, p0, p1 int32, ok bool) {
	p.t.Helper()
	errO, errT := p.ours.SeqRm(seq, p0, p1), p.theirs.SeqRm(seq, p0, p1)
	if (errO == nil) != (errT == nil) || (errO == nil) != ok {
		p.t.Fatalf("%s: seq_rm(%d, %d, %d): ggload %v, llama.cpp %v (success wanted: %v)", what, seq, p0, p1, errO, errT, ok)
	}
	p.positions(what)
}

// move moves sequence seq's positions from p0 on by d; ok: whether
// ggload does (where it refuses, llama.cpp is not asked).
func (p *dsv4Pair) move(what string, seq, p0, d int32, ok bool) {
	p.t.Helper()
	if p.ours.CanShift() {
		p.t.Fatalf("%s: the DSV4 memory says it can shift", what)
	}
	err := p.ours.SeqAdd(seq, p0, -1, d)
	if (err == nil) != ok {
		p.t.Fatalf("%s: seq_add(%d, %d, -1, %d): %v (success wanted: %v)", what, seq, p0, d, err, ok)
	}
	if err != nil {
		p.t.Logf("%s: refused: %v", what, err)
		return
	}
	if err := p.theirs.SeqAdd(seq, p0, -1, d); err != nil {
		p.t.Fatalf("%s: llama.cpp: %v", what, err)
	}
	p.positions(what)
}

func (p *dsv4Pair) seqCp(what string, src, dst int32) {
	p.t.Helper()
	if err := p.ours.SeqCp(src, dst, -1, -1); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	if err := p.theirs.SeqCp(src, dst, -1, -1); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	p.positions(what)
}

func (p *dsv4Pair) seqKeep(what string, seq int32) {
	p.t.Helper()
	if err := p.ours.SeqKeep(seq); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	if err := p.theirs.SeqKeep(seq); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	p.positions(what)
}

func (p *dsv4Pair) clear() {
	p.t.Helper()
	if err := p.ours.Clear(); err != nil {
		p.t.Fatal(err)
	}
	if err := p.theirs.Clear(); err != nil {
		p.t.Fatal(err)
	}
}
