#!/usr/bin/env bash
# go vet (which type-checks every package and its tests) for the platforms
# ggload builds on but CI cannot run: macOS (Apple silicon and Intel),
# Windows x64 and Linux arm64, all without cgo. A file that uses a
# Linux-only or unix-only call without a build constraint fails here.
#
#   scripts/cross-vet.sh [GOOS/GOARCH...]
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
command -v go >/dev/null || die "go not found"
[ $# -gt 0 ] || set -- darwin/arm64 darwin/amd64 windows/amd64 linux/arm64
fail=0
for target in "$@"; do
	if CGO_ENABLED=0 GOOS=${target%/*} GOARCH=${target#*/} go vet ./...; then
		say "$target: go vet ok"
	else
		say "$target: go vet FAILED"
		fail=1
	fi
done
exit $fail
