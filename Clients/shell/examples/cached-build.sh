#!/usr/bin/env bash
# Skip an expensive build step when its inputs have not changed: the cache key is a
# hash of every input file, the cached value is the step's output (a tarball here,
# binary-safe). Any change to the inputs makes a new key, so nothing goes stale.
#
#   Clients/shell/examples/cached-build.sh SRC_DIR > out.tar.gz
set -euo pipefail
# shellcheck source=../halcyon.sh
source "$(dirname "${BASH_SOURCE[0]}")/../halcyon.sh"

src=${1:?usage: cached-build.sh SRC_DIR}
inputs=$(find "$src" -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64)

build() {
    # Stand-in for the real step (compile, minify, render...).
    tar -C "$src" -czf - .
}
halcyon_cached 7d "build:$inputs" -- build
