#!/usr/bin/env bash
# The one prepared check a GPU runner executes:
#   1. build ggload and the test binaries (on any machine);
#   2. get the CUDA native set: native/lib/linux-x64-cuda if present, else
#      the pinned prebuilt package (network), else a source build with nvcc;
#   3. stop with "CUDA absent" (exit 3) where there is no NVIDIA driver or no
#      CUDA device loads: this is where a CPU-only machine ends;
#   4. run the integration tests with CUDA required (nothing skips silently);
#   5. benchmark none→CUDA0 and mmap→CUDA0 loads of a generated model against
#      llama.cpp of the same pin, with the pinned host→device bandwidth as the
#      ceiling.
#
# usage: scripts/gpu-check.sh [--size 4GiB] [--runs 3] [--out DIR]
# Results (test log, bench.txt, bench.json) go to DIR (default: a temporary
# directory, printed at the end).
. "$(dirname "$0")/lib.sh"

size=4GiB runs=3 out=""
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) die "unknown option $1 (usage: scripts/gpu-check.sh [--size 4GiB] [--runs 3] [--out DIR])" ;;
	esac
done
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"
cd "$ROOT"
start=$(date +%s)
step() { say "[$(($(date +%s) - start))s] $*"; }

# 1. binaries (CGO_ENABLED=0: nothing but Go is needed to build them)
command -v go >/dev/null || die "go not found: the check builds ggload and its tests (Go $(sed -n 's/^go //p' go.mod))"
export CGO_ENABLED=0
bin=$out/bin
mkdir -p "$bin"
step "building ggload and the test binaries"
go build -o "$bin/ggload" ./cmd/ggload
pkgs=(./ggml ./place ./loader ./tests ./examples/attention)
for p in "${pkgs[@]}"; do
	go test -c -o "$bin/$(basename "$p").test" "$p"
done

# 2. the CUDA set
set_dir=$LIBROOT/linux-x64-cuda
if [ ! -f "$set_dir/libggml-cuda.so" ]; then
	step "fetching the CUDA set"
	if ! scripts/fetch-native.sh linux-x64-cuda; then
		command -v nvcc >/dev/null || die "no CUDA set: the prebuilt package could not be fetched and nvcc is not here to build one"
		step "building the CUDA set from source with nvcc"
		scripts/build-native.sh linux-x64 cpu,cuda
		set_dir=$LIBROOT/linux-x64-src
	fi
fi
export GGLOAD_LIB_DIR=$set_dir
unset GGLOAD_VARIANT

# 3. is there CUDA here?
absent() {
	say "CUDA absent: $*"
	say "everything before this point worked: binaries in $bin, CUDA set in $set_dir"
	exit 3
}
[ -e /proc/driver/nvidia/version ] || command -v nvidia-smi >/dev/null || absent "no NVIDIA driver on this machine"
"$bin/ggload" devices --json >"$out/devices.json" 2>"$out/devices.log" || absent "the native set does not load: $(tail -1 "$out/devices.log")"
grep '"name": "CUDA0"' "$out/devices.json" >/dev/null || absent "no CUDA0 device (driver or CUDA 13 runtime missing?): $(tail -3 "$out/devices.log" | tr '\n' ' ')"
"$bin/ggload" devices | tee "$out/devices.txt"

# 4. tests, CUDA required (Vulkan and RPC are not asked of a GPU runner)
export GGLOAD_REQUIRE=cpu,cuda,llama
step "integration tests with CUDA required"
fail=0
for p in "${pkgs[@]}"; do
	name=$(basename "$p")
	# test binaries run in their package's directory, as go test does
	if (cd "$p" && "$bin/$name.test" -test.count=1 -test.timeout=8m) >"$out/test-$name.log" 2>&1; then
		say "ok   $p"
	else
		say "FAIL $p (log: $out/test-$name.log)"
		tail -30 "$out/test-$name.log" >&2
		fail=1
	fi
done

# 5. loads of a big model against llama.cpp, with the upload ceiling
step "benchmark: $size model, none and mmap onto CUDA0"
"$bin/ggload" bench --size "$size" --modes none,mmap --targets CUDA0 --runs "$runs" --save "$out/bench.json" | tee "$out/bench.txt"

step "done: results in $out"
exit $fail
