// The pin's test conversations, as contexts for each template: the Go test
// puts before this file the messages and tools that tests/test-chat.cpp
// defines (taken from it as they are), and the list of their names
// (CHAT_MESSAGES, CHAT_TOOLS). For every template and conversation it
// writes the context the pin's chat code gives its Jinja engine
// (common_chat_template_direct_apply_impl): the messages as
// to_json_oaicompat writes them, normalized to the template's content
// capabilities and with the chat code's workarounds, the tools as common_chat_tools_to_json_oaicompat writes
// them, the tokens, enable_thinking, the extra context and
// add_generation_prompt.
//
// stdin: a JSON object {"templates": [{"name", "path", "bos", "eos"}],
// "conversations": [{"name", "messages", "tools", "add_generation_prompt",
// "enable_thinking", "kwargs"}]} (messages in the OpenAI shape; tools a
// boolean: the test tools or none).
// stdout: fields "<length>\n<bytes>": template name, case name, context
// JSON, preserve ("", "0", "1"), effort ("" or "=effort"); per template
// first a case named "" whose context is the caps (or "ERR"). With the
// argument "apply": records "CTX", template name, context JSON, mark input,
// preserve, effort, one for each render of the chat code's (see
// drive_apply); the spec's "apply" lists the conversations to drive (all
// when absent).

static void out_field(const std::string & s) {
    std::printf("%zu\n", s.size());
    std::fwrite(s.data(), 1, s.size(), stdout);
}

// "apply" mode: every context the pin's chat code (common_chat_templates_apply,
// the auto-parser's analysis) hands its engine is written out. The program
// is linked with -rdynamic, so that these definitions stand in for
// libllama-common's own (its calls go through the PLT), and they call
// libllama-common's after noting their arguments.
static bool                                     g_log = false;
static std::string                              g_template;
static std::map<const void *, std::pair<std::string, std::string>> g_pending; // preserve, effort by context

namespace jinja {
template <> void global_from_json<common_json>(context & ctx, const common_json & j, bool mark) {
    using fn_t     = void (*)(context &, const common_json &, bool);
    static fn_t orig = (fn_t) dlsym(RTLD_NEXT, "_ZN5jinja16global_from_jsonI11common_jsonEEvRNS_7contextERKT_b");
    if (g_log && !ctx.is_get_stats) {
        auto p = g_pending[&ctx];
        g_pending.erase(&ctx);
        out_field("CTX");
        out_field(g_template);
        out_field(j.dump_safe());
        out_field(mark ? "1" : "0");
        out_field(p.first);
        out_field(p.second);
    }
    orig(ctx, j, mark);
}

void caps_apply_preserve_reasoning(context & ctx, bool enabled) {
    using fn_t     = void (*)(context &, bool);
    static fn_t orig = (fn_t) dlsym(RTLD_NEXT, "_ZN5jinja29caps_apply_preserve_reasoningERNS_7contextEb");
    if (g_log && !ctx.is_get_stats) {
        g_pending[&ctx].first = enabled ? "1" : "0";
    }
    orig(ctx, enabled);
}

void caps_apply_reasoning_effort(context & ctx, const std::string & effort) {
    using fn_t     = void (*)(context &, const std::string &);
    static fn_t orig = (fn_t) dlsym(
        RTLD_NEXT, "_ZN5jinja27caps_apply_reasoning_effortERNS_7contextERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");
    if (g_log && !ctx.is_get_stats) {
        g_pending[&ctx].second = "=" + effort;
    }
    orig(ctx, effort);
}
}  // namespace jinja

struct conversation;
static void drive_apply(const json & spec, const std::vector<conversation> & convs, const std::vector<common_chat_tool> & tools);

struct conversation {
    std::string                  name;
    std::vector<common_chat_msg> msgs;
    bool                         with_tools      = false;
    bool                         add_gen         = true;
    bool                         enable_thinking = true;
    json                         kwargs          = json::object();
};

// messages_inp_normalizer, as the pin's chat.cpp normalizes content
static json normalize_messages(const json & messages, const jinja::caps & caps) {
    bool only_string = caps.supports_string_content && !caps.supports_typed_content;
    bool only_typed  = !caps.supports_string_content && caps.supports_typed_content;
    if (!only_string && !only_typed) {
        return messages;
    }
    json out = json::array();
    for (const auto & msg : messages) {
        json copy = msg;
        if (copy.contains("content")) {
            json & c = copy.at("content");
            if (only_typed && c.is_string()) {
                c = json::array({ json{ { "type", "text" }, { "text", c.get<std::string>() } } });
            } else if (only_string && c.is_array()) {
                std::string text;
                bool        last_media = false;
                for (const auto & part : c) {
                    std::string type = part.value("type", "");
                    bool        nl   = true;
                    if (type == "text") {
                        nl         = !last_media && !text.empty();
                        last_media = false;
                    } else if (type == "media_marker") {
                        nl         = false;
                        last_media = true;
                    } else {
                        continue;
                    }
                    if (nl) {
                        text += '\n';
                    }
                    text += part.value("text", "");
                }
                c = text;
            }
        }
        out.push_back(std::move(copy));
    }
    return out;
}

