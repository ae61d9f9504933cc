# macOS on Apple silicon: CPU + Metal + RPC from source (no prebuilt is pinned).
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
set(GGML_NATIVE ON  CACHE BOOL "")
set(GGML_METAL  ON  CACHE BOOL "")
set(GGML_METAL_EMBED_LIBRARY ON CACHE BOOL "")
set(GGML_RPC    ON  CACHE BOOL "")
set(CMAKE_BUILD_WITH_INSTALL_RPATH ON CACHE BOOL "")
set(CMAKE_INSTALL_RPATH "@loader_path" CACHE STRING "")
