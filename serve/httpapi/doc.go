// Package httpapi is llama-server's HTTP API as an http.Handler: the
// pin's native endpoints (/completion, /infill, /embedding, /rerank,
// /tokenize, /detokenize, /apply-template, /props, /slots, /metrics,
// /lora-adapters, /health), OpenAI's (/v1/completions,
// /v1/chat/completions, /v1/responses, /v1/embeddings, /v1/rerank,
// /v1/models) and Anthropic's (/v1/messages, /v1/messages/count_tokens),
// and the router's (/models, /models/load, /models/unload), answered as
// llama-server of the pin answers them: the same JSON, field for field and
// in nlohmann's order and number format (package ojson), the same status
// codes, error objects ({"error": {"code", "message", "type"}}) and
// server-sent events.
//
// It makes no decision: a request is parsed (the pin's completion schema,
// eval_llama_cmpl_schema, field for field, with its error texts), its chat
// template applied (package chat), its tasks posted to a serve.Engine, and
// the engine's events and results written. What it serves is a Models: one
// model (Single), or a pool of them that a request names in its "model"
// field (llama-server's router mode).
//
// New makes the handler; a program mounts it in its own mux (see
// examples/server) or serves it with its own http.Server, whose limits it
// sets (ggload serve sets ReadHeaderTimeout, ReadTimeout, IdleTimeout and
// MaxHeaderBytes). The handler bounds bodies (Options.MaxBodyBytes), writes
// each chunk of a stream under a deadline (Options.WriteTimeout), compares
// API keys in constant time, and ends a request whose connection closes:
// its context is the engine's, which frees the slot.
//
// The files follow the pin's: handler.go (server-http.cpp's middlewares
// and routing, server.cpp's routes), params.go (server-schema.cpp),
// completion.go, embed.go, info.go and chat.go (server-context.cpp's
// routes and server-task.cpp's results), chatconv.go (server-chat.cpp),
// router.go (server-models.cpp's routes), tokens.go and errors.go
// (server-common.cpp).
package httpapi
