#!/usr/bin/env bash
# Make the GPU-runner pack: one folder that proves the CUDA path on a
# machine with an NVIDIA GPU, nvcc, cmake and ninja but neither Go nor a
# network.
#
#   scripts/gpu-pack.sh DIR        (then, on the runner: DIR/run.sh OUTDIR)
#
# Runs on any Linux x64 machine with Go and npm. DIR (emptied first; at most
# 48 MiB, under the runner's 64 MiB carry) receives:
#   bin.tar.gz   ggload and the test binaries of every package that touches a
#                device, static (CGO_ENABLED=0), stripped, -trimpath;
#   lib.tar.gz   the pinned prebuilt CPU set of linux-x64 (every x86 CPU
#                variant, libggml, libggml-base, libllama for the comparisons);
#   src.tar.gz   the part of the pinned source the CUDA backend build needs:
#                ggml/'s CMake files, includes, the ggml-base sources and
#                ggml-cuda, under build/ggml-only/CMakeLists.txt, with the
#                cache file build/linux-x64-cuda-module.cmake;
#   run.sh       scripts/gpu-run.sh: build the CUDA module for the GPU present,
#                run every test with CUDA required, benchmark against
#                llama.cpp (the benchmark model is generated on the runner);
#   MANIFEST     the pin, the commit, the sha256 of every file and the
#                contents of every tarball, which run.sh checks.
. "$(dirname "$0")/lib.sh"

DIR=${1:-}
[ -n "$DIR" ] && [ $# -eq 1 ] || die "usage: scripts/gpu-pack.sh DIR"
LIMIT=$((48 << 20))
command -v go >/dev/null || die "go not found: the pack holds ggload and its test binaries, built here (Go $(sed -n 's/^go //p' "$ROOT/go.mod"))"
command -v git >/dev/null || die "git is needed to unpack the pinned source bundle"
cd "$ROOT"
start=$(date +%s)
step() { say "[$(($(date +%s) - start))s] $*"; }

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
case $DIR in
"$ROOT" | / | "$HOME") die "refusing to empty $DIR" ;;
esac
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/src"

# the packages whose tests reach a device (gguf and native are pure Go)
pkgs=(./bindings ./ggml ./place ./loader ./tests ./examples/attention ./cmd/ggload)
step "building ggload, ggload-bench and ${#pkgs[@]} test binaries (static, stripped)"
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
flags=(-trimpath -ldflags='-s -w')
go build "${flags[@]}" -o "$stage/bin/ggload-bench" ./lab/ggload-bench
for p in "${pkgs[@]}"; do
	name=$(basename "$p")
	[ "$p" = ./cmd/ggload ] && name=ggload
	go test -c "${flags[@]}" -o "$stage/bin/$name.test" "$p"
done
# ggload is its own test binary run as ggload, as cmd/ggload's tests run
# it (GGLOAD_TEST_AS_GGLOAD=1: the same main before any test): one copy
# of ggload's code in the pack, not two
cat >"$stage/bin/ggload" <<'WRAPPER'
#!/bin/sh
GGLOAD_TEST_AS_GGLOAD=1 exec "$(dirname "$0")/ggload.test" "$@"
WRAPPER
chmod +x "$stage/bin/ggload"

step "the pinned prebuilt CPU set (linux-x64)"
"$ROOT/scripts/fetch-native.sh" linux-x64
set_dir=$LIBROOT/linux-x64
# base, core, every CPU variant and libllama; not libllama-common (tools)
cp "$set_dir"/libggml-base.so "$set_dir"/libggml.v*.so "$set_dir"/libggml-cpu-*.so "$set_dir"/libllama.v*.so "$stage/lib/"
cp "$set_dir/LICENSE.node-llama-cpp" "$stage/lib/"

step "the pinned ggml source the CUDA backend needs"
src=$(source_tree)
commit=$(git -C "$src" rev-parse HEAD)
(
	cd "$src"
	# ggml-base's own sources and headers, ggml/'s CMake files and includes,
	# the one CPU header ggml-base includes, and ggml-cuda whole
	files=(LICENSE ggml/CMakeLists.txt ggml/cmake ggml/include ggml/src/CMakeLists.txt
		ggml/src/ggml-cpu/ggml-cpu-impl.h ggml/src/ggml-cuda)
	for f in ggml/src/*.c ggml/src/*.cpp ggml/src/*.h ggml/src/*.in; do files+=("$f"); done
	tar -cf - "${files[@]}"
) | tar -xf - -C "$stage/src"
cp "$ROOT/build/ggml-only/CMakeLists.txt" "$stage/src/CMakeLists.txt"
cp "$ROOT/build/linux-x64-cuda-module.cmake" "$stage/src/"

step "compressing into $DIR"
rm -rf "${DIR:?}"/*
for part in bin lib src; do
	# sorted names and fixed owners and times: the same inputs give the same tarball
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' \
		-cf - -C "$stage/$part" . | gzip -9n >"$DIR/$part.tar.gz"
done
cp "$ROOT/scripts/gpu-run.sh" "$DIR/run.sh"
chmod +x "$DIR/run.sh"

rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && rev="$rev+changes"
{
	echo "# ggload GPU-runner pack: scripts/gpu-pack.sh; run with ./run.sh OUTDIR"
	echo "ggload=$rev"
	echo "llama_cpp_tag=$LLAMA_CPP_TAG"
	echo "llama_cpp_commit=$commit"
	echo "ggml_version=$GGML_VERSION"
	echo "prebuilt=$NPM_PACKAGE_linux_x64@$NPM_VERSION"
	echo "go=$(go env GOVERSION)"
	echo "made=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	for f in bin.tar.gz lib.tar.gz src.tar.gz run.sh; do
		echo "file $(sha256_of "$DIR/$f") $(stat -c %s "$DIR/$f") $f"
	done
	for part in bin lib src; do
		(cd "$stage/$part" && find . -type f | sort | while read -r f; do
			echo "content $part.tar.gz ${f#./} $(stat -c %s "$f")"
		done)
	done
} >"$DIR/MANIFEST"

total=$(du -cb "$DIR"/* | tail -1 | cut -f1)
for f in "$DIR"/*; do
	awk -v n="$(basename "$f")" -v s="$(stat -c %s "$f")" 'BEGIN { printf "  %-12s %6.2f MiB\n", n, s / 1048576 }' >&2
done
[ "$total" -le "$LIMIT" ] || die "the pack is $((total >> 20)) MiB, over its limit of $((LIMIT >> 20)) MiB"
step "pack ready: $DIR, $(awk -v s="$total" 'BEGIN { printf "%.2f", s / 1048576 }') MiB (limit $((LIMIT >> 20)) MiB); on the runner: $DIR/run.sh OUTDIR"