// the workarounds the pin's chat code applies to the messages before it
// renders them (common_chat_templates_apply_jinja), written for this
// harness: developer as system, the system message merged into the next
// where the template has no system role, empty content beside tool calls,
// arguments as objects where the template reads them so
static void apply_workarounds(json & messages, const std::string & src, const jinja::caps & caps) {
    if (src.find("<|channel|>") == std::string::npos) {
        for (auto & m : messages) {
            if (m.contains("role") && m["role"] == "developer") {
                m["role"] = "system";
            }
        }
    }
    if (!caps.supports_system_role && !messages.empty() && messages.front().at("role") == "system") {
        if (messages.size() > 1 && messages[0].at("content").is_string() && messages[1].at("content").is_string()) {
            messages[1]["content"] = messages[0].at("content").get<std::string>() + "\n" +
                                     messages[1].at("content").get<std::string>();
        }
        messages.erase(0);
    }
    if (caps.supports_tool_calls) {
        for (auto & m : messages) {
            if (m.contains("tool_calls") && !m.contains("content")) {
                m["content"] = "";
            }
        }
    }
    if (caps.supports_object_arguments) {
        for (auto & m : messages) {
            if (!m.contains("tool_calls")) {
                continue;
            }
            for (auto & tc : m["tool_calls"]) {
                if (tc.contains("function") && tc["function"].contains("arguments") && tc["function"]["arguments"].is_string()) {
                    try {
                        tc["function"]["arguments"] = json::parse(tc["function"]["arguments"].get<std::string>());
                    } catch (const std::exception &) {
                        // the pin fails the render here; the engine is what is tested
                    }
                }
            }
        }
    }
}

static common_chat_msg role_msg(const std::string & role, const std::string & content) {
    common_chat_msg m;
    m.role    = role;
    m.content = content;
    return m;
}

