# windows-x64: CPU + RPC from source with MSVC (no prebuilt is pinned);
# scripts/build-native.sh windows-x64 cpu,rpc,cuda or cpu,rpc,vulkan adds a
# GPU backend. The CPU backend is tuned for the build machine; for a set to
# give to other machines add -DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=ON.
# DLLs find their neighbours in their own directory (the bindings load them
# with LoadLibraryEx(LOAD_WITH_ALTERED_SEARCH_PATH)); CUDA's runtime DLLs
# (cudart64_*.dll, cublas64_*.dll) must be on PATH or copied beside them.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
set(GGML_NATIVE ON  CACHE BOOL "")
set(GGML_RPC    ON  CACHE BOOL "")
