// How the chat tests' C++ programs and the Go tests speak: fields as
// "<length>\n<bytes>", inputs as JSON, messages and params field by field
// (so that any bytes pass). Shared by oracle.cpp and the pin's test-chat.cpp
// as the tests build it.
#pragma once

#include "chat.h"
#include "json.h"

#include <cstdio>
#include <ctime>
#include <string>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <vector>

// The clock, fixed: the pin's templates print the date (strftime_now, the
// chat code's datetime), read from clock_gettime and time(); these
// definitions in the program take the place of libc's for libllama-common
// too. CHAT_NOW names the second; unset, the clock runs.
static long long chatio_now() {
    static long long now = []() {
        const char * s = std::getenv("CHAT_NOW");
        return s ? std::atoll(s) : -1LL;
    }();
    return now;
}

extern "C" int clock_gettime(clockid_t clk, struct timespec * ts) {
    if (chatio_now() >= 0 && clk == CLOCK_REALTIME) {
        ts->tv_sec  = (time_t) chatio_now();
        ts->tv_nsec = 0;
        return 0;
    }
    return (int) syscall(SYS_clock_gettime, clk, ts);
}

extern "C" time_t time(time_t * t) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t) {
        *t = ts.tv_sec;
    }
    return ts.tv_sec;
}

static void chatio_write(FILE * out, const std::string & s) {
    std::fprintf(out, "%zu\n", s.size());
    std::fwrite(s.data(), 1, s.size(), out);
}

static bool chatio_read(FILE * in, std::string & s) {
    size_t n;
    if (std::fscanf(in, "%zu", &n) != 1 || std::fgetc(in) != '\n') {
        return false;
    }
    s.resize(n);
    return n == 0 || std::fread(&s[0], 1, n, in) == n;
}

static common_chat_msg chatio_msg_from_json(const common_json & j) {
    common_chat_msg m;
    m.role              = j.value("role", "");
    m.content           = j.value("content", "");
    m.reasoning_content = j.value("reasoning_content", "");
    m.tool_name         = j.value("tool_name", "");
    m.tool_call_id      = j.value("tool_call_id", "");
    if (j.contains("content_parts")) {
        for (const auto & p : j.at("content_parts")) {
            m.content_parts.push_back({ p.value("type", ""), p.value("text", "") });
        }
    }
    if (j.contains("tool_calls")) {
        for (const auto & c : j.at("tool_calls")) {
            m.tool_calls.push_back({ c.value("name", ""), c.value("arguments", ""), c.value("id", "") });
        }
    }
    return m;
}

static common_json chatio_msg_to_json(const common_chat_msg & m) {
    common_json parts = common_json::array();
    for (const auto & p : m.content_parts) {
        parts.push_back({ { "type", p.type }, { "text", p.text } });
    }
    common_json calls = common_json::array();
    for (const auto & c : m.tool_calls) {
        calls.push_back({ { "name", c.name }, { "arguments", c.arguments }, { "id", c.id } });
    }
    common_json j;
    j["role"]              = m.role;
    j["content"]           = m.content;
    j["content_parts"]     = parts;
    j["tool_calls"]        = calls;
    j["reasoning_content"] = m.reasoning_content;
    j["tool_name"]         = m.tool_name;
    j["tool_call_id"]      = m.tool_call_id;
    return j;
}

// a message field by field: any bytes
static void chatio_write_msg(FILE * out, const common_chat_msg & m) {
    chatio_write(out, m.role);
    chatio_write(out, m.content);
    chatio_write(out, std::to_string(m.content_parts.size()));
    for (const auto & p : m.content_parts) {
        chatio_write(out, p.type);
        chatio_write(out, p.text);
    }
    chatio_write(out, std::to_string(m.tool_calls.size()));
    for (const auto & c : m.tool_calls) {
        chatio_write(out, c.name);
        chatio_write(out, c.arguments);
        chatio_write(out, c.id);
    }
    chatio_write(out, m.reasoning_content);
    chatio_write(out, m.tool_name);
    chatio_write(out, m.tool_call_id);
}

