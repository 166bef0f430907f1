#!/usr/bin/env bash
# The halcyon.contrib framework backends against the same frameworks' Redis backends (see
# frameworks_compare.py): builds the release halcyond unless --halcyond is given,
# installs redis-server (apt, as root), redis-py, the four frameworks and httpbin (pip)
# when missing, then runs the comparison and prints its report (a section of
# Benchmarks/RESULTS.md).
#
# usage: Benchmarks/frameworks_compare.sh [--halcyond PATH] [--no-build] [frameworks_compare.py options]
#   e.g. Benchmarks/frameworks_compare.sh --runs 9
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
halcyond=""
build=1
rest=()
while [ $# -gt 0 ]; do
    case "$1" in
        --halcyond) halcyond="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
        *) rest+=("$1"); shift ;;
    esac
done
log() { echo "[frameworks_compare $(date -u +%H:%M:%S)] $*" >&2; }

if ! command -v redis-server >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "frameworks_compare.sh: install redis-server" >&2; exit 2; }
    log "installing redis-server"
    apt-get install -y -qq redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }
fi
pkgs="redis django dogpile.cache cachelib requests-cache httpbin"
if ! python3 -c 'import redis, django, dogpile.cache, cachelib, requests_cache, httpbin' 2>/dev/null; then
    log "installing $pkgs"
    # shellcheck disable=SC2086
    python3 -m pip install -q $pkgs || python3 -m pip install -q --break-system-packages $pkgs
fi
if [ -z "$halcyond" ]; then
    if [ "$build" = 1 ]; then
        log "building halcyond (release) in $root"
        (cd "$root" && swift build -c release --product halcyond) >&2
    fi
    halcyond="$root/.build/release/halcyond"
fi
[ -x "$halcyond" ] || { echo "frameworks_compare.sh: no halcyond at $halcyond" >&2; exit 2; }
exec python3 "$here/frameworks_compare.py" --halcyond "$halcyond" "${rest[@]}"
