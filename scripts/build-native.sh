#!/usr/bin/env bash
# Build the pinned ggml release from its source bundle.
#
#   scripts/build-native.sh <platform> [backends] [--into <dir>]
#
#   platform  linux-x64 | darwin-arm64 | windows-x64
#             (cache file: build/<platform>.cmake)
#   backends  comma list of cpu, rpc, vulkan, cuda, metal
#             (default: linux-x64 cpu,rpc; darwin-arm64 cpu,metal,rpc;
#             windows-x64 cpu,rpc; add cuda or vulkan there)
#   --into    also add the modules of the non-CPU backends built here (for
#             example libggml-rpc.so) to the prebuilt set native/lib/<dir>/
#             and link the sonames they ask for to that set's libraries, so
#             that one process maps one libggml-base (see build/README.md)
#
# The result is a self-contained set in native/lib/<platform>-src/ (with
# ggml-rpc-server when rpc is built). The build tree is cached outside the
# repository, keyed by the pin, the platform and the backends, so a second run
# only copies files.
#
# macOS (darwin-arm64: CPU, Metal, RPC) and Windows (windows-x64: CPU, RPC,
# plus CUDA or Vulkan) have no prebuilt package at the pinned version: this
# script is how they get their libraries. On Windows run it from Git Bash
# started inside an "x64 Native Tools Command Prompt for VS 2022" (MSVC, CMake
# and Ninja on PATH, npm and git too). What was verified, and what was not:
# build/README.md.
. "$(dirname "$0")/lib.sh"

platform=${1:-}; [ -n "$platform" ] || die "usage: $0 <platform> [backends] [--into <dir>]"
shift
backends=""; into=""
while [ $# -gt 0 ]; do
	case $1 in
	--into) into=${2:-}; [ -n "$into" ] || die "--into needs a directory name under native/lib"; shift 2 ;;
	--into=*) into=${1#--into=}; shift ;;
	-*) die "unknown option $1" ;;
	*) backends=$1; shift ;;
	esac
done
case $platform in
linux-x64) : "${backends:=cpu,rpc}" ;;
darwin-arm64) : "${backends:=cpu,metal,rpc}" ;;
windows-x64) : "${backends:=cpu,rpc}" ;;
*) die "unknown platform '$platform' (linux-x64, darwin-arm64, windows-x64)" ;;
esac
[ -f "$ROOT/build/$platform.cmake" ] || die "missing build/$platform.cmake"
command -v cmake >/dev/null || die "cmake is needed (Debian: apt-get install cmake ninja-build; macOS: brew install cmake ninja; Windows: Visual Studio's CMake tools)"
command -v ninja >/dev/null || die "ninja is needed (Debian: apt-get install ninja-build; macOS: brew install ninja; Windows: Visual Studio's CMake tools)"
if [ "$platform" = windows-x64 ]; then
	command -v cl >/dev/null || die "windows-x64 builds with MSVC: run from Git Bash started in an \"x64 Native Tools Command Prompt for VS 2022\""
fi

defs=(); targets=(ggml ggml-base)
IFS=, read -r -a list <<<"$backends"
for b in "${list[@]}"; do
	case $b in
	cpu) targets+=(ggml-cpu) ;;
	rpc) defs+=(-DGGML_RPC=ON); targets+=(ggml-rpc ggml-rpc-server) ;;
	vulkan)
		command -v glslc >/dev/null || die "vulkan needs glslc from a Vulkan SDK new enough for the pinned shaders (cooperative-matrix extensions; on Debian 12 use scripts/fetch-native.sh linux-x64-vulkan)"
		defs+=(-DGGML_VULKAN=ON); targets+=(ggml-vulkan) ;;
	cuda)
		command -v nvcc >/dev/null || die "cuda needs nvcc (CUDA toolkit)"
		defs+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES:-native}"); targets+=(ggml-cuda) ;;
	metal) defs+=(-DGGML_METAL=ON); targets+=(ggml-metal) ;;
	*) die "unknown backend '$b' (cpu, rpc, vulkan, cuda, metal)" ;;
	esac
