#!/usr/bin/env bash
# Regenerate internal/arch's programs and tables from the pinned llama.cpp
# source (native/pin.env): every architecture's hyperparameter and tensor
# creation functions, and the tables they use. Run after changing the pin;
# then run the tests (TestArchitectures compares every architecture with
# llama.cpp of the new pin).
#
#   scripts/gen-archs.sh [SOURCE_TREE]   (default: the pinned tree, unpacked into the cache)
. "$(dirname "$0")/lib.sh"
src=${1:-$(source_tree)}
cd "$ROOT"
CGO_ENABLED=0 go run ./internal/arch/gen -src "$src" -out internal/arch -pin "$LLAMA_CPP_TAG"
say "internal/arch: $(grep -c '^fn ' internal/arch/programs.sx) programs from $src"
