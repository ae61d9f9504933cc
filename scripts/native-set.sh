# Picks and prepares the native set for this machine; sourced by demo.sh and
# test.sh. Prints nothing on success.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# a Vulkan set where the Vulkan loader is installed, the CPU set otherwise
native_set() {
	if [ -n "${GGLOAD_LIB_DIR:-}" ]; then return; fi
	case "$(uname -s)-$(uname -m)" in
	Linux-x86_64)
		# (grep reads everything: with -q, ldconfig could die of SIGPIPE and
		# pipefail would turn a match into a miss)
		if ldconfig -p 2>/dev/null | grep 'libvulkan\.so\.1' >/dev/null; then
			"$ROOT/scripts/fetch-native.sh" linux-x64-vulkan >&2
			export GGLOAD_VARIANT=${GGLOAD_VARIANT:-vulkan}
		else
			"$ROOT/scripts/fetch-native.sh" linux-x64 >&2
			export GGLOAD_VARIANT=${GGLOAD_VARIANT:-none}
		fi ;;
	*) say "no prebuilt set for $(uname -s)-$(uname -m): run scripts/build-native.sh first or set GGLOAD_LIB_DIR" ;;
	esac
	# software Vulkan drivers (lavapipe) are only used when asked for
	export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES-0}
}
