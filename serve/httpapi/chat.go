package httpapi

import (
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/serve"
)

// chatParams are what a chat template made of a request, carried into
// its tasks.
type chatParams struct{}

func (c *chatParams) apply(p *taskParams) {}

// chatState is a task's reply as parsed so far (task_result_state).
type chatState struct{}

func newChatState(p *taskParams) *chatState { return &chatState{} }

func (req *cmplReq) finalChat(t *cmplTask, res *serve.Result) ojson.Value {
	return req.finalNone(t, res)
}

func (req *cmplReq) partialChat(t *cmplTask, ev *serve.Event) ojson.Value {
	return req.partialNone(t, ev)
}

func (h *Handler) chatRoutes(add func(method string, fn route, paths ...string)) {}
