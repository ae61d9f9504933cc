// Port of llama.cpp tools/server/server-context.cpp (server_slot,
// launch_slot_with_task, process_token, populate_token_probs,
// send_partial_response, send_final_response) (v0.5.0).

package serve

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/sample"
)

// slotState is slot_state.
type slotState int

const (
	slotIdle slotState = iota
	slotStarted
	slotProcessingPrompt
	slotDonePrompt
	slotGenerating
)

// slot is a server_slot: a sequence of the context, the task it runs and
// the prompt its memory holds.
type slot struct {
	id        int
	state     slotState
	task      *task
	taskPrev  *task
	prompt    prompt
	tLastUsed int64
	nCtx      int
	iBatch    int

	nPredictMax    int
	lastNLPos      int
	generated      []byte
	genTokens      []int32
	nSentText      int
	genProbs       []TokenOutput
	hasNextToken   bool
	hasNewLine     bool
	truncated      bool
	stop           StopType
	stoppingWord   string
	smpl           *sample.Sampler
	sampled        int32
	stats          slotStats
	lastGenerated  string // the text of the last task, for the slot's description
	lastNDecoded   int
	lastHasNext    bool
	lastRemaining  int
	lastNPrompt    int
	lastNProcessed int
}

// prompt is a server_prompt: the tokens the slot's memory holds, and its
// context checkpoints.
type prompt struct {
	tokens      []int32
	checkpoints []checkpoint
}

func (p *prompt) clear() { p.tokens, p.checkpoints = nil, nil }

func (p *prompt) clone() prompt {
	return prompt{tokens: slices.Clone(p.tokens), checkpoints: slices.Clone(p.checkpoints)}
}

// slotStats are server_slot_stats, times in microseconds of the engine's
// clock (0: not yet).
type slotStats struct {
	nPromptCached, nPromptProcessed, nGen int
	tStart, tPromptLast, tGenLast         int64
}

func (s *slotStats) isSet() bool { return s.tStart > 0 }

func (s *slotStats) tPromptMS() float64 {
	if s.tPromptLast == 0 {
		return 0
	}
	return float64(s.tPromptLast-s.tStart) / 1000
}

func (s *slotStats) tGenUS() int64 {
	if s.tGenLast == 0 {
		return 0
	}
	return max(1, s.tGenLast-s.tPromptLast)
}

func (s *slotStats) timings() Timings {
	return Timings{CacheN: s.nPromptCached, PromptN: s.nPromptProcessed, PromptMS: s.tPromptMS(), PredictedN: s.nGen, PredictedMS: float64(s.tGenUS()) / 1000}
}

// now is ggml_time_us on the engine's monotonic clock (from 1: 0 means
// "not yet").
func (e *Engine) now() int64 { return time.Since(e.epoch).Microseconds() + 1 }

func (s *slot) processing() bool { return s.state != slotIdle }

func (s *slot) nRemaining() int {
	if s.nPredictMax == -1 {
		return -1
	}
	return s.nPredictMax - s.stats.nGen
}

func (s *slot) hasBudget() bool { return s.nPredictMax == -1 || s.nRemaining() > 0 }

// reset is server_slot::reset.
func (s *slot) reset() {
	s.lastNLPos = 0
	s.generated = nil
	s.hasNewLine = false
	s.truncated = false
	s.stop = StopNone
	s.stoppingWord = ""
	s.nSentText = 0
	s.genTokens = nil
	s.genProbs = nil
	s.taskPrev = s.task
	s.task = nil
	s.stats = slotStats{}
	s.nPredictMax = -1
}

// release is server_slot::release: the slot idles, its memory kept for
// the next task; a deferred task is taken again.
func (e *Engine) release(s *slot) {
	if !s.processing() {
		return
	}
	s.tLastUsed = e.now()
	s.state = slotIdle
	s.lastGenerated, s.lastNDecoded, s.lastHasNext, s.lastRemaining = string(s.generated), s.stats.nGen, s.hasNextToken, s.nRemaining()
	s.lastNPrompt, s.lastNProcessed = len(s.prompt.tokens), s.stats.nPromptProcessed
	s.reset()
	e.popDeferred(s.id)
}

