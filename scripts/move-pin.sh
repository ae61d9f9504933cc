#!/usr/bin/env bash
# Move ggload to a new llama.cpp pin (PIN.md is the procedure; this is its
# mechanical part). With native/pin.env already naming the new release:
#   1. regenerate the generated half from the new source tree: the replay
#      engine's programs and tables (scripts/gen-archs.sh) and the
#      tokenizer's Unicode tables (vocab/internal/unicode);
#   2. print, for every file of the pin that a hand port shadows (the
#      "// Port of llama.cpp FILE (vX.Y.Z)" header of each hand-ported Go
#      file), whether it changed upstream, which ports shadow it, and its
#      diff between the old release and the new.
#
#   scripts/move-pin.sh [-n] [OLD_TREE [NEW_TREE]] > pin-diff.txt
#
# NEW_TREE defaults to the pinned tree (fetch-source.sh unpacks it into the
# cache); OLD_TREE to the cache's tree of the release the ports' headers
# name, there since that release was the pin. -n prints the diff alone,
# regenerating nothing. The summary goes to stderr, the diff to stdout.
. "$(dirname "$0")/lib.sh"
regen=1
if [ "${1:-}" = -n ]; then regen=0; shift; fi
cd "$ROOT"
new=${2:-$(source_tree)}
old=${1:-}
if [ -z "$old" ]; then
	# the release most ports were held to
	held=$(CGO_ENABLED=0 go run ./internal/pinports list | awk 'NF >= 3 && $2 ~ /^v/ { print $2 }' | sort | uniq -c | sort -rn | awk 'NR == 1 { print $2 }')
	[ -n "$held" ] || die "no port header names a release"
	old="$CACHE/src/llama.cpp-$held"
	[ -f "$old/ggml/CMakeLists.txt" ] ||
		die "the ports were held to llama.cpp $held, whose tree is not at $old: give it as OLD_TREE (it is what fetch-source.sh unpacked while $held was the pin)"
fi
[ -d "$old/src" ] || die "$old: not a llama.cpp source tree"
[ -d "$new/src" ] || die "$new: not a llama.cpp source tree"
say "from $old"
say "to   $new (llama.cpp $LLAMA_CPP_TAG, ggml $GGML_VERSION)"

if [ "$regen" = 1 ]; then
	# 1. the generated half
	"$ROOT/scripts/gen-archs.sh" "$new"
	CGO_ENABLED=0 go run ./vocab/internal/unicode/internal/gen -src "$new" -o vocab/internal/unicode
	say "vocab/internal/unicode: tables_gen.go and preregex_gen.go from $new"
	git -C "$ROOT" status --short -- internal/replay vocab/internal/unicode >&2 || true
fi

# 2. the hand-ported half: what changed upstream under each port
CGO_ENABLED=0 go run ./internal/pinports diff "$old" "$new"
say "next: PIN.md's checklist for each port named above; then the tests (PIN.md, 'Tests')"