int main(int argc, char ** argv) {
    bool        apply = argc > 1 && std::string(argv[1]) == "apply";
    std::string spec_text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    json        spec = json::parse(spec_text);

    // the system and tool messages of test_template_generation_prompt
    common_chat_msg system_msg = role_msg("system", "You are a helpful assistant.");
    common_chat_msg tool_msg   = role_msg("tool", "Sunny");
    tool_msg.tool_name         = "special_function";
    tool_msg.tool_call_id      = "call0";
    common_chat_msg tool_msg9  = tool_msg; // answers message_assist_call_id
    tool_msg9.tool_call_id     = "123456789";

    std::vector<conversation> convs;
    convs.push_back({ "user", { message_user } });
    convs.push_back({ "user_parts", { message_user_parts } });
    convs.push_back({ "system_user", { system_msg, message_user } });
    convs.push_back({ "user_no_thinking", { message_user }, false, true, false });
    convs.push_back({ "user_tools", { message_user }, true });
    for (const auto & [name, msg] : std::vector<std::pair<std::string, const common_chat_msg *>>{ CHAT_MESSAGES }) {
        if (msg->role != "assistant") {
            continue;
        }
        convs.push_back({ "user+" + name, { message_user, *msg }, !msg->tool_calls.empty(), false });
    }
    convs.push_back({ "tool_round", { system_msg, message_user, message_assist_call, tool_msg, message_assist }, true });
    convs.push_back({ "effort", { message_user }, false, true, true, json{ { "reasoning_effort", "high" } } });
    convs.push_back({ "preserve",
                      { message_user, message_assist_thoughts, message_user, message_assist_thoughts, message_user },
                      false, true, true, json{ { "preserve_reasoning", true } } });
    {
        // 32 messages with tools: the benchmark's conversation
        conversation c{ "bench32", { system_msg }, true };
        while (c.msgs.size() + 4 <= 32) {
            c.msgs.push_back(message_user);
            c.msgs.push_back(message_assist_call_id);
            c.msgs.push_back(tool_msg9);
            c.msgs.push_back(message_assist_thoughts);
        }
        while (c.msgs.size() < 32) {
            c.msgs.push_back(c.msgs.size() % 2 ? message_user : message_assist);
        }
        convs.push_back(c);
    }
    for (const auto & x : spec.value("conversations", json::array())) {
        conversation c{ x.at("name").get<std::string>(), common_chat_msgs_parse_oaicompat(x.at("messages")) };
        c.with_tools      = x.value("tools", false);
        c.add_gen         = x.value("add_generation_prompt", true);
        c.enable_thinking = x.value("enable_thinking", true);
        c.kwargs          = x.value("kwargs", json::object());
        convs.push_back(c);
    }

    std::vector<common_chat_tool> all_tools{ CHAT_TOOLS };
    json tools_json = common_chat_tools_to_json_oaicompat(all_tools);
    if (apply) {
        drive_apply(spec, convs, all_tools);
        return 0;
    }

    for (const auto & t : spec.at("templates")) {
        std::string name = t.at("name"), path = t.at("path");
        std::ifstream f(path);
        std::string src((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        std::unique_ptr<common_chat_template> tmpl;
        try {
            tmpl = std::make_unique<common_chat_template>(src, t.at("bos").get<std::string>(), t.at("eos").get<std::string>());
        } catch (const std::exception & e) {
            out_field(name); out_field(""); out_field("ERR"); out_field(""); out_field("");
            continue;
        }
        json caps = json::object();
        for (const auto & [k, v] : tmpl->original_caps().to_map()) {
            caps[k] = v;
        }
        out_field(name); out_field(""); out_field(caps.dump()); out_field(""); out_field("");
        for (const auto & c : convs) {
            json msgs = json::array();
            for (const auto & m : c.msgs) {
                msgs.push_back(m.to_json_oaicompat(false));
            }
            json messages = normalize_messages(msgs, tmpl->original_caps());
            apply_workarounds(messages, tmpl->source(), tmpl->original_caps());
            json inp = json{
                { "messages", messages },
                { "bos_token", tmpl->bos_token() },
                { "eos_token", tmpl->eos_token() },
                { "enable_thinking", c.enable_thinking },
            };
            if (c.with_tools) {
                inp["tools"] = tools_json;
            }
            inp["datetime"]    = "Jul 26 2025";
            inp["date_string"] = "26 Jul 2025";
            for (const auto & [k, v] : c.kwargs.items()) {
                inp[k] = v;
            }
            if (c.add_gen) {
                inp["add_generation_prompt"] = true;
            }
            std::string preserve, effort;
            if (inp.contains("preserve_reasoning") && inp["preserve_reasoning"].is_boolean()) {
                preserve = inp["preserve_reasoning"].get<bool>() ? "1" : "0";
            }
            if (inp.contains("reasoning_effort") && inp["reasoning_effort"].is_string() && !inp["reasoning_effort"].empty()) {
                effort = "=" + inp["reasoning_effort"].get<std::string>();
            }
            out_field(name);
            out_field(c.name);
            out_field(inp.dump());
            out_field(preserve);
            out_field(effort);
        }
    }
    return 0;
}

// drive_apply runs common_chat_templates_apply for every template and
// conversation (the contexts are written by the stand-ins above).
static void drive_apply(const json & spec, const std::vector<conversation> & convs, const std::vector<common_chat_tool> & tools) {
    for (const auto & t : spec.at("templates")) {
        std::string   name = t.at("name"), path = t.at("path");
        std::ifstream f(path);
        std::string   src((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        g_template = name;
        common_chat_templates_ptr tmpls;
        try {
            tmpls = common_chat_templates_init(nullptr, src, t.at("bos").get<std::string>(), t.at("eos").get<std::string>());
        } catch (const std::exception &) {
            continue;
        }
        std::set<std::string> only;
        for (const auto & n : spec.value("apply", json::array())) {
            only.insert(n.get<std::string>());
        }
        for (const auto & c : convs) {
            if (!only.empty() && !only.count(c.name)) {
                continue;
            }
            common_chat_templates_inputs inputs;
            inputs.messages              = c.msgs;
            inputs.add_generation_prompt = c.add_gen;
            inputs.enable_thinking       = c.enable_thinking;
            inputs.reasoning_format      = COMMON_REASONING_FORMAT_AUTO;
            if (c.with_tools) {
                inputs.tools               = tools;
                inputs.parallel_tool_calls = true;
            }
            for (const auto & [k, v] : c.kwargs.items()) {
                inputs.chat_template_kwargs[k] = v.dump();
            }
            g_log = true;
            try {
                common_chat_templates_apply(tmpls.get(), inputs);
            } catch (const std::exception &) {
                // the template refuses the conversation: its contexts are written
            }
            g_log = false;
        }
    }
}
