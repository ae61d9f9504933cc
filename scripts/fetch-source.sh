#!/usr/bin/env bash
# Unpack the pinned llama.cpp source tree (sha256-checked) into the cache and
# print its path. Tests read its models/ directory; build-native.sh builds it.
. "$(dirname "$0")/lib.sh"
source_tree
