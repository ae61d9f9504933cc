// Linked into the pin's PEG and autoparser tests (test-peg-parser.cpp,
// test-chat-peg-parser.cpp, test-chat-auto-parser.cpp), this takes the
// place of libllama-common's functions below (the program is linked with
// -rdynamic, so that the library's own calls come here too), records each
// call's inputs and what the library's function gave, and calls it.
// PEG_RECORD names the file, written as chatio.hpp frames fields; strings
// that repeat (arenas, inputs) are written once and then named by number.

#include "chatio.hpp"
#include "chat-auto-parser-helpers.h"
#include "chat-auto-parser.h"
#include "chat-peg-parser.h"
#include "json-schema-to-grammar.h"
#include "peg-parser.h"

#include <dlfcn.h>
#include <unordered_map>
#include <variant>

static FILE * rec() {
    static FILE * f = std::fopen(std::getenv("PEG_RECORD"), "wb");
    return f;
}

// intern writes s once, "S" and its number and bytes, and then names it
// by its number
static std::string intern(const std::string & s) {
    static std::unordered_map<std::string, size_t> ids;
    auto it = ids.find(s);
    if (it != ids.end()) {
        return std::to_string(it->second);
    }
    size_t id = ids.size();
    ids.emplace(s, id);
    chatio_write(rec(), "S");
    chatio_write(rec(), std::to_string(id));
    chatio_write(rec(), s);
    return std::to_string(id);
}

template <typename F> static F next(const char * name) {
    void * p = dlsym(RTLD_NEXT, name);
    if (!p) {
        std::fprintf(stderr, "pegrec: no %s\n", name);
        std::abort();
    }
    return (F) p;
}

// a parse's outcome and the AST nodes from base on
static void write_result(const common_peg_parse_result & r, const common_peg_ast_arena & ast, size_t base) {
    FILE * f = rec();
    chatio_write(f, std::to_string((int) r.type));
    chatio_write(f, std::to_string(r.start));
    chatio_write(f, std::to_string(r.end));
    chatio_write(f, std::to_string(r.nodes.size()));
    for (auto id : r.nodes) {
        chatio_write(f, std::to_string(id));
    }
    chatio_write(f, std::to_string(r.invalid_utf8.size()));
    for (const auto & iv : r.invalid_utf8) {
        chatio_write(f, std::to_string(iv.pos) + "," + std::to_string(iv.len));
    }
    chatio_write(f, std::to_string(ast.size() - base));
    for (size_t i = base; i < ast.size(); i++) {
        const auto & n = ast.get(i);
        chatio_write(f, n.rule);
        chatio_write(f, n.tag);
        chatio_write(f, std::to_string(n.start) + "," + std::to_string(n.end) + "," + (n.is_partial ? "1" : "0"));
        std::string ch;
        for (auto c : n.children) {
            ch += std::to_string(c) + ",";
        }
        chatio_write(f, ch);
        std::string iv;
        for (const auto & x : n.invalid_utf8) {
            iv += std::to_string(x.pos) + ":" + std::to_string(x.len) + ",";
        }
        chatio_write(f, iv);
    }
}

common_peg_parse_result common_peg_arena::parse(common_peg_parse_context & ctx, size_t start) const {
    using fn = common_peg_parse_result (*)(const common_peg_arena *, common_peg_parse_context &, size_t);
    static fn orig = next<fn>("_ZNK16common_peg_arena5parseER24common_peg_parse_contextm");
    std::string arena = intern(to_json().dump());
    std::string input = intern(ctx.input);
    size_t base = ctx.ast.size();
    FILE * f = rec();
    chatio_write(f, "parse");
    chatio_write(f, arena);
    chatio_write(f, input);
    chatio_write(f, std::to_string((int) ctx.flags));
    chatio_write(f, std::to_string(start));
    chatio_write(f, std::to_string(base));
    try {
        auto r = orig(this, ctx, start);
        chatio_write(f, "ok");
        write_result(r, ctx.ast, base);
        return r;
    } catch (const std::exception & e) {
        chatio_write(f, "err");
        chatio_write(f, e.what());
        throw;
    }
}

