// Package jinja is llama.cpp's Jinja engine (the pin's common/jinja) in
// Go: its lexer, parser, runtime, values, filters, tests and methods, and
// its capability probe. A template renders here to the bytes llama.cpp's
// engine renders, and fails with the message it fails with; quirks
// included (whitespace control, floats printed as printf prints them,
// tojson written by the pin's own writer, std::sort's order of ties,
// glibc's strftime in the C locale).
//
// It owns rendering only. The chat formats around it (the messages and
// tools that common/chat.cpp puts in the context, the workarounds, the
// grammars and parsers) belong to the chat packages above it.
//
// # Use
//
// Parse once, render many times, from any goroutines:
//
//	t, err := jinja.Parse("tokenizer.chat_template", src)
//	c := &jinja.Context{}
//	c.SetJSON(vars, true) // an ojson object: messages, tools, bos_token...
//	prompt, err := t.Render(c)
//	caps, err := t.Caps()
//
// How common/chat.cpp's calls map onto it:
//
//	common_chat_template(src, bos, eos)      Parse(name, src); bos/eos go in the context
//	tmpl.source()                            Template.Source
//	tmpl.original_caps() / jinja::caps_get   Template.Caps (probed once)
//	jinja::context ctx(tmpl.source())        Context (errors always show the Template's source)
//	ctx.current_time                         Context.Now
//	jinja::caps_apply_preserve_reasoning     Context.PreserveReasoning
//	jinja::caps_apply_reasoning_effort       Context.ReasoningEffort
//	jinja::global_from_json(ctx, j, mark)    Context.SetJSON(j, mark)
//	ctx.set_val(name, v)                     Context.Set
//	runtime.execute + gather_string_parts    Template.RenderParts
//	  ... ->as_string().str()                Template.Render
//
// # Time
//
// strftime_now formats Context.Now; when that is zero, the time of the
// render (Now): SOURCE_DATE_EPOCH's (seconds since the epoch) when it
// holds an integer, else the clock's, in the local zone. (The pin reads
// the clock alone.) Strftime is the same formatting for the chat code's
// own dates (common_chat_extra_context's datetime and date_string).
//
// # Limits
//
// The pin has none: a deep enough recursion overflows its stack, a huge
// string or loop exhausts its memory or runs on. Here a render stops with
// an error, tighter than where the pin would fail: macro calls nested 500
// deep, values (arrays, objects, cycles) walked 500 deep, a template's
// source nested 1000 deep, a string or output of 64 MiB, a range() of
// 2^20 elements, 2^24 statements and loop iterations. A divisibleby(0)
// that would trap the pin is an error too. Nothing panics out of the
// package: errors are raised internally as panics (as the pin throws) and
// caught at the API, as text/template does.
package jinja