// canSplit is server_slot::can_split: a prompt may be decoded over
// several batches unless it needs embeddings that pool over every token
// (without memory, or pooling other than last).
func (e *Engine) canSplit(s *slot) bool {
	return !s.task.needEmbd() || (e.info.Memory && e.info.Pooling == poolingLast)
}

// canBatchWith is server_slot::can_batch_with: one batch holds one kind
// of task.
func canBatchWith(a, b *slot) bool { return a.task.kind == b.task.kind }

// launch is launch_slot_with_task: the prompt checked, the sampler made,
// the slot started; false where the task was refused (its error sent).
func (e *Engine) launch(s *slot, t *task) bool {
	nVocab := int32(e.vocab.NTokens())
	for _, tok := range t.tokens {
		if tok < 0 || tok >= nVocab {
			t.out.send(errorf(ErrInvalidRequest, "Prompt contains invalid tokens"))
			return false
		}
	}
	s.smpl = nil
	if t.needSampling() {
		smpl, err := sample.New(e.vocab, t.opts.Sampling)
		if err != nil {
			t.out.send(errorf(ErrInvalidRequest, "Failed to initialize samplers: %s", samplerInitError(err)))
			return false
		}
		s.smpl = smpl
	}
	s.nPredictMax = t.opts.NPredict
	if s.nPredictMax == -1 {
		s.nPredictMax = e.p.nPredict
	}
	s.task = t
	s.state = slotStarted
	e.nEmptyConsecutive = 0
	return true
}

// initSampler is server_slot::init_sampler: the sampler reset and the
// prompt's tokens accepted (not by a grammar).
func (s *slot) initSampler() {
	if s.smpl == nil {
		return
	}
	s.smpl.Reset()
	for _, t := range s.prompt.tokens {
		// common_sampler_accept(smpl, token, false): the grammar does
		// not see the prompt's tokens
		s.smpl.AcceptPrompt(t)
	}
}

// exceptionText is the text of what the pin throws where ggload returns
// err: a grammar's accept error is llama_grammar_accept_impl's
// runtime_error.
func exceptionText(err error) string {
	var ae *grammar.AcceptError
	if errors.As(err, &ae) {
		return ae.Msg
	}
	return err.Error()
}

// samplerInitError is what common_sampler_init throws for err: a grammar
// that does not parse, names no root or recurses on the left is "failed
// to parse grammar" (llama_grammar_init_impl logs the reason and gives
// nothing), a trigger pattern std::regex refuses is the regex_error's
// text; a generation prompt the grammar refuses is "std::exception" (the
// pin logs the grammar and rethrows its accept error as a copy of its
// std::exception base, which has no text of its own).
func samplerInitError(err error) string {
	var pe *grammar.ParseError
	var ie *grammar.InitError
	var pat *grammar.PatternError
	var ae *grammar.AcceptError
	switch {
	case errors.As(err, &pe), errors.As(err, &ie):
		return "failed to parse grammar"
	case errors.As(err, &pat):
		return pat.Msg
	case errors.As(err, &ae):
		return "std::exception"
	}
	return err.Error()
}

// piece is common_token_to_piece.
func (e *Engine) piece(t int32, special bool) string {
	b, err := e.vocab.AppendPiece(nil, t, 0, special)
	if err != nil {
		return ""
	}
	return string(b)
}

// acceptSpecial says whether the token's special text is shown
// (--special, or a preserved token of the request).
func (e *Engine) acceptSpecial(s *slot, t int32) bool {
	return e.p.Special || slices.Contains(s.task.opts.PreservedTokens, t)
}

