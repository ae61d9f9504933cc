# linux-x64: the CUDA backend alone, as a module (libggml-cuda.so) to drop
# beside a prebuilt set of the same pin. Used by the GPU-runner pack
# (scripts/gpu-pack.sh; its run.sh configures build/ggml-only with this file).
#
# Only what loading weights needs is compiled: no CPU backend (the prebuilt
# set carries every CPU variant), no flash-attention kernels (no loader or
# placement probe uses FLASH_ATTN_EXT; the kernel files compile empty), no
# CUDA graphs, no NCCL, no fatbin compression. The run script adds
# CMAKE_CUDA_ARCHITECTURES (the GPUs present, e.g. 90-real on an H200) and
# CMAKE_INSTALL_RPATH ($ORIGIN and the toolkit's library directory).
set(BUILD_SHARED_LIBS   ON  CACHE BOOL "")
set(GGML_BACKEND_DL     ON  CACHE BOOL "")
set(CMAKE_BUILD_TYPE    Release CACHE STRING "")
set(GGML_NATIVE         OFF CACHE BOOL "")
set(GGML_CPU            OFF CACHE BOOL "")
set(GGML_OPENMP         OFF CACHE BOOL "")
set(GGML_CUDA           ON  CACHE BOOL "")
set(GGML_CUDA_FA        OFF CACHE BOOL "")
set(GGML_CUDA_FA_ALL_QUANTS OFF CACHE BOOL "")
set(GGML_CUDA_FA_QUANTS "f16-f16" CACHE STRING "")
set(GGML_CUDA_GRAPHS    OFF CACHE BOOL "")
set(GGML_CUDA_NCCL      OFF CACHE BOOL "")
set(GGML_CUDA_COMPRESSION_MODE none CACHE STRING "")
# the module must resolve libggml-base.so.0 beside itself (linked to the
# prebuilt libggml-base.so), never in the build tree
set(CMAKE_BUILD_WITH_INSTALL_RPATH ON CACHE BOOL "")
