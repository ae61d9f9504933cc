// The oracle of package grammar's tests: the pin's libllama-common
// (json-schema.cpp, json-schema-to-grammar.cpp) and libllama
// (llama-grammar.cpp) as they ship. Reads records from stdin, each a kind
// byte, a length (decimal, then '\n') and that many bytes; writes one
// answer per record, each ending with "\n\x1e\n":
//   'j' schema: json_schema_to_grammar(parse(schema), true): "OK\n" +
//       grammar + "\x1f" + what it printed to stderr, or "ERR\n" + what()
//   'd' schema: common_chat_schema_from_json: "OK\n" + the nodes, or
//       "ERR\n" + what()
#include "json-schema-to-grammar.h"
#include "json-schema.h"
#include "../src/llama-grammar.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

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

int main() {
    std::ios::sync_with_stdio(false);
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
        } else {
            out = "?";
        }
        answer(out);
    }
    return 0;
}
