// Builds common_sampler_init's chain from key=value arguments over a
// vocab-only model, prints common_sampler_print, then samples rows of
// logits read from stdin (a count, then that many rows of n_vocab
// float32 values) as common_sampler_sample and common_sampler_accept do,
// printing for each row the selected index, the token and the candidates
// the chain left (id, logit bits, p bits).
#include "common.h"
#include "sampling.h"
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static std::vector<std::string> split(const std::string & s, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        size_t pos = s.find(sep, start);
        out.push_back(s.substr(start, pos - start));
        if (pos == std::string::npos) {
            return out;
        }
        start = pos + 1;
    }
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s model.gguf [key=value...]\n", argv[0]);
        return 2;
    }
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "load failed\n");
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    common_params_sampling p;
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        size_t eq = a.find('=');
        std::string k = a.substr(0, eq), v = a.substr(eq + 1);
        if (k == "seed") p.seed = std::stoul(v);
        else if (k == "n_prev") p.n_prev = std::stoi(v);
        else if (k == "min_keep") p.min_keep = std::stoi(v);
        else if (k == "top_k") p.top_k = std::stoi(v);
        else if (k == "top_p") p.top_p = std::stof(v);
        else if (k == "min_p") p.min_p = std::stof(v);
        else if (k == "xtc_probability") p.xtc_probability = std::stof(v);
        else if (k == "xtc_threshold") p.xtc_threshold = std::stof(v);
        else if (k == "typ_p") p.typ_p = std::stof(v);
        else if (k == "temp") p.temp = std::stof(v);
        else if (k == "dynatemp_range") p.dynatemp_range = std::stof(v);
        else if (k == "dynatemp_exponent") p.dynatemp_exponent = std::stof(v);
        else if (k == "penalty_last_n") p.penalty_last_n = std::stoi(v);
        else if (k == "penalty_repeat") p.penalty_repeat = std::stof(v);
        else if (k == "penalty_freq") p.penalty_freq = std::stof(v);
        else if (k == "penalty_present") p.penalty_present = std::stof(v);
        else if (k == "dry_multiplier") p.dry_multiplier = std::stof(v);
        else if (k == "dry_base") p.dry_base = std::stof(v);
        else if (k == "dry_allowed_length") p.dry_allowed_length = std::stoi(v);
        else if (k == "dry_penalty_last_n") p.dry_penalty_last_n = std::stoi(v);
        else if (k == "adaptive_target") p.adaptive_target = std::stof(v);
        else if (k == "adaptive_decay") p.adaptive_decay = std::stof(v);
        else if (k == "mirostat") p.mirostat = std::stoi(v);
        else if (k == "mirostat_tau") p.mirostat_tau = std::stof(v);
        else if (k == "mirostat_eta") p.mirostat_eta = std::stof(v);
        else if (k == "top_n_sigma") p.top_n_sigma = std::stof(v);
        else if (k == "samplers") p.samplers = common_sampler_types_from_names(split(v, ';'));
        else if (k == "sampling_seq") p.samplers = common_sampler_types_from_chars(v);
        else if (k == "bias") {
            auto parts = split(v, ':');
            p.logit_bias.push_back({std::stoi(parts[0]), std::stof(parts[1])});
        } else {
            fprintf(stderr, "unknown key %s\n", k.c_str());
            return 2;
        }
    }
    common_sampler * s = common_sampler_init(model, p);
    printf("%s\n", common_sampler_print(s).c_str());
    llama_sampler * chain = common_sampler_get(s);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    int rows = 0;
    if (fread(&rows, sizeof(rows), 1, stdin) != 1) {
        return 0;
    }
    std::vector<float> logits(n_vocab);
    std::vector<llama_token_data> cur(n_vocab);
    for (int r = 0; r < rows; r++) {
        if (fread(logits.data(), sizeof(float), n_vocab, stdin) != (size_t) n_vocab) {
            fprintf(stderr, "short input\n");
            return 1;
        }
        for (int i = 0; i < n_vocab; i++) {
            cur[i] = llama_token_data{i, logits[i], 0.0f};
        }
        llama_token_data_array arr = {cur.data(), cur.size(), -1, false};
        llama_sampler_apply(chain, &arr);
        llama_token id = arr.data[arr.selected].id;
        printf("%lld %d %zu %d\n", (long long) arr.selected, id, arr.size, arr.sorted ? 1 : 0);
        for (size_t i = 0; i < arr.size; i++) {
            uint32_t lb, pb;
            memcpy(&lb, &arr.data[i].logit, 4);
            memcpy(&pb, &arr.data[i].p, 4);
            printf("%d %08x %08x\n", arr.data[i].id, lb, pb);
        }
        common_sampler_accept(s, id, true);
    }
    common_sampler_free(s);
    llama_model_free(model);
    return 0;
}