static common_chat_templates_inputs chatio_inputs_from_json(const common_json & j) {
    common_chat_templates_inputs in;
    for (const auto & m : j.at("messages")) {
        in.messages.push_back(chatio_msg_from_json(m));
    }
    in.grammar                = j.value("grammar", "");
    in.json_schema            = j.value("json_schema", "");
    in.add_generation_prompt  = j.value("add_generation_prompt", true);
    in.continue_final_message = (common_chat_continuation) j.value("continue_final_message", 0);
    in.use_jinja              = j.value("use_jinja", true);
    if (j.contains("tools")) {
        for (const auto & t : j.at("tools")) {
            in.tools.push_back({ t.value("name", ""), t.value("description", ""), t.value("parameters", "") });
        }
    }
    in.tool_choice         = (common_chat_tool_choice) j.value("tool_choice", 0);
    in.parallel_tool_calls = j.value("parallel_tool_calls", false);
    in.reasoning_format    = (common_reasoning_format) j.value("reasoning_format", 0);
    in.enable_thinking     = j.value("enable_thinking", true);
    if (j.contains("chat_template_kwargs")) {
        for (const auto & [k, v] : j.at("chat_template_kwargs").items()) {
            in.chat_template_kwargs[k] = v.get<std::string>();
        }
    }
    in.force_pure_content = j.value("force_pure_content", false);
    return in;
}

static common_json chatio_inputs_to_json(const common_chat_templates_inputs & in) {
    common_json msgs = common_json::array();
    for (const auto & m : in.messages) {
        msgs.push_back(chatio_msg_to_json(m));
    }
    common_json tools = common_json::array();
    for (const auto & t : in.tools) {
        tools.push_back({ { "name", t.name }, { "description", t.description }, { "parameters", t.parameters } });
    }
    common_json kwargs = common_json::object();
    for (const auto & [k, v] : in.chat_template_kwargs) {
        kwargs[k] = v;
    }
    common_json j;
    j["messages"]               = msgs;
    j["grammar"]                = in.grammar;
    j["json_schema"]            = in.json_schema;
    j["add_generation_prompt"]  = in.add_generation_prompt;
    j["continue_final_message"] = (int) in.continue_final_message;
    j["use_jinja"]              = in.use_jinja;
    j["tools"]                  = tools;
    j["tool_choice"]            = (int) in.tool_choice;
    j["parallel_tool_calls"]    = in.parallel_tool_calls;
    j["reasoning_format"]       = (int) in.reasoning_format;
    j["enable_thinking"]        = in.enable_thinking;
    j["chat_template_kwargs"]   = kwargs;
    j["force_pure_content"]     = in.force_pure_content;
    return j;
}

static void chatio_write_strings(FILE * out, const std::vector<std::string> & v) {
    chatio_write(out, std::to_string(v.size()));
    for (const auto & s : v) {
        chatio_write(out, s);
    }
}

// common_chat_params field by field
static void chatio_write_params(FILE * out, const common_chat_params & p) {
    chatio_write(out, std::to_string((int) p.format));
    chatio_write(out, p.prompt);
    chatio_write(out, p.grammar);
    chatio_write(out, p.grammar_lazy ? "1" : "0");
    chatio_write(out, p.generation_prompt);
    chatio_write(out, p.supports_thinking ? "1" : "0");
    chatio_write(out, p.thinking_start_tag);
    chatio_write_strings(out, p.thinking_end_tags);
    chatio_write(out, std::to_string(p.grammar_triggers.size()));
    for (const auto & t : p.grammar_triggers) {
        chatio_write(out, std::to_string((int) t.type));
        chatio_write(out, t.value);
    }
    chatio_write_strings(out, p.preserved_tokens);
    chatio_write_strings(out, p.additional_stops);
    chatio_write(out, std::to_string(p.message_delimiters.delimiters.size()));
    for (const auto & d : p.message_delimiters.delimiters) {
        chatio_write(out, std::to_string((int) d.role));
        chatio_write(out, d.delimiter);
    }
    chatio_write(out, p.parser);
}