// findStoppingStrings is server_slot::find_stopping_strings: the first
// position of a stop string in text (whole: in its last token's reach,
// ending the generation; partial: a stop string's beginning at its end),
// -1 where none.
func (s *slot) findStoppingStrings(text string, lastTokenSize int, full bool) int {
	stopPos := -1
	for _, word := range s.task.opts.Stop {
		pos := -1
		if full {
			tmp := len(word) + lastTokenSize
			from := 0
			if len(text) > tmp {
				from = len(text) - tmp
			}
			if i := strings.Index(text[from:], word); i >= 0 {
				pos = from + i
			}
		} else {
			pos = findPartialStop(text, word)
		}
		if pos != -1 && (stopPos == -1 || pos < stopPos) {
			if full {
				s.stop = StopWord
				s.stoppingWord = word
				s.hasNextToken = false
			}
			stopPos = pos
		}
	}
	return stopPos
}

// processToken is process_token: the token's text added, stop strings
// looked for, the limits checked; false when the generation stops.
func (e *Engine) processToken(res *TokenOutput, s *slot) bool {
	tokenStr := res.Text
	s.sampled = res.ID
	s.generated = append(s.generated, tokenStr...)
	if s.task.opts.ReturnTokens {
		s.genTokens = append(s.genTokens, res.ID)
	}
	s.hasNextToken = true
	incomplete := ValidUTF8Len(s.generated) < len(s.generated)
	if !incomplete {
		pos := min(s.nSentText, len(s.generated))
		strTest := string(s.generated[pos:])
		sendText := true
		stopPos := s.findStoppingStrings(strTest, len(tokenStr), true)
		if stopPos != -1 {
			s.generated = s.generated[:pos+stopPos]
			pos = min(s.nSentText, len(s.generated))
		} else if s.hasNextToken && !e.vocab.IsEOG(res.ID) {
			stopPos = s.findStoppingStrings(strTest, len(tokenStr), false)
			sendText = stopPos == -1
		}
		if sendText {
			res.Text = string(s.generated[pos:])
			s.nSentText += len(res.Text)
		} else {
			res.Text = ""
		}
		if s.processing() {
			s.genProbs = append(s.genProbs, *res)
		}
		if s.task.opts.Stream {
			e.sendPartial(s, res, false, false)
		}
	}
	if incomplete {
		s.hasNextToken = true
	}
	if !e.p.ContextShift && len(s.prompt.tokens)+1 >= s.nCtx {
		s.truncated = true
		s.stop = StopLimit
		s.hasNextToken = false
	}
	if s.stats.nGen > 0 && s.hasNextToken && !s.hasBudget() {
		s.stop = StopLimit
		s.hasNextToken = false
	}
	if s.hasNewLine && s.task.opts.NIndent > 0 {
		if s.lastNLPos > 0 {
			pos := s.lastNLPos
			nIndent := 0
			for pos < len(s.generated) && (s.generated[pos] == ' ' || s.generated[pos] == '\t') {
				nIndent++
				pos++
			}
			if pos < len(s.generated) && nIndent < s.task.opts.NIndent {
				s.stop = StopLimit
				s.hasNextToken = false
				s.generated = s.generated[:pos]
			}
		}
		if i := strings.IndexByte(string(s.generated[min(s.lastNLPos, len(s.generated)):]), '\n'); i >= 0 {
			s.lastNLPos += i + 1
		}
	}
	if strings.Contains(res.Text, "\n") {
		s.hasNewLine = true
		if ms := s.task.opts.TMaxPredictMS; ms > 0 && float64(s.stats.tGenUS())/1000 > float64(ms) {
			s.stop = StopLimit
			s.hasNextToken = false
		}
	}
	if e.vocab.IsEOG(res.ID) {
		s.stop = StopEOS
		s.hasNextToken = false
	}
	return s.hasNextToken
}

// populateProbs is populate_token_probs: the n_probs candidates after
// the sampler chain (post_sampling_probs), or of the logits before it.
func (e *Engine) populateProbs(s *slot, res *TokenOutput, logits []float32) {
	n := int(s.task.opts.Sampling.NProbs)
	special := e.p.Special
	if s.task.opts.PostSamplingProbs {
		cur, _ := s.smpl.Candidates(true)
		for _, c := range cur {
			if c.ID == res.ID {
				res.Prob = c.P
				break
			}
		}
		for i := range min(n, len(cur)) {
			if cur[i].P == 0 {
				break
			}
			res.Probs = append(res.Probs, TokenProb{cur[i].ID, e.piece(cur[i].ID, special), cur[i].P})
		}
		return
	}
	cur := sample.TokenProbabilities(logits, n)
	for _, c := range cur {
		if c.ID == res.ID {
			res.Prob = c.P
			break
		}
	}
	for i := range min(n, len(cur)) {
		res.Probs = append(res.Probs, TokenProb{cur[i].ID, e.piece(cur[i].ID, special), cur[i].P})
	}
}

