// Package chat is llama.cpp's chat layer in Go (the pin's common/chat*.cpp,
// peg-parser.cpp and the parts of llama-server that turn an OpenAI chat
// request into a prompt and a reply back into a message): a model's chat
// templates, applied to a conversation as llama-server and llama-cli
// apply them, and the model's reply parsed into content, reasoning and
// tool calls, whole or as it streams.
//
// # Templates
//
// FromModel is common_chat_templates_init on a model (a vocab-only file
// is enough): its tokenizer.chat_template and tokenizer.chat_template.
// tool_use, or Options.Template (--chat-template NAME|SOURCE, or
// --chat-template-file's contents, named by Options.Name in errors),
// with llama.cpp's ChatML fallback where the model has none, and its BOS
// and EOS tokens. FromSource is the same without a model. The Jinja
// templates run on llama.cpp's own engine (chat/internal/jinja); with
// Inputs.Legacy (--no-jinja) the built-in formats of llama_chat_apply_template
// (chat/internal/legacy) render instead, detected as the pin detects them.
// A Templates is safe for concurrent use; what it learns about its template
// (the autoparser's analysis) is computed once and kept.
//
// # Applying
//
// Templates.Apply is common_chat_templates_apply: Inputs (messages with
// typed content parts, tool calls, tool results and reasoning_content;
// tools, tool_choice, parallel_tool_calls; add_generation_prompt,
// continue_final_message; enable_thinking, the reasoning format,
// chat_template_kwargs; a grammar or a JSON schema) give Params: the
// prompt, the format, the grammar (lazy or not, with its triggers), the
// preserved tokens, the additional stops, the generation prompt and the
// thinking tags. Templates.RequestInputs reads an OpenAI request body as
// llama-server's oaicompat_chat_params_parse does, with its error texts;
// ParseMessages, ParseTools and CheckMessages are its parts.
// Templates.FormatSingle is common_chat_format_single, the text one more
// message adds (how llama-cli formats a conversation turn by turn).
//
// Times templates see (strftime_now, the datetime some are given) are
// Inputs.Now, else SOURCE_DATE_EPOCH's where it is set, else the clock's.
//
// # Parsing
//
// Params.Parse is common_chat_parse: the reply to the prompt as a
// Message, whole or partial (still streaming). Message.JSON is
// to_json_oaicompat. Params.NewStream follows a streaming reply as
// llama-server does (task_result_state::update_chat_msg): each piece
// gives the message so far and the Diffs since the last parse
// (common_chat_msg_diff; Diff.JSON is the delta of an OpenAI streaming
// chunk), tool calls keeping the ids they were first given
// (RandomToolCallID's, as gen_tool_call_id's, where the reply gives none).
//
// # Errors
//
// Errors are llama.cpp's, as an *Error whose Msg is the pin's what(): a
// malformed message or request gets llama-server's text; a template that
// fails to parse or render gets the engine's message, and Error.Error
// prefixes it with the template's name, line and column. (Where
// common_chat_templates_init rethrows a parse error as a bare
// std::exception, its logged message is the one given here.) Nothing
// panics on bad input: the engine bounds recursion and memory (see
// chat/internal/jinja), and the parsers bound their depth.
//
// # JSON
//
// JSON values are internal/ojson's: nlohmann's ordered_json, so that what
// templates see, grammars built from schemas and the JSON written back
// are byte for byte llama.cpp's.
//
// # Conformance
//
// The tests hold every function to libllama-common of the pin (built
// with lab/cxx): every template of the pin's models/templates/ on the
// conversations of its tests/test-chat.cpp, every apply and parse that
// test-chat.cpp makes, its PEG-parser and autoparser tests call by call,
// llama-server's request conversion, and a differential fuzz of random
// conversations and replies (GGLOAD_CHAT_ALL=1 runs them whole).
package chat
