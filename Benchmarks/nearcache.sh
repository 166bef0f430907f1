#!/usr/bin/env bash
# halcyond as each host's near-cache in front of Redis, from Python: hot shared reads
# through halcyond against redis-py's GET to the same Redis over TCP loopback, the hit
# latency, and the invalidation delay under a 1 % write rate (Benchmarks/nearcache/).
#
#   Benchmarks/nearcache.sh [--rounds 5] [--debug] [--pin]
#
# Uses the release halcyond (built here) unless --debug; prints the medians as a
# Markdown table. Benchmarks/RESULTS.md keeps the recorded one.
#
# --pin runs everything (the caller, both daemons, Redis) on vCPU 0. One caller making one
# request at a time is a ping-pong of wake-ups, and on a VM whose idle vCPUs halt each
# wake-up costs tens of microseconds on both sides, whoever serves the read; on one vCPU
# a hand-off is a plain context switch, and the rates compare the two paths' own work.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5 config=release pin=()
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --debug) config=debug; shift ;;
        --pin) pin=(taskset -c 0); shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v redis-server >/dev/null || scripts/bootstrap
python3 -c 'import redis' 2>/dev/null || python3 -m pip install -q redis || python3 -m pip install -q --break-system-packages redis
swift build -c "$config" --product halcyond >&2
bin="$(swift build -c "$config" --show-bin-path)/halcyond"
"${pin[@]}" python3 Benchmarks/nearcache/nearcache_bench.py --halcyond "$bin" --rounds "$rounds" --markdown