common_chat_msg common_chat_peg_parse(const common_peg_arena & a, const std::string & input, bool partial,
                                      const common_chat_parser_params & pp) {
    using fn = common_chat_msg (*)(const common_peg_arena &, const std::string &, bool, const common_chat_parser_params &);
    static fn orig = next<fn>("_Z21common_chat_peg_parseRK16common_peg_arenaRKNSt7__cxx1112basic_stringIcSt11char_"
                              "traitsIcESaIcEEEbRK25common_chat_parser_params");
    std::string arena = intern(a.to_json().dump());
    std::string in    = intern(input);
    FILE * f = rec();
    chatio_write(f, "chatparse");
    chatio_write(f, arena);
    chatio_write(f, in);
    chatio_write(f, partial ? "1" : "0");
    chatio_write(f, std::to_string((int) pp.format));
    chatio_write(f, pp.generation_prompt);
    try {
        auto m = orig(a, input, partial, pp);
        chatio_write(f, "ok");
        chatio_write_msg(f, m);
        return m;
    } catch (const std::exception & e) {
        chatio_write(f, "err");
        chatio_write(f, e.what());
        throw;
    }
}

// the arenas whose grammar the build_grammar under way builds
static std::vector<std::pair<std::string, bool>> g_arenas;
static bool g_schema = false;

void common_peg_arena::build_grammar(const common_grammar_builder & builder, bool lazy) const {
    using fn = void (*)(const common_peg_arena *, const common_grammar_builder &, bool);
    static fn orig = next<fn>("_ZNK16common_peg_arena13build_grammarERK22common_grammar_builderb");
    for (size_t i = 0; i < size(); i++) {
        if (auto s = std::get_if<common_peg_schema_parser>(&get(i)); s && s->node) {
            g_schema = true;
        }
    }
    g_arenas.push_back({ intern(to_json().dump()), lazy });
    orig(this, builder, lazy);
}

std::string build_grammar(const std::function<void(const common_grammar_builder &)> & cb, const common_grammar_options & options) {
    using fn = std::string (*)(const std::function<void(const common_grammar_builder &)> &, const common_grammar_options &);
    static fn orig = next<fn>("_Z13build_grammarB5cxx11RKSt8functionIFvRK22common_grammar_builderEERK22common_grammar_options");
    g_arenas.clear();
    g_schema = false;
    std::string out;
    std::string err;
    try {
        out = orig(cb, options);
    } catch (const std::exception & e) {
        err = e.what();
    }
    FILE * f = rec();
    chatio_write(f, "grammar");
    chatio_write(f, std::to_string(g_arenas.size()));
    for (const auto & [a, lazy] : g_arenas) {
        chatio_write(f, a);
        chatio_write(f, lazy ? "1" : "0");
    }
    chatio_write(f, g_schema ? "1" : "0");
    chatio_write(f, options.dotall ? "1" : "0");
    chatio_write(f, err.empty() ? "ok" : "err");
    chatio_write(f, err.empty() ? out : err);
    if (!err.empty()) {
        throw std::runtime_error(err);
    }
    return out;
}

diff_split calculate_diff_split(const std::string & left, const std::string & right) {
    using fn = diff_split (*)(const std::string &, const std::string &);
    static fn orig = next<fn>("_Z20calculate_diff_splitRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEES6_");
    auto r = orig(left, right);
    FILE * f = rec();
    chatio_write(f, "diffsplit");
    chatio_write(f, left);
    chatio_write(f, right);
    chatio_write(f, r.prefix);
    chatio_write(f, r.suffix);
    chatio_write(f, r.left);
    chatio_write(f, r.right);
    return r;
}

static std::string rec3(const char * op, const char * name, const std::string & full, const std::string & l,
                        const std::string & r) {
    using fn = std::string (*)(const std::string &, const std::string &, const std::string &);
    auto out = next<fn>(name)(full, l, r);
    FILE * f = rec();
    chatio_write(f, op);
    chatio_write(f, full);
    chatio_write(f, l);
    chatio_write(f, r);
    chatio_write(f, out);
    return out;
}

std::string until_common_prefix(const std::string & full, const std::string & left, const std::string & right) {
    return rec3("ucp", "_Z19until_common_prefixRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEES6_S6_", full, left, right);
}

std::string after_common_suffix(const std::string & full, const std::string & left, const std::string & right) {
    return rec3("acs", "_Z19after_common_suffixRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEES6_S6_", full, left, right);
}

std::vector<segment> segmentize_markers(const std::string & text) {
    using fn = std::vector<segment> (*)(const std::string &);
    static fn orig = next<fn>("_Z18segmentize_markersRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");
    auto out = orig(text);
    FILE * f = rec();
    chatio_write(f, "segments");
    chatio_write(f, text);
    chatio_write(f, std::to_string(out.size()));
    for (const auto & s : out) {
        chatio_write(f, s.type == segment_type::MARKER ? "M" : "T");
        chatio_write(f, s.value);
    }
    return out;
}

