package serve

import "fmt"

// StopType is why a generation stopped (stop_type).
type StopType int

// The stop types.
const (
	StopNone  StopType = iota // not stopped (a partial response)
	StopEOS                   // an end-of-generation token
	StopWord                  // a stop string
	StopLimit                 // n_predict, the context, n_indent or t_max_predict_ms
)

func (s StopType) String() string {
	return [...]string{"none", "eos", "word", "limit"}[s]
}

// ErrorType is llama-server's error_type, which its HTTP answers name.
type ErrorType int

// The error types.
const (
	ErrInvalidRequest ErrorType = iota
	ErrAuthentication
	ErrServer
	ErrNotFound
	ErrPermission
	ErrUnavailable
	ErrNotSupported
	ErrExceedContextSize
)

// String is the type as llama-server's error object names it.
func (t ErrorType) String() string {
	return [...]string{"invalid_request_error", "authentication_error", "server_error", "not_found_error", "permission_error",
		"unavailable_error", "not_supported_error", "exceed_context_size_error"}[t]
}

// Code is the HTTP status llama-server answers the type with.
func (t ErrorType) Code() int {
	return [...]int{400, 401, 500, 404, 403, 503, 501, 400}[t]
}

// Error is a request's error, as llama-server's engine sends it
// (server_task_result_error): its type, its message, and for a prompt
// that does not fit, the prompt's tokens and the slot's context.
type Error struct {
	Type          ErrorType
	Msg           string
	NPromptTokens int
	NCtx          int
}

func (e *Error) Error() string { return e.Msg }

func errorf(t ErrorType, format string, args ...any) *Error {
	return &Error{Type: t, Msg: fmt.Sprintf(format, args...)}
}

// TokenProb is one of a token's n_probs: a candidate, its text and
// probability.
type TokenProb struct {
	ID   int32
	Text string
	Prob float32
}

// TokenOutput is a generated token (completion_token_output): its id,
// the text it sends (empty while a stop string may be forming, or while
// its UTF-8 character is incomplete), its probability and the n_probs
// candidates.
type TokenOutput struct {
	ID    int32
	Text  string
	Prob  float32
	Probs []TokenProb
}

// Progress is the prompt's progress (return_progress).
type Progress struct {
	Total, Cache, Processed int
	TimeMS                  int64
}

// Timings are a request's timings (server_slot_stats: the response's
// "timings").
type Timings struct {
	CacheN      int
	PromptN     int
	PromptMS    float64
	PredictedN  int
	PredictedMS float64
}

// PromptPerTokenMS, PromptPerSecond, PredictedPerTokenMS and
// PredictedPerSecond are the derived timings, as the pin derives them
// (the first generated token is the prompt's: it costs no step).
func (t Timings) PromptPerTokenMS() float64 {
	if t.PromptN > 0 {
		return t.PromptMS / float64(t.PromptN)
	}
	return 0
}

func (t Timings) PromptPerSecond() float64 {
	if t.PromptMS > 0 {
		return 1e3 / t.PromptMS * float64(t.PromptN)
	}
	return 0
}

func (t Timings) PredictedPerTokenMS() float64 {
	if n := t.PredictedN - 1; n > 0 {
		return t.PredictedMS / float64(n)
	}
	return 0
}

func (t Timings) PredictedPerSecond() float64 {
	if n := t.PredictedN - 1; n > 0 && t.PredictedMS > 0 {
		return 1e3 / t.PredictedMS * float64(n)
	}
	return 0
}

// Event is a partial response of a request: the start of its processing
// (Begin: an HTTP layer sends its headers), the prompt's progress, or a
// generated token (streaming).
type Event struct {
	Begin    bool
	Progress *Progress
	Token    *TokenOutput
	// Timings are set with Options.TimingsPerToken, and on the last
	// partial response of a generation that stopped.
	Timings       *Timings
	NDecoded      int
	NPromptTokens int
	NPromptCached int
}

// Result is a completion's final response (server_task_result_cmpl_final).
type Result struct {
	// Content is the generated text, the stop string cut (in stream mode
	// too: the pin's final response then leaves it to the partial ones).
	Content string
	// Tokens are the generated tokens, with Options.ReturnTokens.
	Tokens        []int32
	Stop          StopType
	StoppingWord  string
	Truncated     bool
	HasNewLine    bool
	NDecoded      int
	NPromptTokens int
	NPromptCached int
	NTokensCached int
	// Probs are the generated tokens' n_probs (those of a stop string
	// left out, as the pin leaves them out of a response that is not
	// streamed).
	Probs   []TokenOutput
	Timings Timings
	Slot    int
}

// Embedding is an embedding request's result (server_task_result_embd):
// one vector pooled (and normalized), or with pooling none, one per
// token.
type Embedding struct {
	Vectors [][]float32
	NTokens int
}

// SlotFile is a slot action's result (server_task_result_slot_save_load).
type SlotFile struct {
	Slot     int
	Filename string
	NTokens  int
	NBytes   int64
	TimeMS   float64
}
