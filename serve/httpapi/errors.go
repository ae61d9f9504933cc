// Port of llama.cpp tools/server/server-common.cpp (format_error_response)
// and tools/server/server.cpp (ex_wrapper) (v0.5.0).

package httpapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/serve"
)

// apiError is an answer of llama-server's error shape: {"error": {"code",
// "message", "type"}}, with the status the type names.
type apiError struct {
	typ serve.ErrorType
	msg string
	// nPromptTokens and nCtx are an exceed_context_size_error's
	nPromptTokens, nCtx int
}

func (e *apiError) Error() string { return e.msg }

func errf(t serve.ErrorType, format string, args ...any) *apiError {
	return &apiError{typ: t, msg: fmt.Sprintf(format, args...)}
}

// invalidArgument is a std::invalid_argument: ex_wrapper answers it 400,
// other exceptions 500.
type invalidArgument struct{ msg string }

func (e *invalidArgument) Error() string { return e.msg }

func invalidf(format string, args ...any) error {
	return &invalidArgument{fmt.Sprintf(format, args...)}
}

// errorObject is format_error_response: the error's code, message and
// type, in that order (and for a prompt that does not fit, the prompt's
// tokens and the context, as server_task_result_error adds them).
func errorObject(e *apiError) ojson.Value {
	o := ojson.ObjectValue(
		ojson.Member{Key: "code", Value: ojson.IntValue(int64(e.typ.Code()))},
		ojson.Member{Key: "message", Value: ojson.StringValue(e.msg)},
		ojson.Member{Key: "type", Value: ojson.StringValue(e.typ.String())},
	)
	if e.typ == serve.ErrExceedContextSize {
		o.Set("n_prompt_tokens", ojson.IntValue(int64(e.nPromptTokens)))
		o.Set("n_ctx", ojson.IntValue(int64(e.nCtx)))
	}
	return o
}

// toAPIError is ex_wrapper's reading of an exception: an engine's error
// keeps its type, an invalid argument is an invalid request, anything
// else (a JSON error, a key not found) is a server error.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var se *serve.Error
	if errors.As(err, &se) {
		return &apiError{typ: se.Type, msg: se.Msg, nPromptTokens: se.NPromptTokens, nCtx: se.NCtx}
	}
	var ia *invalidArgument
	if errors.As(err, &ia) {
		return &apiError{typ: serve.ErrInvalidRequest, msg: ia.msg}
	}
	if errors.Is(err, serve.ErrClosed) {
		return &apiError{typ: serve.ErrUnavailable, msg: "the server is shutting down"}
	}
	return &apiError{typ: serve.ErrServer, msg: err.Error()}
}

// asInvalid is the catch of handle_completions_impl and its kin: every
// exception while reading a request is an invalid request.
func asInvalid(err error) *apiError {
	ae := toAPIError(err)
	if ae.typ == serve.ErrServer {
		ae = &apiError{typ: serve.ErrInvalidRequest, msg: ae.msg}
	}
	return ae
}

// canceled says whether err is the request's own end: its connection
// closed (nothing is answered then, as llama-server answers nothing).
func canceled(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ctx.Err()))
}
