// libllama's llama_chat_apply_template as an oracle for the Go port.
// Requests and answers are fields framed as "<length>\n<bytes>".
//
//   oracle apply    fields: template, messages (a JSON array of [role,
//                   content]), add_ass ("0", "1"); answer: the result code,
//                   the output
//   oracle names    prints llama_chat_builtin_templates, one a line
#include <cstdio>
#include <string>
#include <vector>

#include "json.h"
#include "llama.h"

using json = common_json;

static bool read_field(std::string & out) {
    std::string len;
    int         c;
    while ((c = std::getchar()) != EOF && c != '\n') {
        len.push_back((char) c);
    }
    if (c == EOF) {
        return false;
    }
    size_t n = std::stoull(len);
    out.resize(n);
    return n == 0 || std::fread(&out[0], 1, n, stdin) == n;
}

static void write_field(const std::string & s) {
    std::printf("%zu\n", s.size());
    std::fwrite(s.data(), 1, s.size(), stdout);
}

int main(int argc, char ** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "names") {
        std::vector<const char *> names(llama_chat_builtin_templates(nullptr, 0));
        llama_chat_builtin_templates(names.data(), names.size());
        for (auto * n : names) {
            std::printf("%s\n", n);
        }
        return 0;
    }
    if (mode != "apply") {
        std::fprintf(stderr, "usage: oracle apply|names\n");
        return 2;
    }
    std::string tmpl, msgs, add;
    while (read_field(tmpl) && read_field(msgs) && read_field(add)) {
        json                            m = json::parse(msgs);
        std::vector<std::string>        roles, contents;
        std::vector<llama_chat_message> chat;
        for (const auto & x : m) {
            roles.push_back(x.at(0).get<std::string>());
            contents.push_back(x.at(1).get<std::string>());
        }
        for (size_t i = 0; i < roles.size(); i++) {
            chat.push_back({ roles[i].c_str(), contents[i].c_str() });
        }
        int32_t     res = llama_chat_apply_template(tmpl.c_str(), chat.data(), chat.size(), add == "1", nullptr, 0);
        std::string out;
        if (res > 0) {
            std::vector<char> buf(res + 1);
            llama_chat_apply_template(tmpl.c_str(), chat.data(), chat.size(), add == "1", buf.data(), buf.size());
            out.assign(buf.data(), res);
        }
        write_field(std::to_string(res));
        write_field(out);
        std::fflush(stdout);
    }
    return 0;
}
