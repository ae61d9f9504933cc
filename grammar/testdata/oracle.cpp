// The oracle of package grammar's tests: the pin's libllama-common
// (json-schema.cpp, json-schema-to-grammar.cpp) and libllama
// (llama-grammar.cpp) as they ship. Reads records from stdin, each a kind
// byte, a length (decimal, then '\n') and that many bytes; writes one
// answer per record, each ending with "\n\x1e\n":
//   'j' schema: json_schema_to_grammar(parse(schema), true): "OK\n" +
//       grammar + "\x1f" + what it printed to stderr, or "ERR\n" + what()
//   'd' schema: common_chat_schema_from_json: "OK\n" + the nodes, or
//       "ERR\n" + what()
//   'g' grammar: llama_grammar_parser::parse: "OK\n" + the symbols and
//       rules, or "ERR\n" + what it printed to stderr
//   'a' grammar \x1d item \x1d item ...: llama_grammar_init_impl without a
//       vocabulary, then llama_grammar_accept_token of each item ("t" and
//       a token id: the token, its piece "<[id]>"; "s" and bytes: token 0
//       with those bytes); the stacks after each, or where it throws,
//       "X " + what()
//   'm' grammar \x1d lazy \x1d patterns (\x1f between) \x1d trigger
//       tokens \x1d tokens (commas between): with the vocabulary of the
//       model argv[1], llama_grammar_init_impl, then for the start and
//       after each llama_grammar_accept_impl, the tokens
//       llama_grammar_apply_impl leaves (a count and a hash) and the
//       stacks; "ABORT" where the pin would abort (an end-of-generation
//       token the grammar cannot end at), "X " + what() where it throws
//   't' pattern \x1d text: llama_grammar_trigger_pattern::find: the
//       position, "npos", or "ERR" where std::regex refuses the pattern
#include "json-schema-to-grammar.h"
#include "json-schema.h"
#include "../src/llama-grammar.h"

#include "llama.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

static std::vector<std::string> split(const std::string & s, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        size_t i = s.find(sep, start);
        if (i == std::string::npos) {
            out.push_back(s.substr(start));
            return out;
        }
        out.push_back(s.substr(start, i - start));
        start = i + 1;
    }
}

static std::string dump_stacks(const llama_grammar & g) {
    std::string out = std::to_string(g.stacks.size()) + " stacks, partial " + std::to_string(g.partial_utf8.value) + "/" + std::to_string(g.partial_utf8.n_remain) + "\n";
    for (const auto & st : g.stacks) {
        for (const auto * e : st) {
            out += " " + std::to_string(e->type) + ":" + std::to_string(e->value);
        }
        out += "\n";
    }
    return out;
}

// with_stderr runs f with stderr captured, and returns what it printed
template <typename F>
static std::string with_stderr(F f) {
    char * buf = nullptr;
    size_t len = 0;
    FILE * saved = stderr;
    stderr = open_memstream(&buf, &len);
    f();
    fclose(stderr);
    stderr = saved;
    std::string out(buf, len);
    free(buf);
    return out;
}

static void answer(const std::string & s) { std::cout << s << "\n\x1e\n"; }

