# Shared helpers for the native scripts; sourced, not run.
# shellcheck shell=bash
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../native/pin.env
. "$ROOT/native/pin.env"
# the same directory as bindings.CacheDir (os.UserCacheDir/ggload)
if [ "$(uname -s)" = Darwin ]; then
	CACHE=${GGLOAD_CACHE:-$HOME/Library/Caches/ggload}
else
	CACHE=${GGLOAD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ggload}
fi
LIBROOT="$ROOT/native/lib"

say() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
die() { say "error: $*"; exit 1; }

# pin_var NAME -> value of NAME from pin.env, or empty
pin_var() { eval "printf '%s' \"\${$1:-}\""; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# npm_tarball PACKAGE SHA256 -> path of the verified tarball in the cache.
# Downloads with `npm pack` only when the cached copy is missing or wrong.
npm_tarball() {
	local pkg=$1 want=$2 dir="$CACHE/npm" file
	command -v npm >/dev/null || die "npm is needed to fetch $pkg@$NPM_VERSION (install Node.js and npm)"
	mkdir -p "$dir"
	file="$dir/$(printf '%s' "${pkg#@}" | tr '/' '-')-$NPM_VERSION.tgz"
	if [ -f "$file" ] && [ "$(sha256_of "$file")" = "$want" ]; then
		printf '%s\n' "$file"; return
	fi
	rm -f "$file"
	say "npm pack $pkg@$NPM_VERSION"
	(cd "$dir" && npm pack --silent "$pkg@$NPM_VERSION" >/dev/null) || die "npm pack $pkg@$NPM_VERSION failed"
	[ -f "$file" ] || die "npm pack did not produce $file"
	local got; got=$(sha256_of "$file")
	if [ "$got" != "$want" ]; then
		rm -f "$file"
		die "$pkg@$NPM_VERSION: sha256 $got does not match the pin $want (native/pin.env)"
	fi
	printf '%s\n' "$file"
}

# source_tree -> path of a git checkout of the pinned llama.cpp release (cached).
source_tree() {
	local dir="$CACHE/src/llama.cpp-$LLAMA_CPP_TAG"
	if [ -f "$dir/ggml/CMakeLists.txt" ]; then printf '%s\n' "$dir"; return; fi
	local tgz tmp; tgz=$(npm_tarball "$NPM_SOURCE_PACKAGE" "$NPM_SOURCE_SHA256")
	tmp=$(mktemp -d)
	tar -xzf "$tgz" -C "$tmp" package/llama/gitRelease.bundle
	rm -rf "$dir"; mkdir -p "$(dirname "$dir")"
	git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$dir"
	rm -rf "$tmp"
	grep -q "set(GGML_VERSION_MINOR $(echo "$GGML_VERSION" | cut -d. -f2))" "$dir/ggml/CMakeLists.txt" ||
		die "source bundle is not ggml $GGML_VERSION"
	printf '%s\n' "$dir"
}

# install_set NAME: copy native/lib/NAME into the user cache, where a ggload
# built anywhere finds it (bindings.Find: <cache>/lib/<tag>/NAME)
install_set() {
	local src="$LIBROOT/$1" dst="$CACHE/lib/$LLAMA_CPP_TAG/$1"
	[ -d "$src" ] || return 0
	mkdir -p "$(dirname "$dst")"
	rm -rf "$dst.tmp"
	cp -a "$src" "$dst.tmp"
	rm -rf "$dst"
	mv "$dst.tmp" "$dst"
}
