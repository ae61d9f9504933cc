#!/usr/bin/env bash
# Fetch the pinned prebuilt ggml libraries into native/lib/<platform>/.
#
#   scripts/fetch-native.sh [platform...]     (default: linux-x64)
#
# Platforms: linux-x64 (CPU variants), linux-x64-vulkan (CPU + Vulkan, needs
# libvulkan1 at run time), linux-x64-cuda (CPU + CUDA, needs the CUDA 13
# runtime). Each package is taken with `npm pack`, checked against the sha256
# in native/pin.env, and unpacked. A platform already unpacked from the same
# tarball is left alone, so a second run costs nothing. The set is also
# copied to <user cache>/ggload/lib/<tag>/<platform>, where a ggload binary
# built anywhere finds it.
. "$(dirname "$0")/lib.sh"

[ $# -gt 0 ] || set -- linux-x64
for platform in "$@"; do
	key=${platform//-/_}
	pkg=$(pin_var "NPM_PACKAGE_$key"); sha=$(pin_var "NPM_SHA256_$key")
	if [ -z "$pkg" ] || [ -z "$sha" ]; then
		die "no prebuilt package is pinned for '$platform'; pinned: $(grep -o '^NPM_PACKAGE_[a-z0-9_]*' "$ROOT/native/pin.env" | sed 's/NPM_PACKAGE_//; s/_/-/g' | tr '\n' ' ')(other platforms: scripts/build-native.sh)"
	fi
	dest="$LIBROOT/$platform"
	stamp="$pkg@$NPM_VERSION $sha"
	if [ -f "$dest/.prebuilt" ] && [ "$(cat "$dest/.prebuilt")" = "$stamp" ]; then
		say "$platform: up to date ($dest)"
		[ -d "$CACHE/lib/$LLAMA_CPP_TAG/$platform" ] || install_set "$platform"
		continue
	fi
	tgz=$(npm_tarball "$pkg" "$sha")
	tmp=$(mktemp -d)
	tar -xzf "$tgz" -C "$tmp"
	[ -d "$tmp/package/bins/$platform" ] || die "$pkg has no bins/$platform"
	rm -rf "$dest"; mkdir -p "$dest"
	# the Node.js addon and its build metadata are of no use to us
	find "$tmp/package/bins/$platform" -maxdepth 1 -type f \( -name '*.so*' -o -name '*.dylib' -o -name '*.dll' \) -exec cp {} "$dest/" \;
	cp "$tmp/package/LICENSE" "$dest/LICENSE.node-llama-cpp"
	rm -rf "$tmp"
	printf '%s\n' "$stamp" >"$dest/.prebuilt"
	install_set "$platform"
	say "$platform: $(ls "$dest" | wc -l) files in $dest (and in $CACHE/lib/$LLAMA_CPP_TAG)"
done
