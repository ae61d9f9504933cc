// Parses command lines with llama.cpp's own common_params_parse (as
// llama-completion does, LLAMA_EXAMPLE_COMPLETION) and prints what it
// leaves in common_params (with -m model.gguf, which it requires): "ok"
// and the values run's options set, or "refused" (the reason goes to
// stderr). One command line a line of stdin, its arguments separated by
// the byte 0x1f; each on fresh parameters (a
// --dry-sequence-breaker clears the defaults once per process, as the
// pin's static flag does, so give it first or alone).
#include "arg.h"
#include "common.h"
#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

static unsigned bits(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}

int main() {
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    std::string line;
    while (std::getline(std::cin, line)) {
        std::vector<std::string> args = {"llama-completion", "-m", "model.gguf"};
        size_t start = 0;
        for (;;) {
            size_t tab = line.find('\x1f', start);
            args.push_back(line.substr(start, tab - start));
            if (tab == std::string::npos) {
                break;
            }
            start = tab + 1;
        }
        std::vector<char *> argv;
        for (auto & a : args) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);
        common_params p;
        // (its reason goes to stderr)
        if (!common_params_parse((int) args.size(), argv.data(), p, LLAMA_EXAMPLE_COMPLETION)) {
            printf("refused\n");
            fflush(stdout);
            continue;
        }
        const auto & s = p.sampling;
        printf("ok seed=%u top_k=%d top_p=%08x min_p=%08x xtc_p=%08x xtc_t=%08x typ_p=%08x temp=%08x dyn_range=%08x dyn_exp=%08x"
               " last_n=%d n_prev=%d repeat=%08x freq=%08x present=%08x dry_mult=%08x dry_base=%08x dry_allowed=%d dry_last_n=%d"
               " adaptive_target=%08x adaptive_decay=%08x mirostat=%d sigma=%08x tau=%08x eta=%08x ignore_eos=%d"
               " n_predict=%d n_ctx=%d n_batch=%d n_ubatch=%d n_parallel=%d threads=%d",
               s.seed, s.top_k, bits(s.top_p), bits(s.min_p), bits(s.xtc_probability), bits(s.xtc_threshold), bits(s.typ_p),
               bits(s.temp), bits(s.dynatemp_range), bits(s.dynatemp_exponent), s.penalty_last_n, s.n_prev,
               bits(s.penalty_repeat), bits(s.penalty_freq), bits(s.penalty_present), bits(s.dry_multiplier), bits(s.dry_base),
               s.dry_allowed_length, s.dry_penalty_last_n, bits(s.adaptive_target), bits(s.adaptive_decay), s.mirostat,
               bits(s.top_n_sigma), bits(s.mirostat_tau), bits(s.mirostat_eta), s.ignore_eos ? 1 : 0,
               p.n_predict, p.n_ctx, p.n_batch, p.n_ubatch, p.n_parallel, p.cpuparams.n_threads);
        printf(" bias=");
        for (const auto & b : s.logit_bias) {
            printf("%d:%08x,", b.token, bits(b.bias));
        }
        printf(" samplers=");
        for (auto k : s.samplers) {
            printf("%d,", (int) k);
        }
        printf(" breakers=");
        for (const auto & b : s.dry_sequence_breakers) {
            for (unsigned char c : b) {
                printf("%02x", c);
            }
            printf(",");
        }
        printf("\n");
        fflush(stdout);
    }
    return 0;
}
