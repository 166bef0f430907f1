#!/usr/bin/env bash
# halcyon's Python client against redis-py (see python_compare.py): builds the release
# halcyond unless --halcyond is given, installs redis-server (apt, as root) and redis-py
# (pip) when missing, then runs the comparison.
#
# usage: Benchmarks/python_compare.sh [--halcyond PATH] [--no-build] [python_compare.py options]
#   e.g. Benchmarks/python_compare.sh --runs 9 --out Benchmarks/.reports/python.md
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
halcyond=""
build=1
compare=python_compare.py  # frameworks_compare.sh runs frameworks_compare.py through here
rest=()
while [ $# -gt 0 ]; do
    case "$1" in
        --halcyond) halcyond="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        --compare) compare="$2"; shift 2 ;;
        -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
        *) rest+=("$1"); shift ;;
    esac
done
log() { echo "[python_compare $(date -u +%H:%M:%S)] $*" >&2; }

if ! command -v redis-server >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "python_compare.sh: install redis-server" >&2; exit 2; }
    log "installing redis-server"
    apt-get install -y -qq redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }
fi
if ! python3 -c 'import redis' 2>/dev/null; then
    log "installing redis-py"
    python3 -m pip install -q redis || python3 -m pip install -q --break-system-packages redis
fi
if [ -z "$halcyond" ]; then
    if [ "$build" = 1 ]; then
        log "building halcyond (release) in $root"
        (cd "$root" && swift build -c release --product halcyond) >&2
    fi
    halcyond="$root/.build/release/halcyond"
fi
[ -x "$halcyond" ] || { echo "python_compare.sh: no halcyond at $halcyond" >&2; exit 2; }
exec python3 "$here/$compare" --halcyond "$halcyond" "${rest[@]}"
