#!/usr/bin/env bash
# Regenerate the replay's programs and tables (internal/replay/arch and
# internal/replay/graph) from the pinned llama.cpp source (native/pin.env): every
# architecture's hyperparameter, tensor-creation and graph-building
# functions, and the tables they use. Run after changing the pin; then run
# the tests (TestArchitectures compares every architecture with llama.cpp
# of the new pin). go generate ./internal/replay/arch runs it too.
#
#   scripts/gen-archs.sh [SOURCE_TREE]   (default: the pinned tree, unpacked into the cache)
. "$(dirname "$0")/lib.sh"
src=${1:-$(source_tree)}
cd "$ROOT"
CGO_ENABLED=0 go run ./internal/replay/gen -src "$src" -out internal/replay -pin "$LLAMA_CPP_TAG"
say "internal/replay/arch: $(grep -c '^fn ' internal/replay/arch/programs.sx) programs from $src"
say "internal/replay/clip: $(grep -c '^fn ' internal/replay/clip/programs.sx) programs"
