// The projector oracle: the pinned clip.cpp, compiled into this program,
// loads multimodal projector files as mtmd_init_from_file does, and the
// program prints where each tensor went, each weight buffer, and the memory
// that clip counts per device. It includes clip.cpp itself so that it can
// read the contexts clip builds.
//
//   mmproj-oracle serve             lines "USE_GPU DEVICE|- WARMUP PATH" on
//                                   stdin, one report each, ended by "END"
//   mmproj-oracle memory USE_GPU DEVICE|- MIN_TOKENS MAX_TOKENS PATH
//                                   mtmd_get_memory_usage's answer (image
//                                   tokens -1: the model's own)
//
// Report lines (fields separated by tabs):
//   CTX  modality projector backend
//   T    modality tensor buffer_type device nbytes
//   B    modality buffer buffer_type device size
//   W    modality device bytes      (weights, as clip counts them)
//   C    modality device bytes      (compute, after a warm-up)
//   E    modality n_mmproj_embd
//   A    name found               (each tensor name clip looked up, as it
//                                   asks: found is 0 or 1)
//   ERR  message
//   M    device bytes               (memory mode)
#include "clip.cpp"

#include <dlfcn.h>

#include <iostream>
#include <string>

// clip looks its tensors up by name: this definition stands in front of
// libggml's to report each name asked, found or not, as it is asked.
struct ggml_tensor * ggml_get_tensor(struct ggml_context * ctx, const char * name) {
    using fn = struct ggml_tensor * (*)(struct ggml_context *, const char *);
    static fn real = (fn) dlsym(RTLD_NEXT, "ggml_get_tensor");
    struct ggml_tensor * t = real(ctx, name);
    printf("A\t%s\t%d\n", name, t != nullptr);
    fflush(stdout);
    return t;
}

static std::string g_err;

static void capture_log(enum ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) {
        g_err += text;
    }
    if (std::getenv("MMPROJ_ORACLE_VERBOSE")) {
        fputs(text, stderr);
    }
}

static std::string one_line(std::string s) {
    for (auto & c : s) {
        if (c == '\n' || c == '\t') {
            c = ' ';
        }
    }
    while (!s.empty() && s.back() == ' ') {
        s.pop_back();
    }
    return s;
}

static bool find_device(const std::string & name, ggml_backend_dev_t & dev) {
    dev = nullptr;
    if (name == "-") {
        return true;
    }
    dev = ggml_backend_dev_by_name(name.c_str());
    return dev != nullptr;
}

static const char * dev_name(ggml_backend_dev_t dev) {
    return dev ? ggml_backend_dev_name(dev) : "-";
}

static void print_ctx(const char * modality, clip_ctx * ctx) {
    if (!ctx) {
        return;
    }
    printf("CTX\t%s\t%s\t%s\n", modality, PROJECTOR_TYPE_NAMES[ctx->model.proj_type].c_str(), ggml_backend_name(ctx->backend));
    if (ctx->ctx_data) {
        for (ggml_tensor * t = ggml_get_first_tensor(ctx->ctx_data.get()); t; t = ggml_get_next_tensor(ctx->ctx_data.get(), t)) {
            const char * buft = "-";
            const char * dev  = "-";
            if (t->buffer) {
                auto * bt = ggml_backend_buffer_get_type(t->buffer);
                buft = ggml_backend_buft_name(bt);
                dev  = dev_name(ggml_backend_buft_get_device(bt));
            }
            printf("T\t%s\t%s\t%s\t%s\t%zu\n", modality, t->name, buft, dev, ggml_nbytes(t));
        }
    }
    if (ctx->buf) {
        auto * bt = ggml_backend_buffer_get_type(ctx->buf.get());
        printf("B\t%s\t%s\t%s\t%s\t%zu\n", modality, ggml_backend_buffer_name(ctx->buf.get()), ggml_backend_buft_name(bt),
               dev_name(ggml_backend_buft_get_device(bt)), ggml_backend_buffer_get_size(ctx->buf.get()));
    }
    for (auto & [dev, size] : ctx->mem_usage) {
        printf("W\t%s\t%s\t%zu\n", modality, dev_name(dev), size);
    }
    for (auto & [dev, size] : ctx->mem_compute) {
        printf("C\t%s\t%s\t%zu\n", modality, dev_name(dev), size);
    }
    fflush(stdout);
}

