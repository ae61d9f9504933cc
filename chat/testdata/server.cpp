// llama-server's reading of a chat completion request
// (oaicompat_chat_params_parse, tools/server/server-common.cpp) as an
// oracle: requests on stdin, answers on stdout, as chatio.hpp frames them.
//
// A request: source, bos, eos, the request body JSON, the options JSON
// {"use_jinja", "prefill_assistant", "reasoning_format", "reasoning"
// (-1, 0, 1 as --reasoning auto, off, on), "kwargs" {name: JSON text},
// "force_pure_content"}, n and n replies. A source "@PATH" is the model
// at PATH (its vocabulary alone loaded): its templates, its tokens. Answers
// "ok" and the llama_params JSON, or "err" and what(); then per reply
// "ok" and the parsed message's to_json_oaicompat, or "err" and what()
// (with llama_params' chat_format, generation_prompt and chat_parser, as
// llama-server parses a reply).

#include "chatio.hpp"
#include "log.h"
#include "server-common.h"
#include "llama.h"


int main() {
    common_log_set_verbosity_thold(-1);
    std::string src, bos, eos, body, opts, n;
    while (chatio_read(stdin, src) && chatio_read(stdin, bos) && chatio_read(stdin, eos) && chatio_read(stdin, body) &&
           chatio_read(stdin, opts) && chatio_read(stdin, n)) {
        std::vector<std::string> replies(std::stoi(n));
        for (auto & r : replies) {
            chatio_read(stdin, r);
        }
        common_json out;
        try {
            auto o = common_json::parse(opts);
            server_chat_params p;
            p.use_jinja         = o.value("use_jinja", true);
            p.prefill_assistant = o.value("prefill_assistant", true);
            p.reasoning_format  = (common_reasoning_format) o.value("reasoning_format", 3);
            int reasoning       = o.value("reasoning", -1);
            if (reasoning == 1) {
                p.chat_template_kwargs["enable_thinking"] = "true";
            } else if (reasoning == 0) {
                p.chat_template_kwargs["enable_thinking"] = "false";
            }
            for (const auto & [k, v] : o.at("kwargs").items()) {
                p.chat_template_kwargs[k] = v.get<std::string>();
            }
            if (!p.chat_template_kwargs.count("preserve_reasoning")) {
                p.chat_template_kwargs["preserve_reasoning"] = "true";
            }
            if (!src.empty() && src[0] == '@') {
                auto mp       = llama_model_default_params();
                mp.vocab_only = true;
                llama_model * model = llama_model_load_from_file(src.substr(1).c_str(), mp);
                if (!model) {
                    throw std::runtime_error("cannot load " + src.substr(1));
                }
                p.tmpls = common_chat_templates_init(model, "");
                llama_model_free(model);
            } else {
                p.tmpls = common_chat_templates_init(nullptr, src, bos, eos);
            }
            p.allow_image = p.allow_audio = p.allow_video = false;
            p.enable_thinking =
                reasoning != 0 && p.use_jinja && common_chat_templates_support_enable_thinking(p.tmpls.get());
            p.force_pure_content = o.value("force_pure_content", false);
            auto                    j = common_json::parse(body);
            std::vector<raw_buffer> files;
            out = oaicompat_chat_params_parse(j, p, files);
            chatio_write(stdout, "ok");
            chatio_write(stdout, out.dump());
        } catch (const std::exception & e) {
            chatio_write(stdout, "err");
            chatio_write(stdout, e.what());
            for (size_t i = 0; i < replies.size(); i++) {
                chatio_write(stdout, "err");
                chatio_write(stdout, "no params");
            }
            std::fflush(stdout);
            continue;
        }
        for (const auto & r : replies) {
            try {
                common_chat_parser_params pp;
                pp.format            = (common_chat_format) out.at("chat_format").get<int>();
                pp.generation_prompt = out.at("generation_prompt").get<std::string>();
                if (out.contains("chat_parser")) {
                    pp.parser.load(out.at("chat_parser").get<std::string>());
                }
                auto msg = common_chat_parse(r, false, pp).to_json_oaicompat().dump();
                chatio_write(stdout, "ok");
                chatio_write(stdout, msg);
            } catch (const std::exception & e) {
                chatio_write(stdout, "err");
                chatio_write(stdout, e.what());
            }
        }
        std::fflush(stdout);
    }
    return 0;
}
