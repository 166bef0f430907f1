#!/usr/bin/env bash
# The halcyon.contrib framework backends against the same frameworks' Redis backends (see
# frameworks_compare.py): installs the four frameworks and httpbin (pip) when missing,
# then runs python_compare.sh's setup (release halcyond, redis-server, redis-py) with
# frameworks_compare.py, which prints its report (a section of Benchmarks/RESULTS.md).
#
# usage: Benchmarks/frameworks_compare.sh [--halcyond PATH] [--no-build] [frameworks_compare.py options]
#   e.g. Benchmarks/frameworks_compare.sh --runs 9
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
pkgs="django dogpile.cache cachelib requests-cache httpbin"
if ! python3 -c 'import django, dogpile.cache, cachelib, requests_cache, httpbin' 2>/dev/null; then
    echo "[frameworks_compare] installing $pkgs" >&2
    # shellcheck disable=SC2086
    python3 -m pip install -q $pkgs || python3 -m pip install -q --break-system-packages $pkgs
fi
exec "$here/python_compare.sh" --compare frameworks_compare.py "$@"
