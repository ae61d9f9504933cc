#!/usr/bin/env bash
# CI's check of the GPU-runner pack on a machine without a GPU: build it with
# scripts/gpu-pack.sh, run its run.sh with PATH reduced to the system
# directories and go, gofmt, npm, npx, node, curl and wget shadowed by stubs
# that record any call, and require exit 3 with "CUDA absent", no stub
# called, and the pack within 48 MiB.
#
#   scripts/gpu-pack-check.sh [DIR]     (DIR: where to build the pack; default a temporary one)
. "$(dirname "$0")/lib.sh"
work=$(mktemp -d)
pack=${1:-$work/pack}
trap 'rm -rf "$work"' EXIT
"$ROOT/scripts/gpu-pack.sh" "$pack"
size=$(du -cb "$pack"/* | tail -1 | cut -f1)
[ "$size" -le $((48 << 20)) ] || die "the pack is $size bytes, over 48 MiB"

mkdir -p "$work/stubs" "$work/out"
for tool in go gofmt npm npx node curl wget; do
	printf '#!/bin/sh\necho "%s $*" >>"%s/called"\necho "%s is not available on a GPU runner" >&2\nexit 127\n' \
		"$tool" "$work" "$tool" >"$work/stubs/$tool"
	chmod +x "$work/stubs/$tool"
done
set +e
env -i HOME="$work" TMPDIR=/tmp PATH="$work/stubs:/usr/sbin:/usr/bin:/sbin:/bin" GGLOAD_PACK_WORK="$work/pack-work" \
	"$pack/run.sh" "$work/out" 2>"$work/progress.txt"
rc=$?
set -e
cat "$work/out/summary.txt" >&2
[ ! -s "$work/called" ] || die "run.sh called tools a GPU runner does not have: $(tr '\n' ';' <"$work/called")"
[ "$rc" = 3 ] || die "run.sh ended with status $rc, want 3 (CUDA absent) on a machine without a GPU"
grep -q '^CUDA absent' "$work/out/summary.txt" || die "run.sh's summary does not say CUDA absent"
files=$(find "$work/out" -type f | wc -l)
[ "$files" -le 8 ] || die "run.sh wrote $files files, at most 8 come back from a runner"
say "pack $((size >> 20)) MiB; run.sh without Go or npm: CUDA absent (exit 3), as it must without a GPU"
