// The pin's chat code as an oracle for package chat's tests: requests on
// stdin, answers on stdout, as chatio.hpp frames them.
//
// apply: source, bos, eos, inputs JSON, n, then n replies (text,
//   partial "0"/"1"). Answers "ok" and the params (common_chat_params) or
//   "err" and what(); then per reply "ok" and the parsed message
//   (common_chat_parse with the params' parser) or "err" and what().
// msgs: an OpenAI messages JSON. Answers "ok", n and the messages
//   (common_chat_msgs_parse_oaicompat), or "err" and what().
// tools: an OpenAI tools JSON (common_chat_tools_parse_oaicompat).
// caps: source. Answers the caps of common_chat_templates_get_caps as
//   JSON, or "ERR" and what().
// single: source, bos, eos, past messages JSON, message JSON, add_ass,
//   use_jinja. Answers "ok" and common_chat_format_single's text, or
//   "err".
// oaijson: a message JSON (chatio's), concat. Answers to_json_oaicompat's
//   dump, or "err".
// bench: source, bos, eos, inputs JSON, n, mode. Times n
//   common_chat_templates_apply calls on the cached templates (mode
//   "apply"), or n common_chat_templates_init and apply (mode "init").
//   Answers "ok" and the nanoseconds they took, or "err".
// init: source. Answers "ok", or "err" and what() of the exception
//   common_chat_template's constructor raised: the message
//   common_chat_templates_init logs (it rethrows a copy sliced to
//   std::exception, whose what() is "std::exception").
// diff: previous and current message JSON. Answers "ok", n and the diffs
//   (reasoning, content, index or "-", name, arguments, id), or "err".

#include "chatio.hpp"
#include "log.h"

#include <chrono>
#include <map>
#include <memory>
#include <tuple>

static FILE * out = stdout;

static void ok() { chatio_write(out, "ok"); }

static void err(const std::string & what) {
    chatio_write(out, "err");
    chatio_write(out, what);
}

static std::map<std::tuple<std::string, std::string, std::string>, common_chat_templates_ptr> cache;

static common_chat_templates * templates(const std::string & src, const std::string & bos, const std::string & eos) {
    auto key = std::make_tuple(src, bos, eos);
    auto it  = cache.find(key);
    if (it == cache.end()) {
        it = cache.emplace(key, common_chat_templates_init(nullptr, src, bos, eos)).first;
    }
    return it->second.get();
}

static void apply() {
    std::string src, bos, eos, inputs, n;
    chatio_read(stdin, src);
    chatio_read(stdin, bos);
    chatio_read(stdin, eos);
    chatio_read(stdin, inputs);
    chatio_read(stdin, n);
    std::vector<std::pair<std::string, bool>> replies;
    for (int i = 0; i < std::stoi(n); i++) {
        std::string text, partial;
        chatio_read(stdin, text);
        chatio_read(stdin, partial);
        replies.push_back({ text, partial == "1" });
    }
    common_chat_params params;
    try {
        auto in = chatio_inputs_from_json(common_json::parse(inputs));
        params  = common_chat_templates_apply(templates(src, bos, eos), in);
    } catch (const std::exception & e) {
        err(e.what());
        for (size_t i = 0; i < replies.size(); i++) {
            err("no params");
        }
        return;
    }
    ok();
    chatio_write_params(out, params);
    common_chat_parser_params pp(params);
    try {
        if (!params.parser.empty()) {
            pp.parser.load(params.parser);
        }
    } catch (const std::exception & e) {
        for (size_t i = 0; i < replies.size(); i++) {
            err(std::string("load: ") + e.what());
        }
        return;
    }
    for (const auto & [text, partial] : replies) {
        try {
            auto msg = common_chat_parse(text, partial, pp);
            ok();
            chatio_write_msg(out, msg);
        } catch (const std::exception & e) {
            err(e.what());
        }
    }
}

static void msgs() {
    std::string j;
    chatio_read(stdin, j);
    try {
        auto ms = common_chat_msgs_parse_oaicompat(common_json::parse(j));
        ok();
        chatio_write(out, std::to_string(ms.size()));
        for (const auto & m : ms) {
            chatio_write_msg(out, m);
        }
    } catch (const std::exception & e) {
        err(e.what());
    }
}

static void tools() {
    std::string j;
    chatio_read(stdin, j);
    try {
        auto ts = common_chat_tools_parse_oaicompat(common_json::parse(j));
        ok();
        chatio_write(out, std::to_string(ts.size()));
        for (const auto & t : ts) {
            chatio_write(out, t.name);
            chatio_write(out, t.description);
            chatio_write(out, t.parameters);
        }
    } catch (const std::exception & e) {
        err(e.what());
    }
}

