// Package serve is llama-server's engine without its HTTP: slots over one
// infer.Context, scheduled as the pin's tools/server/server-context.cpp
// schedules them, so that a Go program serves many requests of one model
// at once. It owns no listener and parses no JSON; an HTTP layer above it
// (and a model pool beside it) call it.
//
// What it mirrors, function by function (server_context_impl):
//
//   - the task queue (server_queue): requests are tasks, taken between
//     steps; a request without a free slot waits (defer) and is taken
//     again when a slot is released (pop_deferred_task);
//   - get_available_slot: the slot whose cached prompt shares the longest
//     prefix with the new one (--slot-prompt-similarity), else the least
//     recently used; the prompt cache in host memory (--cache-ram,
//     server_prompt_cache) saves and restores prompts by the sequence
//     state of package infer, and idle slots are saved to it
//     (--cache-idle-slots);
//   - launch_slot_with_task: a sampler chain of package sample per
//     request, with its own seed;
//   - update_slots: one decode a step that holds every generating slot's
//     sampled token, then the prompts of the others, chunk by chunk, up
//     to n_batch, in slot order (continuous batching); the common prefix
//     kept, --cache-reuse chunks shifted, context checkpoints made and
//     restored for the memories that cannot roll back (recurrent,
//     hybrid, sliding-window), the context shifted with --context-shift;
//   - process_token: the text cut at UTF-8 boundaries, stop strings
//     (whole and partial, as the pin holds back a partial one), n_predict,
//     n_indent, t_max_predict_ms, end of generation; n_probs before or
//     after sampling;
//   - send_embedding and send_rerank: the pooled (and normalized)
//     embeddings, or each token's, and the rank score;
//   - the slot actions: save to and restore from files in the pin's
//     format (llama_state_seq_save_file), erase.
//
// Requests are cancelled through their context.Context: the slot is
// released before the next step. Events reach the caller on its own
// goroutine (Engine.Complete calls its callback there), so a slow or
// panicking callback stops its request alone.
//
// Where the pin's server ends every slot on a failed decode, the engine
// decodes the slots of the failed batch one by one and ends only those
// whose tokens fail; the others go on.
//
// Grammars and chat templates plug in above: a request's sampler is
// sample.New of its Options.Sampling (the grammar joins the chain
// there), its prompt comes as tokens (a chat template renders it above),
// its reply is parsed above from Result; Options.PreservedTokens and
// Options.UserMessageStarts carry what the chat layer knows into the
// scheduling, as the pin's task params carry them.
package serve
