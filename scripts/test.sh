#!/usr/bin/env bash
# The tests: formatting, vet, the whole suite against the real native
# backends (CPU always; Vulkan and RPC where present, see .ci/run), and the
# race detector.
#
# Extra arguments go to `go test` (e.g. -run TestName -v).
. "$(dirname "$0")/native-set.sh"
native_set
cd "$ROOT"
export CGO_ENABLED=0
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || die "gofmt would change: $unformatted"
go vet ./...
go test -count=1 -timeout 30m "$@" ./...
# -race needs cgo: the pure-Go packages, and those whose Go concurrency
# matters most (the RPC guard's relays, the loader's readers and validation)
race_pkgs=$(go list ./native/... ./loader/... ./ggml/... ./tests/rpc/... 2>/dev/null || true)
if [ -n "$race_pkgs" ] && command -v gcc >/dev/null; then
	CGO_ENABLED=1 go test -count=1 -race $race_pkgs
fi
