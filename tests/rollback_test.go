package tests

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// Recurrent states with rollback snapshots (n_rs_seq) (and DeepSeek-V4's
// compressor states, which keep them alike), as a speculative
// decoder drafting from the model itself uses them: the draft decoded,
// its rejected tail taken back with seq_rm, decoding going on from the
// state before it. Every architecture with partial rollback, on the CPU
// (and one on Vulkan0), against libllama: logits bit for bit, and the
// same seq_rm answers, the refused ones included (a second rollback
// before a decode, one past the snapshots); an architecture without
// partial rollback ignores n_rs_seq and refuses the partial seq_rm, as
// llama.cpp does.
//
//	go test -run TestDecodeRollback -v ./tests
func TestDecodeRollback(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	rollback := []string{"qwen35", "qwen35moe", "qwen4exp", "lfm2", "lfm2moe", "nemotron_h", "nemotron_h_moe", "bailingmoe3", "kimi-k3", "deepseek4"}
	names := append(slices.Clone(rollback), "jamba", "mamba")
	paths := filledArchs(t, rt, names...)
	const nRS = 3
	params := func(devs ...string) place.Params {
		// ubatches of 8: the prompt is split, each sequence's last
		// n_rs_seq + 1 tokens kept in one ubatch
		return place.Params{DeviceNames: devs, Context: place.ContextParams{NParallel: 2, NCtx: 512, NUBatch: 8, NRSSeq: nRS}}
	}
	type run struct {
		name, arch string
		params     place.Params
	}
	var runs []run
	for _, n := range names {
		runs = append(runs, run{n, n, params("none")})
	}
	runs = append(runs, run{"lfm2-vulkan", "lfm2", params("Vulkan0")})
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			if r.params.DeviceNames[0] == "Vulkan0" {
				testenv.Vulkan(t)
			}
			ours, theirs, nVocab := bothContexts(t, rt, l, paths[r.arch], r.params)
			tok := func(i int) int32 { return int32((i*53 + 7) % nVocab) }
			decode := func(what string, counts [2]int, all bool) {
				t.Helper()
				var tokens []int32
				var seqs [][]int32
				var logits []bool
				for s, n := range counts {
					for i := range n {
						tokens = append(tokens, tok(len(tokens)+s*11+int(ours.SeqPosMax(int32(s)))+1))
						seqs = append(seqs, []int32{int32(s)})
						logits = append(logits, all || i == n-1)
					}
				}
				errO := ours.Decode(infer.Batch{Tokens: tokens, SeqIDs: seqs, Logits: logits})
				if errO != nil {
					t.Fatalf("%s: ggload: %v", what, errO)
				}
				errT := theirs.Decode(tokens, nil, seqs, logits)
				if errO != nil || errT != nil {
					t.Fatalf("%s: ggload %v, llama.cpp %v", what, errO, errT)
				}
				sameLogits(t, what, ours, theirs, logits, nVocab)
			}
			// seqRm asks both to take sequence seq back to p0.
			seqRm := func(what string, seq, p0 int32, want bool) {
				t.Helper()
				errO, errT := ours.SeqRm(seq, p0, -1), theirs.SeqRm(seq, p0, -1)
				if (errO == nil) != (errT == nil) || (errO == nil) != want {
					t.Fatalf("%s: seq_rm(%d, %d, -1): ggload %v, llama.cpp %v (success wanted: %v)", what, seq, p0, errO, errT, want)
				}
				if errO != nil {
					t.Logf("%s: refused by both: %v", what, errO)
				}
				for s := range int32(2) {
					if a, b := ours.SeqPosMax(s), theirs.SeqPosMax(s); a != b {
						t.Fatalf("%s: sequence %d ends at %d, llama.cpp's at %d", what, s, a, b)
					}
				}
			}
			can := slices.Contains(rollback, r.arch)
			decode("prompt", [2]int{11, 9}, false)
			decode("draft", [2]int{4, 3}, true)
			p0, p1 := ours.SeqPosMax(0), ours.SeqPosMax(1)
			seqRm("reject 2 of sequence 0", 0, p0-1, can)
			if !can {
				return
			}
			seqRm("reject 3 of sequence 1", 1, p1-2, true)
			seqRm("a second rollback before a decode", 0, p0-2, false)
			decode("after the rollback", [2]int{2, 1}, true)
			seqRm(fmt.Sprintf("past the %d snapshots", nRS), 0, ours.SeqPosMax(0)-nRS, false)
			seqRm("reject 1 of sequence 0", 0, ours.SeqPosMax(0), true)
			decode("a draft after a one-token rollback", [2]int{3, 4}, true)
			seqRm("reject all of sequence 1's draft", 1, ours.SeqPosMax(1)-nRS+1, true)
			seqRm("sequence 0 whole", 0, 0, true)
			decode("on", [2]int{6, 1}, true)
		})
	}
}