done
if [ "$platform" = linux-x64 ] && ! grep -qw avx2 /proc/cpuinfo; then
	defs+=(-DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF)
fi

# the key changes with the pin, the backends and the cache files
conf=$(cat "$ROOT/build/common.cmake" "$ROOT/build/$platform.cmake" | sha256sum | cut -c1-12)
key="$LLAMA_CPP_TAG-$platform-${backends//,/-}-$conf"
bdir="$CACHE/build/$key"
stamp="$bdir/.built"
if [ ! -f "$stamp" ]; then
	src=$(source_tree)
	mkdir -p "$bdir"
	say "configuring $key in $bdir"
	start=$(date +%s)
	cmake -S "$src" -B "$bdir" -G Ninja -C "$ROOT/build/$platform.cmake" "${defs[@]}" >"$bdir/configure.log" 2>&1 ||
		{ tail -30 "$bdir/configure.log" >&2; die "cmake configure failed (log: $bdir/configure.log)"; }
	say "building ${targets[*]}"
	ninja -C "$bdir" "${targets[@]}" >"$bdir/build.log" 2>&1 ||
		{ tail -30 "$bdir/build.log" >&2; die "build failed (log: $bdir/build.log)"; }
	echo "$key" >"$stamp"
	say "built in $(( $(date +%s) - start )) s"
else
	say "$key: cached build in $bdir"
fi

dest="$LIBROOT/$platform-src"
rm -rf "$dest"; mkdir -p "$dest"
# Linux: lib*.so*; macOS: lib*.dylib and the backend modules as lib*.so;
# Windows: *.dll (ggml-base.dll, ggml.dll, ggml-cpu.dll, ...)
cp -P "$bdir"/bin/*.so* "$dest/" 2>/dev/null || true
cp -P "$bdir"/bin/*.dylib "$dest/" 2>/dev/null || true
cp "$bdir"/bin/*.dll "$dest/" 2>/dev/null || true
for f in ggml-rpc-server ggml-rpc-server.exe; do
	[ -f "$bdir/bin/$f" ] && cp "$bdir/bin/$f" "$dest/"
done
printf '%s %s\n' "$LLAMA_CPP_TAG" "$backends" >"$dest/.source"
install_set "$platform-src"
say "$platform-src: $(ls "$dest" | wc -l) files in $dest (and in $CACHE/lib/$LLAMA_CPP_TAG)"

if [ -n "$into" ]; then
	set_dir="$LIBROOT/$into"
	[ -f "$set_dir/.prebuilt" ] || die "--into $into: $set_dir is not a fetched prebuilt set (scripts/fetch-native.sh $into)"
	base=""
	for f in libggml-base.so libggml-base.dylib ggml-base.dll; do [ -f "$set_dir/$f" ] && base=$f; done
	[ -n "$base" ] || die "$set_dir has no libggml-base"
	added=""
	for b in "${list[@]}"; do
		[ "$b" = cpu ] && continue
		for f in "$bdir"/bin/libggml-"$b".so "$bdir"/bin/libggml-"$b".dylib "$bdir"/bin/ggml-"$b".dll; do
			[ -f "$f" ] || continue
			cp "$f" "$set_dir/"; added="$added $(basename "$f")"
		done
	done
	# the self-built modules ask for the versioned soname; point it at the
	# set's own base so that the process maps one copy
	# (Windows resolves ggml-base.dll by that name already)
	case $base in
	*.so) ln -sf "$base" "$set_dir/libggml-base.so.0" ;;
	*.dylib) ln -sf "$base" "$set_dir/libggml-base.0.dylib" ;;
	esac
	printf '%s %s\n' "$LLAMA_CPP_TAG" "${added# }" >"$set_dir/.added"
	install_set "$into"
	say "added${added} to $into (built from $LLAMA_CPP_TAG)"
fi
