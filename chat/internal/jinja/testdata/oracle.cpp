// The pin's Jinja engine (libllama-common's jinja::*) as an oracle for the
// Go port.
// Requests and answers are fields framed as "<length>\n<bytes>".
//
//   oracle render   fields: template, context JSON, preserve ("", "0", "1"),
//                   effort ("" or "=effort"), now (seconds), source mode
//                   ("norm", "orig", "none"), mark input ("0", "1")
//                   answer: "OK" output parts | "ERR" message ""
//   oracle caps     fields: template; answer: "OK" caps-JSON | "ERR" message
//   oracle bench    fields: template, context JSON, milliseconds to run;
//                   answer: nanoseconds per render
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "json.h"
#include "jinja/caps.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"

using json = common_json;

static bool read_field(std::string & out) {
    std::string len;
    int c;
    while ((c = std::getchar()) != EOF && c != '\n') {
        len.push_back((char) c);
    }
    if (c == EOF) {
        return false;
    }
    size_t n = std::stoull(len);
    out.resize(n);
    if (n > 0 && std::fread(&out[0], 1, n, stdin) != n) {
        return false;
    }
    return true;
}

static void write_field(const std::string & s) {
    std::printf("%zu\n", s.size());
    std::fwrite(s.data(), 1, s.size(), stdout);
}

struct parsed {
    jinja::program prog;
    std::string    source;
};

static parsed parse(const std::string & tmpl) {
    jinja::lexer lexer;
    auto         res = lexer.tokenize(tmpl);
    parsed       p;
    p.prog   = jinja::parse_from_tokens(res);
    p.source = res.source;
    return p;
}

static std::string render_once(const parsed & p, const std::string & tmpl, const json & vars, const std::string & preserve,
                               const std::string & effort, long long now, const std::string & mode, bool mark,
                               std::string * parts_out) {
    std::string src = mode == "norm" ? p.source : mode == "orig" ? tmpl : std::string();
    jinja::context ctx(src);
    ctx.current_time = (std::time_t) now;
    if (!preserve.empty()) {
        jinja::caps_apply_preserve_reasoning(ctx, preserve == "1");
    }
    if (!effort.empty()) {
        jinja::caps_apply_reasoning_effort(ctx, effort.substr(1));
    }
    jinja::global_from_json(ctx, vars, mark);
    jinja::runtime runtime(ctx);
    const jinja::value results = runtime.execute(p.prog);
    auto parts = jinja::runtime::gather_string_parts(results);
    if (parts_out) {
        for (const auto & part : parts->as_string().parts) {
            *parts_out += part.is_input ? "I" : "T";
            *parts_out += std::to_string(part.val.size()) + ":" + part.val;
        }
    }
    return parts->as_string().str();
}

static void do_render() {
    std::string tmpl, vars, preserve, effort, now, mode, mark;
    while (read_field(tmpl) && read_field(vars) && read_field(preserve) && read_field(effort) && read_field(now) &&
           read_field(mode) && read_field(mark)) {
        try {
            parsed      p = parse(tmpl);
            std::string parts;
            std::string out = render_once(p, tmpl, json::parse(vars), preserve, effort, std::stoll(now), mode,
                                          mark == "1", &parts);
            write_field("OK");
            write_field(out);
            write_field(parts);
        } catch (const std::exception & e) {
            write_field("ERR");
            write_field(e.what());
            write_field("");
        } catch (...) {
            write_field("ERR");
            write_field("unknown exception");
            write_field("");
        }
        std::fflush(stdout);
    }
}

static void do_caps() {
    std::string tmpl;
    while (read_field(tmpl)) {
        try {
            parsed p = parse(tmpl);
            auto   c = jinja::caps_get(p.prog);
            json   m = json::object();
            for (const auto & [k, v] : c.to_map()) {
                m[k] = v;
            }
            write_field("OK");
            write_field(m.dump());
        } catch (const std::exception & e) {
            write_field("ERR");
            write_field(e.what());
        }
        std::fflush(stdout);
    }
}

static void do_bench() {
    std::string tmpl, vars, target_ms;
    while (read_field(tmpl) && read_field(vars) && read_field(target_ms)) {
        double target = std::stod(target_ms) * 1e6;
        try {
            parsed p = parse(tmpl);
            json   v = json::parse(vars);
            render_once(p, tmpl, v, "", "", 0, "norm", true, nullptr); // warm up
            for (long long n = 1;; n *= 2) {
                auto t0 = std::chrono::steady_clock::now();
                for (long long i = 0; i < n; i++) {
                    render_once(p, tmpl, v, "", "", 0, "norm", true, nullptr);
                }
                auto   t1 = std::chrono::steady_clock::now();
                double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
                if (ns >= target) {
                    write_field(std::to_string(ns / (double) n));
                    break;
                }
            }
        } catch (const std::exception & e) {
            write_field("ERR " + std::string(e.what()));
        }
        std::fflush(stdout);
    }
}

int main(int argc, char ** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "render") {
        do_render();
    } else if (mode == "caps") {
        do_caps();
    } else if (mode == "bench") {
        do_bench();
    } else {
        std::fprintf(stderr, "usage: oracle render|caps|bench\n");
        return 2;
    }
    return 0;
}
