# Settings shared by every platform: shared libraries with dynamically loaded
# backends (ggml_backend_load_all_from_path finds them beside libggml), and
# nothing of llama.cpp that ggload does not use. LLAMA_BUILD_COMMON/TOOLS stay
# on only because the ggml-rpc-server target lives under tools/; the build
# script asks ninja for the targets it needs and nothing else is compiled.
set(BUILD_SHARED_LIBS   ON  CACHE BOOL "")
set(GGML_BACKEND_DL     ON  CACHE BOOL "")
set(CMAKE_BUILD_TYPE    Release CACHE STRING "")
set(LLAMA_BUILD_COMMON  ON  CACHE BOOL "")
set(LLAMA_BUILD_TOOLS   ON  CACHE BOOL "")
set(LLAMA_BUILD_TESTS   OFF CACHE BOOL "")
set(LLAMA_BUILD_EXAMPLES OFF CACHE BOOL "")
set(LLAMA_BUILD_SERVER  OFF CACHE BOOL "")
set(LLAMA_BUILD_APP     OFF CACHE BOOL "")
set(LLAMA_OPENSSL       OFF CACHE BOOL "")
