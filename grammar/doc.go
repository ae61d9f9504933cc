// Package grammar is llama.cpp's constrained output: the GBNF grammars of
// src/llama-grammar.cpp and the JSON-schema converter of
// common/json-schema.cpp and common/json-schema-to-grammar.cpp, giving
// the same grammar text, the same rules and the same accepted tokens as
// the pin.
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
// (BuildOptions.Warn).
//
// The converter is bounded where the pin is not: an allOf that leads back
// to itself (through its $refs' properties), where the pin recurses until
// its stack overflows, is an error; a grammar past MaxGrammarBytes (rule
// names grow with a schema's nesting) is an error; an object's optional
// properties cost linear work, not the pin's cubic (the grammar is the
// same).
package grammar
