// llama-server's reading of a chat completion request
// (oaicompat_chat_params_parse, tools/server/server-common.cpp) as an
// oracle: requests on stdin, answers on stdout, as chatio.hpp frames them.
//
// A request: source, bos, eos, the request body JSON, the options JSON
// {"use_jinja", "prefill_assistant", "reasoning_format", "reasoning"
// (-1, 0, 1 as --reasoning auto, off, on), "kwargs" {name: JSON text},
// "force_pure_content"}. Answers "ok" and the llama_params JSON, or "err"
// and what().

#include "chatio.hpp"
#include "log.h"
#include "server-common.h"


int main() {
    common_log_set_verbosity_thold(-1);
    std::string src, bos, eos, body, opts;
    while (chatio_read(stdin, src) && chatio_read(stdin, bos) && chatio_read(stdin, eos) && chatio_read(stdin, body) &&
           chatio_read(stdin, opts)) {
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
            p.tmpls       = common_chat_templates_init(nullptr, src, bos, eos);
            p.allow_image = p.allow_audio = p.allow_video = false;
            p.enable_thinking =
                reasoning != 0 && p.use_jinja && common_chat_templates_support_enable_thinking(p.tmpls.get());
            p.force_pure_content = o.value("force_pure_content", false);
            auto                    j = common_json::parse(body);
            std::vector<raw_buffer> files;
            auto                    out = oaicompat_chat_params_parse(j, p, files);
            chatio_write(stdout, "ok");
            chatio_write(stdout, out.dump());
        } catch (const std::exception & e) {
            chatio_write(stdout, "err");
            chatio_write(stdout, e.what());
        }
        std::fflush(stdout);
    }
    return 0;
}
