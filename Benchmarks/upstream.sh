#!/usr/bin/env bash
# The upstream client's micro-benchmark: pipelined GETs of one 100-byte key through
# HalcyonUpstream (a bare RedisConnection, and the routing RedisClient) against redis-py's
# pipelined GETs, all to the same redis-server over TCP loopback, interleaved, medians of
# the runs. Server CPU per request from INFO (cpu used / commands processed).
#
#   Benchmarks/upstream.sh [--runs 5] [--pipeline 32] [--requests 200000] [--no-build]
#
# Prints a Markdown table; Benchmarks/RESULTS.md keeps the recorded one.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5 pipeline=32 requests=200000 build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --pipeline) pipeline="$2"; shift 2 ;;
        --requests) requests="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v redis-server >/dev/null || scripts/bootstrap
python3 -c 'import redis' 2>/dev/null || python3 -m pip install -q redis || python3 -m pip install -q --break-system-packages redis
if [ "$build" = 1 ]; then swift build -c release --product upstream-bench >&2; fi
bench="$(swift build -c release --show-bin-path)/upstream-bench"

tmp=$(mktemp -d /tmp/hup.XXXXXX)
port=$((20000 + RANDOM % 10000))
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" --daemonize no \
    --logfile "$tmp/redis.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
until redis-cli -p "$port" PING >/dev/null 2>&1; do sleep 0.05; done

server_counters() {
    redis-cli -p "$port" INFO | tr -d '\r' | awk -F: '
        /^used_cpu_sys:/ {s=$2} /^used_cpu_user:/ {u=$2} /^total_commands_processed:/ {c=$2}
        END {printf "%s %s\n", s + u, c}'
}

results="$tmp/results.jsonl"
for run in $(seq 1 "$runs"); do
    for client in connection client redis-py; do
        read -r cpu0 cmds0 < <(server_counters)
        if [ "$client" = redis-py ]; then
            line=$(python3 Benchmarks/upstream/redis_py_bench.py --port "$port" --requests "$requests" --pipeline "$pipeline")
        else
            line=$("$bench" --port "$port" --requests "$requests" --pipeline "$pipeline" --via "$client")
        fi
        read -r cpu1 cmds1 < <(server_counters)
        python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["server_cpu_us"]=(float(sys.argv[2])-float(sys.argv[3]))/max(1,int(sys.argv[4])-int(sys.argv[5]))*1e6; d["run"]=int(sys.argv[6]); print(json.dumps(d))' \
            "$line" "$cpu1" "$cpu0" "$cmds1" "$cmds0" "$run" >> "$results"
    done
done

python3 - "$results" "$pipeline" "$runs" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["client"], []).append(r)
base = statistics.median(r["rps"] for r in by["redis-py-resp3"])
print(f"pipeline {sys.argv[2]}, {sys.argv[3]} interleaved runs, medians\n")
print("| client | GET/s | × redis-py | client CPU µs/GET | server CPU µs/GET |")
print("|---|---:|---:|---:|---:|")
for name, rs in by.items():
    rps = statistics.median(r["rps"] for r in rs)
    print(f"| {name} | {rps:,.0f} | {rps / base:.2f} | {statistics.median(r['client_cpu_us'] for r in rs):.2f} | "
          f"{statistics.median(r['server_cpu_us'] for r in rs):.2f} |")
PY