static void print_embd(const char * modality, clip_ctx * ctx) {
    if (ctx) {
        // clip_n_mmproj_embd aborts for a type it does not know: the lines
        // above are out already
        printf("E\t%s\t%d\n", modality, clip_n_mmproj_embd(ctx));
        fflush(stdout);
    }
}

static void report(bool use_gpu, const std::string & device, bool warmup, const std::string & path) {
    ggml_backend_dev_t dev;
    if (!find_device(device, dev)) {
        printf("ERR\tno device %s\nEND\n", device.c_str());
        fflush(stdout);
        return;
    }
    clip_context_params p {
        /* use_gpu           */ use_gpu,
        /* device            */ dev,
        /* flash_attn_type   */ CLIP_FLASH_ATTN_TYPE_AUTO,
        /* image_min_tokens  */ -1,
        /* image_max_tokens  */ -1,
        /* warmup            */ warmup,
        /* cb_eval           */ nullptr,
        /* cb_eval_user_data */ nullptr,
        /* no_alloc          */ false,
        /* progress_callback */ nullptr,
        /* progress_callback_user_data */ nullptr,
    };
    g_err.clear();
    auto r = clip_init(path.c_str(), p);
    if (!r.ctx_v && !r.ctx_a && !r.ctx_gen_a) {
        printf("ERR\t%s\nEND\n", one_line(g_err).c_str());
        fflush(stdout);
        return;
    }
    print_ctx("vision", r.ctx_v);
    print_ctx("audio", r.ctx_a);
    print_ctx("gen_audio", r.ctx_gen_a);
    print_embd("vision", r.ctx_v);
    print_embd("audio", r.ctx_a);
    print_embd("gen_audio", r.ctx_gen_a);
    printf("END\n");
    fflush(stdout);
    clip_free(r.ctx_v);
    clip_free(r.ctx_a);
    clip_free(r.ctx_gen_a);
}

int main(int argc, char ** argv) {
    g_logger_state.log_callback = capture_log;
    if (!std::getenv("MMPROJ_ORACLE_VERBOSE")) {
        ggml_log_set([](enum ggml_log_level, const char *, void *) {}, nullptr);
    }
    ggml_backend_load_all();
    if (argc >= 2 && std::string(argv[1]) == "serve") {
        std::string line;
        while (std::getline(std::cin, line)) {
            std::istringstream in(line);
            int use_gpu = 0, warmup = 0;
            std::string device, path;
            in >> use_gpu >> device >> warmup;
            std::getline(in >> std::ws, path);
            report(use_gpu != 0, device, warmup != 0, path);
        }
        return 0;
    }
    if (argc == 7 && std::string(argv[1]) == "memory") {
        ggml_backend_dev_t dev;
        if (!find_device(argv[3], dev)) {
            fprintf(stderr, "no device %s\n", argv[3]);
            return 1;
        }
        mtmd_context_params mp = mtmd_context_params_default();
        mp.use_gpu = std::string(argv[2]) == "1";
        mp.device  = dev;
        mp.image_min_tokens = std::atoi(argv[4]);
        mp.image_max_tokens = std::atoi(argv[5]);
        auto mem = mtmd_get_memory_usage(argv[6], mp);
        if (mem.empty()) {
            printf("ERR\t%s\n", one_line(g_err).c_str());
        }
        for (auto & [d, size] : mem) {
            printf("M\t%s\t%zu\n", dev_name(d), size);
        }
        return 0;
    }
    fprintf(stderr, "usage: %s serve | memory USE_GPU DEVICE|- MIN_TOKENS MAX_TOKENS PATH\n", argv[0]);
    return 2;
}
