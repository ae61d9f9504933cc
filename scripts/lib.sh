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

# system_packages: the Debian packages the tests use that this machine
# lacks (printed one per line): cmake, ninja and a compiler build the RPC
# backend; git unpacks the pinned source; the Vulkan loader and lavapipe
# give a Vulkan device; iproute2 makes the RPC hosts' network namespaces;
# python3 and its packages run the pin's server tests; tmux gives run's
# conversation mode a real terminal.
system_packages() {
	command -v cmake >/dev/null || echo cmake
	command -v ninja >/dev/null || echo ninja-build
	command -v c++ >/dev/null || command -v g++ >/dev/null || echo g++
	command -v git >/dev/null || echo git
	command -v ip >/dev/null && command -v tc >/dev/null || echo iproute2
	# the pin's own server tests (tools/server/tests, pytest) run against
	# ggload serve and llama-server; node runs the npm openai client
	local py
	for py in pytest requests aiohttp filelock numpy prometheus_client wget; do
		/usr/bin/python3 -c "import $py" 2>/dev/null || echo "python3-$py" | tr _ -
	done
	command -v node >/dev/null || echo nodejs
	command -v npm >/dev/null || echo npm
	command -v tmux >/dev/null || echo tmux
	if [ "$(uname -s)" = Linux ]; then
		# (grep reads everything: with -q, ldconfig could die of SIGPIPE)
		ldconfig -p 2>/dev/null | grep 'libvulkan\.so\.1' >/dev/null || echo libvulkan1
		ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 || echo mesa-vulkan-drivers
	fi
}

# ensure_packages: install the missing system packages with apt-get when
# running as root (or with sudo when CI asks for it), else name the one
# command that installs them. Returns 1 when some are still missing.
ensure_packages() {
	local missing; missing=$(system_packages | tr '\n' ' ')
	missing=${missing% }
	[ -n "$missing" ] || return 0
	local sudo=""
	if [ "$(id -u)" != 0 ]; then
		if [ "${GGLOAD_SUDO:-}" = 1 ] && command -v sudo >/dev/null; then sudo=sudo; else
			say "missing system packages: $missing"
			say "install them with: sudo apt-get install -y --no-install-recommends $missing"
			return 1
		fi
	fi
	if ! command -v apt-get >/dev/null; then
		say "missing system packages (Debian names): $missing; install them with this system's package manager"
		return 1
	fi
	say "installing $missing (apt-get)"
	$sudo apt-get update -qq >/dev/null &&
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
		{ say "apt-get install $missing failed"; return 1; }
}
