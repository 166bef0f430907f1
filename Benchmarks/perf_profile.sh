#!/usr/bin/env bash
# One perf profile of halcyond under a pipelined memory-hit load (gets by default), and its
# CPU per request.
#
# Starts halcyond on a socket in a temp folder, prefills the keys to memory, then runs
# loadgen (--op OP, --conns C, --pipeline P) while `perf record` samples halcyond with
# call graphs; prints the server's CPU µs per request (from /proc) and the top symbols
# (self time, Swift names demangled), and leaves perf.data in --keep DIR if given.
#
# usage: Benchmarks/perf_profile.sh --halcyond PATH [--conns 4] [--pipeline 32] [--seconds 5]
#                                   [--value-size 100] [--top 40] [--keep DIR]
#                                   [--op get|set|mixed|mget|incr|ping] [--batch-keys 100]
# Needs perf (Debian: linux-perf; installed when missing and root) and gcc for loadgen. Samples
# cpu-clock (a software event), which works in VMs without hardware counters.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
halcyond=""; op=get; batch=100; conns=4; pipeline=32; seconds=5; value=100; top=40; keep=""
while [ $# -gt 0 ]; do
    case "$1" in
        --halcyond) halcyond="$2"; shift 2 ;;
        --op) op="$2"; shift 2 ;;
        --batch-keys) batch="$2"; shift 2 ;;
        --conns) conns="$2"; shift 2 ;;
        --pipeline) pipeline="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --value-size) value="$2"; shift 2 ;;
        --top) top="$2"; shift 2 ;;
        --keep) keep="$2"; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "perf_profile.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$halcyond" ] || { echo "perf_profile.sh: --halcyond PATH (a release build) is required" >&2; exit 2; }
if ! command -v perf >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "perf_profile.sh: install linux-perf" >&2; exit 2; }
    apt-get install -y -qq linux-perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf >/dev/null; }
fi
loadgen="$("$here/loadgen/build.sh")"

tmp="$(mktemp -d /tmp/hperf.XXXXXX)"
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
"$halcyond" --socket "$tmp/h.sock" --cache-dir "$tmp/cache" >"$tmp/halcyond.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do [ -S "$tmp/h.sock" ] && break; sleep 0.05; done
[ -S "$tmp/h.sock" ] || { echo "perf_profile.sh: halcyond did not start" >&2; cat "$tmp/halcyond.log" >&2; exit 2; }

common=(--proto halcyon --socket "$tmp/h.sock" --op "$op" --batch-keys "$batch" --value-size "$value" --keys 10000)
"$loadgen" "${common[@]}" --conns 1 --pipeline 32 --seconds 0.5 --warmup 0.2 --prefill-params '"toDisk":false' >/dev/null
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
t0="$(ticks)"
perf record -q -e cpu-clock -F 997 -g -p "$pid" -o "$tmp/perf.data" -- sleep "$(awk -v s="$seconds" 'BEGIN { print s + 1 }')" 2>/dev/null &
perf_pid=$!
sleep 0.3
line="$("$loadgen" "${common[@]}" --conns "$conns" --pipeline "$pipeline" --seconds "$seconds" --warmup 0.2 --no-prefill)"
t1="$(ticks)"
wait "$perf_pid" || true
replies="$(sed -n 's/.* replies=\([0-9]*\).*/\1/p' <<<"$line")"
echo "loadgen: $line"
awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v n="$replies" \
    'BEGIN { printf "halcyond CPU: %.2f s for %d replies = %.2f µs per request\n", t / hz, n, t / hz * 1e6 / n }'
echo
echo "Top $top symbols by self time (perf report --no-children):"
demangle() { if command -v swift >/dev/null; then swift demangle --simplified; else cat; fi; }
perf report -q -i "$tmp/perf.data" --no-children -g none --sort dso,symbol --percent-limit 0.3 2>/dev/null \
    | grep -v '^$' | head -n "$top" | demangle | sed 's/  *$//' | cut -c1-200 || true
echo
echo "Self time by library:"
perf report -q -i "$tmp/perf.data" --no-children -g none --sort dso --percent-limit 0.5 2>/dev/null \
    | grep -v '^$' | sed 's/  *$//' || true
if [ -n "$keep" ]; then mkdir -p "$keep"; cp "$tmp/perf.data" "$keep/"; echo "perf.data kept in $keep"; fi
