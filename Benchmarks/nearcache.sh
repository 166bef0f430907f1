#!/usr/bin/env bash
# halcyond as each host's near-cache in front of Redis, from Python: hot shared reads
# through halcyond against redis-py's GET to the same Redis over TCP loopback, the hit
# latency, and the invalidation delay under a 1 % write rate (Benchmarks/nearcache/).
#
#   Benchmarks/nearcache.sh [--rounds 5] [--debug]
#
# Uses the release halcyond (built here) unless --debug; prints the medians as a
# Markdown table. Benchmarks/RESULTS.md keeps the recorded one.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5 config=release
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --debug) config=debug; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v redis-server >/dev/null || scripts/bootstrap
python3 -c 'import redis' 2>/dev/null || python3 -m pip install -q redis || python3 -m pip install -q --break-system-packages redis
swift build -c "$config" --product halcyond >&2
bin="$(swift build -c "$config" --show-bin-path)/halcyond"
python3 Benchmarks/nearcache/nearcache_bench.py --halcyond "$bin" --rounds "$rounds" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(f"{d[\"rounds\"]} interleaved rounds, medians\n")
print("| | halcyond (memory hit on the host) | redis-py GET (TCP loopback) |")
print("|---|---:|---:|")
print(f"| reads/s, one caller | {d[\"halcyond_rps\"]:,.0f} | {d[\"redis_py_rps\"]:,.0f} |")
print(f"| × redis-py | {d[\"ratio\"]:.2f} | 1.00 |")
print(f"| latency p50 / p99 µs | {d[\"hit_p50_us\"]:.0f} / {d[\"hit_p99_us\"]:.0f} | {d[\"redis_p50_us\"]:.0f} / {d[\"redis_p99_us\"]:.0f} |")
print(f"| server CPU µs per read | {d[\"halcyond_cpu_us\"]:.1f} | {d[\"redis_cpu_us\"]:.1f} |")
print()
print(f"1 % writes through host A, reads through host B: invalidation delay p50 {d[\"inval_p50_ms\"]:.2f} ms, "
      f"p99 {d[\"inval_p99_ms\"]:.2f} ms, max {d[\"inval_max_ms\"]:.2f} ms; read latency p50 {d[\"mixed_read_p50_us\"]:.0f} µs, "
      f"p99 {d[\"mixed_read_p99_us\"]:.0f} µs")
'
