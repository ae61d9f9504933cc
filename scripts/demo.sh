#!/usr/bin/env bash
# The embedded demo: fetch the native set for this machine, then run ggload
# with no arguments.
. "$(dirname "$0")/native-set.sh"
native_set
cd "$ROOT"
CGO_ENABLED=0 exec go run ./cmd/ggload "$@"
