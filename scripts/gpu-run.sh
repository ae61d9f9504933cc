#!/usr/bin/env bash
# run.sh of a GPU-runner pack (made by scripts/gpu-pack.sh, which copies this
# file into the pack): the whole CUDA check of ggload in one command, on a
# Linux x64 machine with an NVIDIA GPU, its driver, nvcc, cmake and ninja,
# and neither Go nor a network.
#
#   ./run.sh OUTDIR
#
# Phases, each under its own timeout, the whole run within 9 minutes (within
# 3 when the CUDA build and the benchmark model are already cached):
#   1. check the pack (sha256 of every file), unpack it under /tmp
#      (GGLOAD_PACK_WORK, default /tmp/ggload-pack), check every binary and
#      library (ldd: static binaries, no missing library or symbol version);
#   2. build the pinned CUDA backend from the carried ggml source with the
#      runner's nvcc, as a module beside the prebuilt CPU set, for the GPUs
#      present only (nvidia-smi's compute capability; GGLOAD_CUDA_ARCHS
#      overrides), cached under the work directory, meanwhile writing the
#      benchmark model (a generated llama model of 4 GiB, cached too);
#   3. devices: stop with "CUDA absent" (exit 3) where no CUDA0 comes up;
#   4. every test binary with CUDA required (GGLOAD_REQUIRE=cpu,cuda,llama),
#      side by side;
#   5. ggload-bench: none, mmap and direct-io onto CUDA0 against llama.cpp of
#      the same pin, with the pinned host->device ceiling, medians.
#
# OUTDIR receives at most 8 files: summary.txt (at most 200 lines: every
# figure and every failure), build.log, tests.log, bench.log, bench.json.
# Exit status: 0 all passed, 1 something failed, 2 the pack is broken or
# incomplete, 3 CUDA absent (no GPU, no driver, no nvcc, or no CUDA0).
set -uo pipefail
export LC_ALL=C

PACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${1:-}
if [ -z "$OUT" ] || [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
SUM=$OUT/summary.txt
: >"$SUM"
rm -f "$OUT/build.log" "$OUT/tests.log" "$OUT/bench.log" "$OUT/bench.json"

START=$(date +%s)
now() { echo $(($(date +%s) - START)); }
say() { printf '[%s +%3ss] %s\n' "$(date -u +%H:%M:%S)" "$(now)" "$*" >&2; }
# note: a line of the summary (and of the progress)
note() {
	printf '%s\n' "$*" >>"$SUM"
	say "$*"
}
section() { printf '\n== %s\n' "$*" >>"$SUM"; say "== $*"; }

# the hard limit: 9 minutes cold, 3 warm (decided once the caches are known)
DEADLINE=$((9 * 60 - 20))
left() { echo $((DEADLINE - $(now))); }
# budget CAP: the seconds a phase may take, at most CAP and what is left
budget() {
	local l; l=$(left)
	[ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}
# run_limited SECONDS CMD...: the command under timeout (its whole process
# group is killed when the time is up); status 124 on a timeout
run_limited() {
	local t=$1; shift
	[ "$t" -lt 1 ] && return 124
	timeout -k 5 "$t" "$@"
}

FAILED=0
fail() { FAILED=1; note "FAIL: $*"; }
finish() {
	local code=$1
	section "end"
	note "status: $([ "$code" = 0 ] && echo ok || echo "exit $code") after $(now)s"
	# keep the summary within 200 lines; the logs hold the rest
	if [ "$(wc -l <"$SUM")" -gt 200 ]; then
		{ head -n 194 "$SUM"; echo "... ($(($(wc -l <"$SUM") - 199)) lines cut: see the logs)"; tail -n 5 "$SUM"; } >"$SUM.tmp" && mv "$SUM.tmp" "$SUM"
	fi
	for f in "$OUT"/*.log; do
		[ -f "$f" ] || continue
		# at most 16 MiB per file comes back
		if [ "$(stat -c %s "$f")" -gt $((15 << 20)) ]; then
			tail -c $((15 << 20)) "$f" >"$f.tmp" && mv "$f.tmp" "$f"
		fi
	done
	exit "$code"
}
absent() {
	section "CUDA absent"
	note "CUDA absent: $*"
	# 3 only when everything before worked
	[ "$FAILED" = 0 ] && finish 3
	finish 1
}
broken() {
	fail "$*"
	finish 2
}

section "ggload GPU-runner check"
note "pack: $PACK"
while IFS= read -r line; do
	case $line in
	file\ * | content\ *) ;;
	*=*) note "  $line" ;;
	esac
done <"$PACK/MANIFEST"
note "host: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) memory"

# 1. the pack
section "pack"
for tool in tar gzip sha256sum timeout ldd awk sed grep stat nproc; do
	command -v "$tool" >/dev/null || broken "$tool not found (coreutils, tar, gzip, libc-bin are needed)"
done
[ "$(uname -m)" = x86_64 ] || broken "this pack is for Linux x86_64, not $(uname -m)"
WORKROOT=${GGLOAD_PACK_WORK:-/tmp/ggload-pack}
mkdir -p "$WORKROOT" || broken "cannot create $WORKROOT"
PACKID=$(sha256sum "$PACK/MANIFEST" | cut -c1-12)
W=$WORKROOT/$PACKID
LIB=$W/native/lib/linux-x64-cuda
# the source has its own place, keyed by its tarball: a CUDA build made from
# it stays valid for every pack that carries the same source
SRC_SUM=$(grep '^file .* src.tar.gz$' "$PACK/MANIFEST" | awk '{print substr($2, 1, 12)}')
[ -n "$SRC_SUM" ] || broken "MANIFEST lists no src.tar.gz"
SRC=$WORKROOT/src-$SRC_SUM
free_gib=$(df -Pk "$WORKROOT" | awk 'NR==2 {printf "%d", $4/1048576}')
note "work directory $W ($free_gib GiB free)"
[ "$free_gib" -ge 6 ] || fail "less than 6 GiB free under $WORKROOT: the benchmark model needs 4 GiB"

t0=$(now)
if [ -f "$W/.unpacked" ] && [ -f "$SRC/CMakeLists.txt" ]; then
	note "unpacked before (pack $PACKID): reused"
else
	while read -r _ sum size name; do
		f=$PACK/$name
		[ -f "$f" ] || broken "$name is missing from the pack"
		[ "$(stat -c %s "$f")" = "$size" ] || broken "$name: $(stat -c %s "$f") bytes, MANIFEST says $size"
		[ "$(sha256sum "$f" | cut -d' ' -f1)" = "$sum" ] || broken "$name: sha256 differs from MANIFEST"
	done < <(grep '^file ' "$PACK/MANIFEST")
	rm -rf "$W"
	rm -rf "$SRC"
	mkdir -p "$W/bin" "$LIB" "$SRC"
	run_limited "$(budget 60)" tar -xzf "$PACK/bin.tar.gz" -C "$W/bin" || broken "unpacking bin.tar.gz failed"
	run_limited "$(budget 60)" tar -xzf "$PACK/lib.tar.gz" -C "$LIB" || broken "unpacking lib.tar.gz failed"
	run_limited "$(budget 60)" tar -xzf "$PACK/src.tar.gz" -C "$SRC" || broken "unpacking src.tar.gz failed"
	touch "$W/.unpacked"
	note "sha256 of every pack file checked; unpacked in $(($(now) - t0))s"
fi
# every unpacked file with its size, as MANIFEST lists them
missing=$(
	{
		grep '^content ' "$PACK/MANIFEST" | awk '{print "want", $2, $3, $4}'
		(cd "$W/bin" && find . -type f -printf 'have bin.tar.gz %P %s\n')
		(cd "$LIB" && find . -type f -printf 'have lib.tar.gz %P %s\n')
		(cd "$SRC" && find . -type f -printf 'have src.tar.gz %P %s\n')
	} | awk '$1 == "want" {want[$2 " " $3] = $4; next} {have[$2 " " $3] = $4}
		END {for (k in want) if (have[k] != want[k]) print k}'
)
if [ -n "$missing" ]; then
	printf '%s\n' "$missing" | head -5 | sed 's/^/  missing or changed: /' >>"$SUM"
	broken "$(printf '%s\n' "$missing" | wc -l) unpacked files missing or changed (remove $W to unpack again)"
fi
note "$(grep -c '^content ' "$PACK/MANIFEST") unpacked files present with their sizes"

# binaries (pure Go, built without cgo; purego's loader needs only the C
# library's dynamic linker, libdl and libpthread): they resolve and run
for b in "$W"/bin/*; do
	name=$(basename "$b")
	needs=$(ldd "$b" 2>&1)
	if printf '%s\n' "$needs" | grep 'not found' >/dev/null; then
		fail "$name: $(printf '%s\n' "$needs" | grep 'not found' | tr -s ' \t' ' ' | tr '\n' ';')"
	fi
	needs=$(printf '%s\n' "$needs" | awk '/=>/ {print $1}' | tr '\n' ' ')
	case $name in
	*.test)
		n=$(run_limited 20 "$b" -test.list '.*' 2>/dev/null | grep -c '^Test') || fail "$name does not run"
		note "  $name: $n tests; needs ${needs:-nothing}" ;;
	*)
		run_limited 20 "$b" --help >/dev/null 2>&1 || fail "$name does not run"
		note "  $name: runs; needs ${needs:-nothing}" ;;
	esac
done
# libraries: every dependency and symbol version resolves
check_libs() {
	local bad=0 f out
	for f in "$LIB"/*.so; do
		out=$(LD_LIBRARY_PATH=$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$f" 2>&1)
		if printf '%s\n' "$out" | grep -E 'not found|version .* not found|not a dynamic' >/dev/null; then
			bad=$((bad + 1))
			fail "$(basename "$f"): $(printf '%s\n' "$out" | grep -E 'not found|not a dynamic' | head -3 | tr -s ' \t' ' ' | tr '\n' ';')"
		fi
	done
	note "  $(ls "$LIB"/*.so | wc -l) libraries checked with ldd, $bad with unresolved dependencies"
}
check_libs

# ggload and the tests find the set as in a checkout: native/lib/<platform>-cuda
export GGLOAD_VARIANT=cuda
unset GGLOAD_LIB_DIR GGLOAD_REQUIRE
export XDG_CACHE_HOME=$WORKROOT/cache
mkdir -p "$XDG_CACHE_HOME"

# 2. the GPUs, the CUDA build, and the benchmark model meanwhile
section "GPU"
GPU_ARCHS=""
if command -v nvidia-smi >/dev/null; then
	if smi=$(run_limited 30 nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total --format=csv,noheader 2>&1); then
		while IFS= read -r l; do note "  GPU $l"; done <<<"$smi"
		GPU_ARCHS=$(printf '%s\n' "$smi" | awk -F', *' '{gsub(/\./, "", $3); print $3 "-real"}' | sort -u | paste -sd';' -)
	else
		note "nvidia-smi failed: $(printf '%s' "$smi" | head -2 | tr '\n' ' ')"
	fi
else
	note "no nvidia-smi on PATH"
fi
[ -e /proc/driver/nvidia/version ] && note "  driver: $(head -1 /proc/driver/nvidia/version | cut -c1-120)"

NVCC=$(command -v nvcc || true)
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin /opt/cuda/bin; do
	[ -z "$NVCC" ] && [ -x "$d/nvcc" ] && NVCC=$d/nvcc
done
CMAKE=$(command -v cmake || true)
NINJA=$(command -v ninja || command -v ninja-build || true)

MODEL_SIZE=${GGLOAD_BENCH_SIZE:-4GiB}
case $MODEL_SIZE in
*GiB) MODEL_MIB=$((${MODEL_SIZE%GiB} * 1024)) ;;
*MiB) MODEL_MIB=${MODEL_SIZE%MiB} ;;
*) broken "GGLOAD_BENCH_SIZE=$MODEL_SIZE: want NGiB or NMiB" ;;
esac
# the cached model: ggload-bench writes it as bench-llama-<layers>x<width>-q8_0-v2.gguf
bench_model() {
	find "$XDG_CACHE_HOME/ggload" -maxdepth 1 -name 'bench-llama-*-q8_0-v2.gguf' -size +$((MODEL_MIB - 1))M 2>/dev/null | head -1
}
model_ready() { [ -n "$(bench_model)" ]; }
BUILD_KEY=""
if [ -n "$NVCC" ]; then
	NVCC_VER=$("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
	ARCHS=${GGLOAD_CUDA_ARCHS:-${GPU_ARCHS:-90-real}}
	BUILD_KEY=$SRC_SUM-${ARCHS//;/_}-nvcc$NVCC_VER
	B=$WORKROOT/cuda-build/$BUILD_KEY
fi
if [ -n "$BUILD_KEY" ] && [ -f "$B/.built" ] && model_ready; then
	DEADLINE=$((3 * 60 - 10))
	note "CUDA build and benchmark model cached: warm run, limit $((DEADLINE + 10))s"
fi

MODEL_PID=""
if [ -n "$GPU_ARCHS" ] && ! model_ready; then
	# the model needs only the CPU set: write it while nvcc works (and time
	# a CPU load of it, the none -> CPU row)
	(cd "$W" && exec timeout -k 5 240 "$W/bin/ggload-bench" --size "$MODEL_SIZE" --modes none --targets none --runs 1 --no-llama) \
		>"$W/model.log" 2>&1 &
	MODEL_PID=$!
	say "writing the $MODEL_SIZE benchmark model in the background"
fi

section "CUDA build"
BUILT=0
if [ -z "$NVCC" ]; then
	note "nvcc not found (PATH, /usr/local/cuda*/bin): the CUDA build was not started"
elif [ -z "$CMAKE" ] || [ -z "$NINJA" ]; then
	note "cmake or ninja not found: the CUDA build was not started (nvcc $NVCC_VER at $NVCC)"
else
	note "nvcc $NVCC_VER ($NVCC), $($CMAKE --version | head -1), ninja $($NINJA --version)"
	note "architectures: $ARCHS$([ -z "$GPU_ARCHS" ] && [ -z "${GGLOAD_CUDA_ARCHS:-}" ] && echo " (no GPU seen: the H200's, to prove the build)")"
	t0=$(now)
	if [ -f "$B/.built" ]; then
		note "cached build $B: reused"
		BUILT=1
	else
		CUDA_LIBDIR=""
		for d in "$(dirname "$NVCC")/../lib64" "$(dirname "$NVCC")/../targets/x86_64-linux/lib"; do
			[ -z "$CUDA_LIBDIR" ] && [ -e "$d/libcudart.so" ] && CUDA_LIBDIR=$(cd "$d" && pwd)
		done
		mkdir -p "$B"
		say "configuring in $B"
		{
			echo "## configure ($(date -u))"
			run_limited "$(budget 120)" "$CMAKE" -S "$SRC" -B "$B" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
				-C "$SRC/linux-x64-cuda-module.cmake" \
				-DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="$ARCHS" \
				"-DCMAKE_INSTALL_RPATH=\$ORIGIN${CUDA_LIBDIR:+;$CUDA_LIBDIR}"
		} >>"$OUT/build.log" 2>&1
		rc=$?
		if [ $rc != 0 ]; then
			rm -rf "$B" # nothing worth keeping: the next run configures afresh
			fail "cmake configure failed (status $rc), build.log:"
			grep -A4 'CMake Error' "$OUT/build.log" | grep -v '^ *$' | head -8 | cut -c1-200 | sed 's/^/  /' >>"$SUM"
		else
			say "building ggml-cuda with $(nproc) jobs (log: build.log)"
			{
				echo "## build ($(date -u))"
				run_limited "$(budget 330)" "$NINJA" -C "$B" -j "$(nproc)" ggml-cuda
			} >>"$OUT/build.log" 2>&1
			rc=$?
			if [ $rc = 0 ]; then
				touch "$B/.built"
				BUILT=1
				note "built in $(($(now) - t0))s"
			elif [ $rc = 124 ]; then
				fail "the CUDA build ran out of time after $(($(now) - t0))s (a rerun resumes it: $B)"
			else
				fail "the CUDA build failed (status $rc), build.log:"
				grep -E -B1 -A2 'error|FAILED' "$OUT/build.log" | head -12 | cut -c1-200 | sed 's/^/  /' >>"$SUM"
			fi
		fi
	fi
	if [ "$BUILT" = 1 ]; then
		mod=$(ls "$B"/bin/libggml-cuda.so* 2>/dev/null | head -1)
		if [ -z "$mod" ]; then
			fail "the build left no libggml-cuda.so in $B/bin"
			BUILT=0
		else
			cp -L "$mod" "$LIB/libggml-cuda.so"
			# the module asks for the versioned soname of ggml-base: the set's own
			ln -sf libggml-base.so "$LIB/libggml-base.so.0"
			tag=$(sed -n 's/^llama_cpp_tag=//p' "$PACK/MANIFEST")
			printf '%s libggml-cuda.so\n' "$tag" >"$LIB/.added"
			note "libggml-cuda.so: $(($(stat -c %s "$LIB/libggml-cuda.so") >> 20)) MiB; needs $(LD_LIBRARY_PATH=$LIB ldd "$LIB/libggml-cuda.so" 2>&1 | awk '/=>/ {print $1 "=" $3}' | grep -v '^lib\(c\|m\|dl\|pthread\|rt\|gcc_s\)\.so' | tr '\n' ' ')"
			check_libs
		fi
	fi
fi
if [ "$BUILT" != 1 ]; then
	rm -f "$LIB/libggml-cuda.so" "$LIB/.added"
fi

# 3. devices
section "devices"
run_limited 60 bash -c 'cd "$1" && "$2" devices' _ "$W" "$W/bin/ggload" >"$W/devices.txt" 2>&1
rc=$?
sed 's/^/  /' "$W/devices.txt" | head -40 >>"$SUM"
say "$(grep -c . "$W/devices.txt") lines of devices (summary)"
[ $rc = 0 ] || fail "ggload devices failed (status $rc)"
if ! grep -q 'CUDA0' "$W/devices.txt"; then
	# get as far as the CPU set goes: the demo loads and reads back a model
	if run_limited 120 bash -c 'cd "$1" && "$2"' _ "$W" "$W/bin/ggload" >"$W/demo.txt" 2>&1; then
		note "demo on the CPU set: ok ($(grep -c 'identical to the file' "$W/demo.txt") devices read back identical)"
	else
		fail "the demo failed on the CPU set: $(tail -3 "$W/demo.txt" | tr '\n' ' ')"
	fi
	if [ -n "$MODEL_PID" ]; then
		kill "$MODEL_PID" 2>/dev/null
		wait "$MODEL_PID" 2>/dev/null
	fi
	why="ggload sees no CUDA0"
	[ -z "$NVCC" ] && why="$why; nvcc not found"
	[ -z "$GPU_ARCHS" ] && why="$why; no GPU reported by nvidia-smi"
	[ "$BUILT" = 1 ] || why="$why; no CUDA backend built"
	absent "$why"
fi

# 4. tests, CUDA required, every binary at once
section "tests (GGLOAD_REQUIRE=cpu,cuda,llama)"
# leave the benchmark its share: 80 s of tests on a warm run, 150 cold
T=$(budget 150)
[ "$DEADLINE" -lt 300 ] && T=$(budget 80)
mkdir -p "$W/logs"
declare -A PIDS=()
for b in "$W"/bin/*.test; do
	name=$(basename "$b" .test)
	dir=$W/run/$name
	rm -rf "$dir"
	mkdir -p "$dir/cache"
	(
		cd "$dir" || exit 2
		export GGLOAD_REQUIRE=cpu,cuda,llama XDG_CACHE_HOME=$dir/cache
		exec timeout -k 5 "$T" "$b" -test.v -test.count=1 -test.timeout=$((T > 20 ? T - 10 : T))s
	) >"$W/logs/$name.log" 2>&1 &
	PIDS[$name]=$!
done
say "${#PIDS[@]} test binaries running, ${T}s each at most"
t0=$(now)
: >"$OUT/tests.log"
for name in $(printf '%s\n' "${!PIDS[@]}" | sort); do
	wait "${PIDS[$name]}"
	rc=$?
	log=$W/logs/$name.log
	pass=$(grep -c -- '--- PASS' "$log")
	nfail=$(grep -c -- '--- FAIL' "$log")
	skip=$(grep -c -- '--- SKIP' "$log")
	case $rc in
	0) verdict=ok ;;
	124) verdict=TIMEOUT ;;
	*) verdict=FAIL ;;
	esac
	note "$(printf '%-8s %-10s pass %3d  fail %2d  skip %2d  (done by +%ss)' "$verdict" "$name" "$pass" "$nfail" "$skip" "$(now)")"
	[ "$rc" = 0 ] || FAILED=1
	{
		printf '\n######## %s (status %d)\n' "$name" "$rc"
		cat "$log"
	} >>"$OUT/tests.log"
done
note "tests took $(($(now) - t0))s"
# every failure with the lines before it (the messages), then why tests skipped
if cat "$W"/logs/*.log | grep -E -- '--- FAIL|^panic:|^fatal error:|test timed out' >/dev/null; then
	note "failures (tests.log has everything):"
	cat "$W"/logs/*.log | grep -E -B4 -- '--- FAIL|^panic:|^fatal error:|test timed out' |
		grep -v -- '--- PASS\|^--$\|^=== \|^[0-9]\{4\}/[0-9][0-9]/' | cut -c1-240 | head -n 70 | sed 's/^/  /' >>"$SUM"
fi
skips=$(cat "$W"/logs/*.log | grep -B1 -- '--- SKIP' | grep -v -- '--- SKIP\|^--$' |
	sed 's/^ *[a-zA-Z0-9_]*\.go:[0-9]*: //; s/^skipped in the child process: [a-zA-Z0-9_]*\.go:[0-9]*: //' |
	cut -c1-110 | sort | uniq -c | sort -rn | head -8)
[ -n "$skips" ] && { note "skipped (not required on a GPU runner):"; printf '%s\n' "$skips" | sed 's/^/  /' >>"$SUM"; }

# 5. the benchmark
section "bench: ${MODEL_SIZE} model onto CUDA0, ggload vs llama.cpp"
if [ -n "$MODEL_PID" ]; then
	wait "$MODEL_PID"
	rc=$?
	cat "$W/model.log" >>"$OUT/bench.log"
	if [ $rc != 0 ] || ! model_ready; then
		fail "writing the benchmark model failed (status $rc): $(tail -2 "$W/model.log" | tr '\n' ' ')"
	else
		note "model written; a CPU load of it (none -> CPU, one run):"
		grep -E '^ *(mode|none) ' "$W/model.log" | cut -c1-200 | sed 's/^/  /' >>"$SUM"
	fi
fi
MODEL=$(bench_model)
: >"$OUT/bench.json"
if [ -n "$MODEL" ]; then
	note "model $(basename "$MODEL"): $(($(stat -c %s "$MODEL") >> 20)) MiB"
	modes=(none mmap direct-io)
	for i in "${!modes[@]}"; do
		mode=${modes[$i]}
		l=$(left)
		share=$(((l - 5) / (${#modes[@]} - i)))
		[ "$share" -gt 120 ] && share=120
		runs=3
		[ "$share" -lt 40 ] && runs=1
		if [ "$share" -lt 15 ]; then
			fail "bench $mode: skipped, ${l}s left"
			continue
		fi
		t0=$(now)
		(cd "$W" && exec timeout -k 5 "$share" "$W/bin/ggload-bench" "$MODEL" --modes "$mode" --targets CUDA0 \
			--runs "$runs" --save "$W/bench-$mode.json") >"$W/bench-$mode.txt" 2>&1
		rc=$?
		dt=$(($(now) - t0))
		{
			printf '\n######## bench %s (status %d, %ss)\n' "$mode" "$rc" "$dt"
			cat "$W/bench-$mode.txt"
		} >>"$OUT/bench.log"
		[ -f "$W/bench-$mode.json" ] && cat "$W/bench-$mode.json" >>"$OUT/bench.json"
		if [ $rc = 0 ]; then
			note "$mode onto CUDA0, $runs run(s) per loader, medians (${dt}s):"
		else
			fail "bench $mode: status $rc after ${dt}s"
		fi
		# the model and memcpy line, the ceiling, the table, goals and errors
		grep -v '^[0-9]\{4\}/[0-9][0-9]/\|^writing ' "$W/bench-$mode.txt" | cut -c1-200 | head -n 14 | sed 's/^/  /' >>"$SUM"
	done
else
	fail "no benchmark model"
fi

finish "$FAILED"
