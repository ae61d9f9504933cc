// Package grammar is llama.cpp's constrained output: the GBNF grammars of
// src/llama-grammar.cpp and the JSON-schema converter of
// common/json-schema.cpp and common/json-schema-to-grammar.cpp, giving
// the same grammar text, the same rules, the same stacks and the same
// allowed tokens as the pin. The sampler that uses a grammar
// (llama_sampler_init_grammar, common_sampler's check and resampling) is
// package sample's; this package imports no sampler.
//
// # JSON schemas
//
// ParseSchema is common_chat_schema_from_json: a JSON schema (an
// ojson.Value, so that key order and numbers are nlohmann's) becomes a
// Document of Schema nodes, every $ref resolved. A Schema is one struct
// for all of common_chat_schema's subclasses: Kind (KindObject,
// KindAnyOf, ...) says which fields hold its content; ValueTypes and
// MayBeString are the pin's. A schema outside the supported subset gets
// a *SchemaError naming its place ("JSON schema error at #/anyOf/1/items:
// unrecognized type x").
//
// FromJSONSchema is json_schema_to_grammar: the grammar of a schema, as
// llama.cpp's -j and the server's json_schema make it; FromDocument takes
// a parsed document. Build is build_grammar: a callback adds rules
// (Builder.AddRule, common_grammar_builder::add_rule) and schema nodes
// (Builder.AddSchema, add_schema), and the grammar comes back sorted by
// rule name, as the chat formats build their tool-call grammars.
// FormatLiteral is gbnf_format_literal. What the converter refuses comes
// back as a *ConversionError with the pin's message; a pattern it cannot
// translate becomes any string, with the pin's warning
// (BuildOptions.Warn, FromJSONSchemaWarn).
//
// # GBNF grammars
//
// ParseGBNF is llama_grammar_parser::parse: the Rules of a GBNF text (the
// symbol ids, and each rule's Elements), or a *ParseError carrying the
// pin's message and the line and column it names. New is
// llama_grammar_init_impl from a rule (a *InitError where the pin's init
// fails: no such rule, a left recursion); NewLazy adds the lazy variant,
// with trigger patterns (regular expressions as std::regex reads and runs
// them in libstdc++, ECMAScript over bytes; RegexEscape makes one of a
// word) and trigger tokens; NewFromRules takes rules given as elements.
//
// A Grammar stands somewhere in its rules, as llama_grammar's stacks do:
// Accept is llama_grammar_accept_impl (a lazy grammar's triggers
// included), AcceptPiece llama_grammar_accept_token, AcceptString
// llama_grammar_accept_str; a token or text it cannot take is an
// *AcceptError with the pin's message. Mask is llama_grammar_apply_impl
// over the whole vocabulary, Allows of one token (common_sampler_sample's
// check of the token its chain chose). Reset, Clone, CanEnd, Awaiting and
// Stacks give the rest of what the pin's samplers and tests use.
//
// # Speed
//
// The pin walks each of the vocabulary's tokens through every stack, one
// code point after another. Mask walks a trie of the vocabulary's code
// points instead, shared by every grammar over a vocabulary: a prefix
// that many tokens share is matched once, a character class is matched
// against a node's children as ranges, the stacks are numbered and shared
// (equal stacks are one number), and what a stack becomes after a
// character is worked out once per stack. The masks of the last states a
// grammar stood in are kept, since a generation comes back to the same
// states (inside a string, after a comma).
//
// # Bounds
//
// Where the pin hangs, exhausts its memory or overflows its stack, this
// package stops with an error, and says so:
//   - the converter: an allOf that leads back to itself through its
//     $refs' properties (the pin recurses until its stack overflows); a
//     grammar past MaxGrammarBytes (rule names grow with a schema's
//     nesting); an object's optional properties cost linear work, not the
//     pin's cubic (the grammar is the same);
//   - the parser: a repetition {m,n} with n below m (the pin generates
//     rules until its memory is gone);
//   - the grammar: a left recursion through rules that may match nothing,
//     which the pin's check misses and on which its stacks grow without
//     end; more than MaxStacks stacks at once (an ambiguous grammar's
//     stacks can double with each character: ErrTooManyStacks); a trigger
//     pattern that backtracks past a bound of steps (the pin's std::regex
//     recurses until its stack overflows). The stacks' store is rebuilt
//     from the live stacks as it grows, so that a long generation holds a
//     bounded store.
package grammar