static void caps() {
    std::string src;
    chatio_read(stdin, src);
    try {
        auto tmpls = common_chat_templates_init(nullptr, src);
        common_json j = common_json::object();
        for (const auto & [k, v] : common_chat_templates_get_caps(tmpls.get())) {
            j[k] = v;
        }
        chatio_write(out, j.dump());
    } catch (const std::exception & e) {
        chatio_write(out, "ERR");
        chatio_write(out, e.what());
    }
}

static void single() {
    std::string src, bos, eos, past, msg, add_ass, use_jinja;
    chatio_read(stdin, src);
    chatio_read(stdin, bos);
    chatio_read(stdin, eos);
    chatio_read(stdin, past);
    chatio_read(stdin, msg);
    chatio_read(stdin, add_ass);
    chatio_read(stdin, use_jinja);
    try {
        std::vector<common_chat_msg> pm;
        for (const auto & m : common_json::parse(past)) {
            pm.push_back(chatio_msg_from_json(m));
        }
        auto s = common_chat_format_single(templates(src, bos, eos), pm, chatio_msg_from_json(common_json::parse(msg)),
                                           add_ass == "1", use_jinja == "1");
        ok();
        chatio_write(out, s);
    } catch (const std::exception & e) {
        err(e.what());
    }
}

static void oaijson() {
    std::string msg, concat;
    chatio_read(stdin, msg);
    chatio_read(stdin, concat);
    try {
        auto m = chatio_msg_from_json(common_json::parse(msg));
        auto j = m.to_json_oaicompat(concat == "1").dump();
        ok();
        chatio_write(out, j);
    } catch (const std::exception & e) {
        err(e.what());
    }
}

static void diff() {
    std::string prv, cur;
    chatio_read(stdin, prv);
    chatio_read(stdin, cur);
    try {
        auto ds = common_chat_msg_diff::compute_diffs(chatio_msg_from_json(common_json::parse(prv)),
                                                      chatio_msg_from_json(common_json::parse(cur)));
        ok();
        chatio_write(out, std::to_string(ds.size()));
        for (const auto & d : ds) {
            chatio_write(out, d.reasoning_content_delta);
            chatio_write(out, d.content_delta);
            chatio_write(out, d.tool_call_index == std::string::npos ? "-" : std::to_string(d.tool_call_index));
            chatio_write(out, d.tool_call_delta.name);
            chatio_write(out, d.tool_call_delta.arguments);
            chatio_write(out, d.tool_call_delta.id);
        }
    } catch (const std::exception & e) {
        err(e.what());
    }
}

static void init() {
    std::string src;
    chatio_read(stdin, src);
    try {
        common_chat_template t(src, "<s>", "</s>");
        ok();
    } catch (const std::exception & e) {
        err(e.what());
    }
}

static void bench() {
    std::string src, bos, eos, inputs, n, mode;
    chatio_read(stdin, src);
    chatio_read(stdin, bos);
    chatio_read(stdin, eos);
    chatio_read(stdin, inputs);
    chatio_read(stdin, n);
    chatio_read(stdin, mode);
    try {
        auto in   = chatio_inputs_from_json(common_json::parse(inputs));
        auto * t  = templates(src, bos, eos);
        size_t sz = 0;
        auto t0   = std::chrono::steady_clock::now();
        for (int i = 0; i < std::stoi(n); i++) {
            if (mode == "init") {
                auto fresh = common_chat_templates_init(nullptr, src, bos, eos);
                sz += common_chat_templates_apply(fresh.get(), in).prompt.size();
            } else {
                sz += common_chat_templates_apply(t, in).prompt.size();
            }
        }
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
        ok();
        chatio_write(out, std::to_string(ns));
        (void) sz;
    } catch (const std::exception & e) {
        err(e.what());
    }
}

int main() {
    common_log_set_verbosity_thold(-1);
    std::string op;
    while (chatio_read(stdin, op)) {
        if (op == "apply") {
            apply();
        } else if (op == "msgs") {
            msgs();
        } else if (op == "tools") {
            tools();
        } else if (op == "caps") {
            caps();
        } else if (op == "single") {
            single();
        } else if (op == "oaijson") {
            oaijson();
        } else if (op == "diff") {
            diff();
        } else if (op == "init") {
            init();
        } else if (op == "bench") {
            bench();
        } else {
            std::fprintf(stderr, "oracle: unknown op %s\n", op.c_str());
            return 1;
        }
        std::fflush(out);
    }
    return 0;
}
