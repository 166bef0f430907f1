#!/usr/bin/env bash
# How long a restart with a full journal takes: fills the journal with a pipelined set
# load (8 connections x 16), kills halcyond with SIGKILL, starts it again and times the
# first reply; prints the journal counters before and after (replayMicros, replayedRecords).
#
# usage: Benchmarks/journal/restart.sh [LIMIT [VALUE_BYTES [KEYS [SECONDS]]]]
#   LIMIT: --journal-limit and --unwritten-limit (default 1GiB, so the load is not held back)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${HALCYOND:-$root/.build/release/halcyond}"
lg="$("$here/../loadgen/build.sh")"
d="$(mktemp -d /tmp/hcrs.XXXXXX)"
trap 'rm -rf "$d"' EXIT
args=(--socket "$d/s" --cache-dir "$d/c" --log-level warning --journal-limit "${1:-1GiB}" --unwritten-limit "${1:-1GiB}")
"$bin" "${args[@]}" >"$d/log" 2>&1 & pid=$!
for _ in $(seq 100); do [ -S "$d/s" ] && break; sleep 0.1; done
"$lg" --proto halcyon --socket "$d/s" --op set --value-size "${2:-4096}" --conns 8 --pipeline 16 --keys "${3:-200000}" \
    --seconds "${4:-6}" --warmup 0.2 --no-prefill
call() { python3 -c '
import socket, sys, json
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": sys.argv[2]}).encode() + b"\n")
r = json.loads(s.makefile().readline())["result"]
print(json.dumps(r.get("journal", r)))' "$d/s" "$1"; }
echo "before kill: $(call cache.stats)"
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
echo "journal on disk: $(du -sh "$d/c/default.journal" | cut -f1)"
t0=$(date +%s.%N)
"$bin" "${args[@]}" >>"$d/log" 2>&1 & pid=$!
until call server.ping >/dev/null 2>&1; do sleep 0.01; done
t1=$(date +%s.%N)
echo "restart to first reply: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s"
echo "after restart: $(call cache.stats)"
kill "$pid"; wait "$pid" 2>/dev/null || true