static void dump_node(std::string & out, const common_chat_schema * s, int depth) {
    std::string ind(depth * 2, ' ');
    if (!s) {
        out += ind + "null\n";
        return;
    }
    out += ind + common_chat_schema::kind_name(s->kind());
    switch (s->kind()) {
        case common_chat_schema::KIND_REF: {
            auto & r = static_cast<const common_chat_schema_ref &>(*s);
            out += " " + r.ref + " -> " + (r.target ? common_chat_schema::kind_name(r.target->kind()) : "null") + "\n";
            return;
        }
        case common_chat_schema::KIND_CONST:
            out += " " + static_cast<const common_chat_schema_const &>(*s).value.dump() + "\n";
            return;
        case common_chat_schema::KIND_ENUM:
            for (auto & v : static_cast<const common_chat_schema_enum &>(*s).values) {
                out += " " + v.dump();
            }
            out += "\n";
            return;
        case common_chat_schema::KIND_INTEGER: {
            auto & i = static_cast<const common_chat_schema_integer &>(*s);
            out += " " + std::to_string(i.minimum) + " " + std::to_string(i.maximum) + "\n";
            return;
        }
        case common_chat_schema::KIND_STRING: {
            auto & x = static_cast<const common_chat_schema_string &>(*s);
            out += " " + common_json(x.pattern).dump() + " " + std::to_string(x.format) + " " + std::to_string(x.min_length) + " " + std::to_string(x.max_length) + "\n";
            return;
        }
        case common_chat_schema::KIND_ANY_OF:
        case common_chat_schema::KIND_ALL_OF: {
            out += "\n";
            auto & c = s->kind() == common_chat_schema::KIND_ANY_OF ? static_cast<const common_chat_schema_any_of &>(*s).children : static_cast<const common_chat_schema_all_of &>(*s).children;
            for (auto & child : c) {
                dump_node(out, child.get(), depth + 1);
            }
            return;
        }
        case common_chat_schema::KIND_ARRAY: {
            auto & a = static_cast<const common_chat_schema_array &>(*s);
            out += " " + std::to_string(a.min_items) + " " + std::to_string(a.max_items) + "\n";
            dump_node(out, a.items.get(), depth + 1);
            return;
        }
        case common_chat_schema::KIND_TUPLE:
            out += "\n";
            for (auto & item : static_cast<const common_chat_schema_tuple &>(*s).items) {
                dump_node(out, item.get(), depth + 1);
            }
            return;
        case common_chat_schema::KIND_OBJECT: {
            auto & o = static_cast<const common_chat_schema_object &>(*s);
            out += "\n";
            for (auto & p : o.properties) {
                out += ind + "  property " + common_json(p.name).dump() + " " + (p.required ? "1" : "0") + "\n";
                dump_node(out, p.schema.get(), depth + 2);
            }
            out += ind + "  additional\n";
            dump_node(out, o.additional_properties.get(), depth + 2);
            return;
        }
        default:
            out += "\n";
    }
}