void autoparser::autoparser::analyze_template(const common_chat_template & tmpl) {
    using fn = void (*)(autoparser *, const common_chat_template &);
    static fn orig = next<fn>("_ZN10autoparser10autoparser16analyze_templateERK20common_chat_template");
    orig(this, tmpl);
    std::string src = intern(tmpl.source());
    FILE * f = rec();
    chatio_write(f, "analysis");
    chatio_write(f, src);
    const auto & r = reasoning;
    const auto & c = content;
    const auto & t = tools;
    std::vector<std::string> fields = {
        user_start, assistant_start,
        std::to_string((int) r.mode), r.start, r.end,
        std::to_string((int) c.mode), c.start, c.end, c.requires_nonnull_content ? "1" : "0",
        std::to_string((int) t.format.mode), t.format.section_start, t.format.section_end, t.format.per_call_start,
        t.format.per_call_end, t.format.fun_name_is_key ? "1" : "0", t.format.tools_array_wrapped ? "1" : "0",
        t.format.openai_wrapper_trigger ? "1" : "0", t.format.function_field, t.format.name_field, t.format.args_field,
        t.format.id_field, t.format.gen_id_field,
        t.function.name_prefix, t.function.name_suffix, t.function.args_separator, t.function.close,
        t.arguments.start, t.arguments.end, t.arguments.name_prefix, t.arguments.name_suffix, t.arguments.value_prefix,
        t.arguments.value_suffix, t.arguments.separator, t.arguments.tolerate_intertag_whitespace ? "1" : "0",
        std::to_string((int) t.call_id.pos), t.call_id.prefix, t.call_id.suffix,
    };
    chatio_write_strings(f, fields);
    chatio_write_strings(f, t.format.parameter_order);
    chatio_write_strings(f, preserved_tokens);
    chatio_write_strings(f, additional_stops);
}

// the mappers: the AST they read (every node, with its text), the
// result's nodes, and the message they made
static void rec_mapper(const char * kind, const common_peg_ast_arena & ast, const common_peg_parse_result & r,
                       const common_chat_msg & msg) {
    FILE * f = rec();
    chatio_write(f, "mapper");
    chatio_write(f, kind);
    chatio_write(f, std::to_string(ast.size()));
    for (size_t i = 0; i < ast.size(); i++) {
        const auto & n = ast.get(i);
        chatio_write(f, n.rule);
        chatio_write(f, n.tag);
        chatio_write(f, std::to_string(n.start));
        chatio_write(f, std::to_string(n.end));
        chatio_write(f, std::string(n.text));
        chatio_write(f, n.is_partial ? "1" : "0");
        chatio_write(f, std::to_string(n.children.size()));
        for (auto c : n.children) {
            chatio_write(f, std::to_string(c));
        }
        chatio_write(f, std::to_string(n.invalid_utf8.size()));
        for (const auto & x : n.invalid_utf8) {
            chatio_write(f, std::to_string(x.pos));
            chatio_write(f, std::to_string(x.len));
        }
    }
    chatio_write(f, std::to_string(r.nodes.size()));
    for (auto id : r.nodes) {
        chatio_write(f, std::to_string(id));
    }
    chatio_write_msg(f, msg);
}

#define MAPPER(cls, kind, sym)                                                                          \
    void cls::from_ast(const common_peg_ast_arena & ast, const common_peg_parse_result & r) {            \
        using fn = void (*)(cls *, const common_peg_ast_arena &, const common_peg_parse_result &);        \
        static fn orig = next<fn>(sym);                                                                   \
        orig(this, ast, r);                                                                               \
        rec_mapper(kind, ast, r, result);                                                                 \
    }

MAPPER(common_chat_peg_mapper, "base", "_ZN22common_chat_peg_mapper8from_astERK20common_peg_ast_arenaRK23common_peg_parse_result")
MAPPER(common_chat_peg_gemma4_mapper, "gemma4", "_ZN29common_chat_peg_gemma4_mapper8from_astERK20common_peg_ast_arenaRK23common_peg_parse_result")
MAPPER(common_chat_peg_minimax_m3_mapper, "minimax", "_ZN33common_chat_peg_minimax_m3_mapper8from_astERK20common_peg_ast_arenaRK23common_peg_parse_result")
