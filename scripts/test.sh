#!/usr/bin/env bash
# The tests, on a fresh machine with only Go and npm: installs the system
# packages they use when run as root (else names the command), fetches the
# pinned native set (with libllama), builds the RPC backend and server from
# the pinned source, unpacks that source, then runs formatting, vet, the
# whole suite against the real backends (CPU; Vulkan on lavapipe; RPC
# servers on loopback and on separate network hosts) and the race
# detector. Everything it fetches or builds is cached outside the
# repository (~/.cache/ggload). It ends with one line of counts and each
# skip's reason, with the command that removes it.
#
# Extra arguments go to `go test` (e.g. -run TestName -v).
. "$(dirname "$0")/native-set.sh"
cd "$ROOT"
ensure_packages || true
native_set
# the RPC backend and ggml-rpc-server, built from the pinned source into
# the set native_set chose; and the pinned source tree itself
if [ -z "${GGLOAD_LIB_DIR:-}" ] && [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
	set_dir=linux-x64; [ "${GGLOAD_VARIANT:-}" = vulkan ] && set_dir=linux-x64-vulkan
	if command -v cmake >/dev/null && command -v ninja >/dev/null && command -v git >/dev/null; then
		"$ROOT/scripts/build-native.sh" linux-x64 cpu,rpc --into "$set_dir" >&2
	else
		say "cmake, ninja and git are needed to build the RPC backend: the RPC tests will skip"
	fi
fi
if command -v git >/dev/null; then
	"$ROOT/scripts/fetch-source.sh" >/dev/null
fi

export CGO_ENABLED=0
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || die "gofmt would change: $unformatted"
go vet ./...

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -o "$out/testsum" ./lab/testsum
runs=()
set +e # the summary comes after failures too
# the longest packages first, so that they do not start last and run
# alone at the end (go test runs packages in the order named, once each)
go test -json -count=1 -timeout 30m "$@" ./tests ./cmd/ggload ./chat ./loader ./lab/synth ./... 2>&1 | "$out/testsum" -record "$out/tests.jsonl"
status=${PIPESTATUS[0]}
runs+=("$out/tests.jsonl")
# -race needs cgo: the pure-Go packages, and those whose Go concurrency
# matters most (the RPC guard's relays, the loader's readers and validation,
# a vocabulary tokenizing for several goroutines at once, a context's
# methods called at once, samplers of their own over one vocabulary, a
# chat template rendering for several, grammars over one vocabulary, the serving engine's slots,
# requests and their cancellation, the model pool's loads, evictions and
# waits)
race_pkgs=$(go list ./loader/... ./tests/rpc/... . ./native/... ./gguf/... ./vocab/... ./sample/... ./loader/... ./ggml/... ./infer/... ./serve/... ./tests/rpc/... ./chat/... ./grammar/... 2>/dev/null || true)
if [ -n "$race_pkgs" ] && command -v gcc >/dev/null; then
	echo "race detector:"
	CGO_ENABLED=1 go test -json -count=1 -timeout 30m -race $race_pkgs 2>&1 | "$out/testsum" -record "$out/race.jsonl"
	[ "${PIPESTATUS[0]}" = 0 ] || status=1
	runs+=("$out/race.jsonl")
fi
"$out/testsum" -summary "${runs[@]}" || status=1
exit "$status"