int main(int argc, char ** argv) {
    std::ios::sync_with_stdio(false);
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    const llama_vocab * vocab = nullptr;
    if (argc > 1) {
        llama_backend_init();
        auto mp = llama_model_default_params();
        mp.vocab_only = true;
        llama_model * model = llama_model_load_from_file(argv[1], mp);
        if (!model) {
            fprintf(stderr, "cannot load %s\n", argv[1]);
            return 1;
        }
        vocab = llama_model_get_vocab(model);
    }
    for (;;) {
        int kind = std::cin.get();
        if (kind == EOF) {
            break;
        }
        size_t n;
        std::cin >> n;
        std::cin.get();
        std::string data(n, '\0');
        std::cin.read(&data[0], n);
        std::string out;
        if (kind == 'j') {
            char * buf = nullptr;
            size_t len = 0;
            FILE * saved = stderr;
            stderr = open_memstream(&buf, &len);
            try {
                out = "OK\n" + json_schema_to_grammar(common_json::parse(data), true);
            } catch (const std::exception & e) {
                out = std::string("ERR\n") + e.what();
            }
            fclose(stderr);
            stderr = saved;
            if (out.rfind("OK\n", 0) == 0) {
                out += "\x1f" + std::string(buf, len);
            }
            free(buf);
        } else if (kind == 'd') {
            try {
                auto doc = common_chat_schema_from_json(common_json::parse(data));
                out = "OK\n";
                dump_node(out, doc.root.get(), 0);
                for (auto & r : doc.refs) {
                    out += "refs " + r.first + "\n";
                    dump_node(out, r.second.get(), 1);
                }
            } catch (const std::exception & e) {
                out = std::string("ERR\n") + e.what();
            }
        } else if (kind == 'g') {
            llama_grammar_parser parser;
            bool ok = false;
            std::string err = with_stderr([&] { ok = parser.parse(data.c_str()); });
            if (!ok) {
                out = "ERR\n" + err;
            } else {
                out = "OK\n";
                for (auto & kv : parser.symbol_ids) {
                    out += kv.first + "=" + std::to_string(kv.second) + "\n";
                }
                for (auto & r : parser.rules) {
                    for (auto & e : r) {
                        out += " " + std::to_string(e.type) + ":" + std::to_string(e.value);
                    }
                    out += "\n";
                }
            }
        } else if (kind == 'a') {
            auto items = split(data, '\x1d');
            llama_grammar * g = nullptr;
            with_stderr([&] { g = llama_grammar_init_impl(nullptr, items[0].c_str(), "root", false, nullptr, 0, nullptr, 0); });
            if (!g) {
                out = "ERR";
            } else {
                out = dump_stacks(*g);
                for (size_t i = 1; i < items.size(); i++) {
                    const auto & it = items[i];
                    try {
                        if (it[0] == 't') {
                            int id = std::stoi(it.substr(1));
                            llama_grammar_accept_token(*g, id, "<[" + std::to_string(id) + "]>");
                        } else {
                            llama_grammar_accept_token(*g, 0, it.substr(1));
                        }
                    } catch (const std::exception & e) {
                        out += std::string("X ") + e.what();
                        break;
                    }
                    out += dump_stacks(*g);
                }
                llama_grammar_free_impl(g);
            }
        } else if (kind == 'm') {
            auto f = split(data, '\x1d');
            std::vector<std::string> patterns = f[2].empty() ? std::vector<std::string>{} : split(f[2], '\x1f');
            std::vector<const char *> pc;
            for (auto & p : patterns) {
                pc.push_back(p.c_str());
            }
            std::vector<llama_token> trig;
            if (!f[3].empty()) {
                for (auto & t : split(f[3], ',')) {
                    trig.push_back(std::stoi(t));
                }
            }
            llama_grammar * g = nullptr;
            try {
                with_stderr([&] { g = llama_grammar_init_impl(vocab, f[0].c_str(), "root", f[1] == "1", pc.data(), pc.size(), trig.data(), trig.size()); });
            } catch (const std::exception & e) {
                out = std::string("ERR ") + e.what();
            }
            if (g) {
                const int n = llama_vocab_n_tokens(vocab);
                std::vector<llama_token_data> cur(n);
                auto step = [&] {
                    for (int i = 0; i < n; i++) {
                        cur[i] = {i, 0.0f, 0.0f};
                    }
                    llama_token_data_array arr = {cur.data(), cur.size(), -1, false};
                    llama_grammar_apply_impl(*g, &arr);
                    uint64_t h = 1469598103934665603ull;
                    int count = 0;
                    for (int i = 0; i < n; i++) {
                        if (cur[i].logit != -INFINITY) {
                            count++;
                            h = (h ^ (uint64_t) i) * 1099511628211ull;
                        }
                    }
                    out += "awaiting " + std::to_string(g->awaiting_trigger) + " allowed " + std::to_string(count) + " " + std::to_string(h) + "\n" + dump_stacks(*g);
                };
                step();
                std::vector<std::string> toks = f[4].empty() ? std::vector<std::string>{} : split(f[4], ',');
                for (auto & ts : toks) {
                    llama_token t = std::stoi(ts);
                    if (!g->awaiting_trigger && llama_vocab_is_eog(vocab, t)) {
                        bool can_end = false;
                        for (auto & st : g->stacks) {
                            can_end = can_end || st.empty();
                        }
                        if (!can_end) {
                            out += "ABORT";
                            break;
                        }
                    }
                    try {
                        llama_grammar_accept_impl(*g, t);
                    } catch (const std::exception & e) {
                        out += std::string("X ") + e.what();
                        break;
                    }
                    step();
                }
                llama_grammar_free_impl(g);
            } else if (out.empty()) {
                out = "ERR";
            }
        } else if (kind == 't') {
            auto f = split(data, '\x1d');
            try {
                llama_grammar_trigger_pattern tp;
                tp.pattern = f[0];
                tp.regex = std::regex(f[0]);
                size_t pos = tp.find(f[1]);
                out = pos == std::string::npos ? "npos" : std::to_string(pos);
            } catch (const std::regex_error & e) {
                out = "ERR";
            }
        } else {
            out = "?";
        }
        answer(out);
    }
    return 0;
}
