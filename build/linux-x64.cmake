# linux-x64: CPU + RPC (library and ggml-rpc-server) from source.
# One CPU backend built for the build machine's x86-64 level (the script sets
# GGML_AVX2 & co. from /proc/cpuinfo); the prebuilt packages carry the full
# set of CPU variants for distribution.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
set(GGML_NATIVE OFF CACHE BOOL "")
set(GGML_RPC    ON  CACHE BOOL "")
# Modules find their neighbours beside themselves, never in the build tree:
# a module copied into another set must resolve libggml-base there.
set(CMAKE_BUILD_WITH_INSTALL_RPATH ON CACHE BOOL "")
set(CMAKE_INSTALL_RPATH "$ORIGIN" CACHE STRING "")