// sendPartial is send_partial_response.
func (e *Engine) sendPartial(s *slot, tok *TokenOutput, progress, begin bool) {
	t := s.task
	ev := &Event{NDecoded: s.stats.nGen, NPromptTokens: len(t.tokens), NPromptCached: s.stats.nPromptCached}
	switch {
	case progress:
		ev.Progress = &Progress{Total: len(t.tokens), Cache: s.stats.nPromptCached, Processed: len(s.prompt.tokens), TimeMS: (e.now() - s.stats.tStart) / 1000}
	case begin:
		ev.Begin = true
	default:
		c := *tok
		if t.opts.Sampling.NProbs <= 0 {
			c.Prob, c.Probs = 0, nil
		}
		ev.Token = &c
	}
	if s.stop != StopNone || t.opts.TimingsPerToken {
		tm := s.stats.timings()
		ev.Timings = &tm
	}
	t.out.send(ev)
}

// sendFinal is send_final_response.
func (e *Engine) sendFinal(s *slot) {
	t := s.task
	r := &Result{Content: string(s.generated), Tokens: s.genTokens, Stop: s.stop, StoppingWord: s.stoppingWord, Truncated: s.truncated,
		HasNewLine: s.hasNewLine, NDecoded: s.stats.nGen, NPromptTokens: len(t.tokens), NPromptCached: s.stats.nPromptCached,
		NTokensCached: len(s.prompt.tokens), Timings: s.stats.timings(), Slot: s.id}
	if t.opts.Sampling.NProbs > 0 {
		probs := s.genProbs
		if !t.opts.Stream && s.stop == StopWord {
			stopToks, _ := e.vocab.Tokenize(s.stoppingWord, false, false)
			safe := min(len(probs), len(stopToks))
			probs = probs[:len(probs)-safe]
		}
		r.Probs = slices.Clone(probs)
	}
	t.out.send(r)
}

// sendError sends a slot's task its error (with the prompt's tokens and
// the slot's context).
func (e *Engine) sendError(s *slot, err *Error) {
	err.NPromptTokens, err.NCtx = len(s.task.tokens), s.nCtx
	s.task.out.send(err)
}

// SlotInfo describes a slot (server_slot::to_json).
type SlotInfo struct {
	ID                     int
	NCtx                   int
	IsProcessing           bool
	IDTask                 int // -1: none yet
	NPromptTokens          int
	NPromptTokensProcessed int
	NPromptTokensCache     int
	HasNextToken           bool
	HasNewLine             bool
	NRemain                int
	NDecoded               int
	Generated              string
	Params                 Options
}

func (e *Engine) slotInfo(s *slot) SlotInfo {
	si := SlotInfo{ID: s.id, NCtx: s.nCtx, IsProcessing: s.processing(), IDTask: -1}
	t := s.task
	if t == nil {
		t = s.taskPrev
	}
	if t == nil {
		return si
	}
	si.IDTask, si.Params = t.id, t.opts
	si.NPromptTokens = len(s.prompt.tokens)
	si.HasNewLine = s.hasNewLine
	if s.processing() {
		si.NPromptTokensProcessed, si.NPromptTokensCache = s.stats.nPromptProcessed, s.stats.nPromptCached
		si.HasNextToken, si.NRemain, si.NDecoded, si.Generated = s.hasNextToken, s.nRemaining(), s.stats.nGen, string(s.generated)
		return si
	}
	// (release's reset cleared the stats and the budget: an idle slot
	// shows none of its last task's, as the pin's to_json shows them)
	si.HasNextToken, si.NRemain, si.Generated = s.lastHasNext, -1, s.lastGenerated
	return si
}
