#!/usr/bin/env bash
# One perf profile of halcyond under a pipelined memory-hit load (gets by default), and its
# CPU per request; with --disk, under disk hits.
#
# Starts halcyond on a socket in a temp folder, prefills the keys to memory, then runs
# loadgen (--op OP, --conns C, --pipeline P) while `perf record` samples halcyond with
# call graphs; prints the server's CPU µs and context switches per request (from /proc)
# and the top symbols (self time, Swift names demangled), and leaves perf.data in
# --keep DIR if given. --disk: halcyond gets a 1 MiB memory tier, the prefill goes to
# the disk tier and the run starts once every file is written, so gets are disk hits
# (use --value-size 4096 --keys 10000 for the compare.sh cells).
#
# usage: Benchmarks/perf_profile.sh --halcyond PATH [--conns 4] [--pipeline 32] [--seconds 5]
#                                   [--value-size 100] [--keys 10000] [--top 40] [--keep DIR]
#                                   [--op get|set|mixed|mget|incr|ping] [--batch-keys 100] [--disk]
# Environment: HALCYOND_ARGS (extra halcyond flags, split on spaces; e.g. "--event-loop-threads 1").
# Needs perf (Debian: linux-perf; installed when missing and root) and gcc for loadgen. Samples
# cpu-clock (a software event), which works in VMs without hardware counters.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
halcyond=""; op=get; batch=100; conns=4; pipeline=32; seconds=5; value=100; top=40; keep=""; keys=10000; disk=0
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
        --keys) keys="$2"; shift 2 ;;
        --disk) disk=1; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
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
flags=(); [ "$disk" = 1 ] && flags=(--memory-limit 1MiB)
# shellcheck disable=SC2206
[ -n "${HALCYOND_ARGS:-}" ] && flags+=($HALCYOND_ARGS)
"$halcyond" --socket "$tmp/h.sock" --cache-dir "$tmp/cache" "${flags[@]}" >"$tmp/halcyond.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do [ -S "$tmp/h.sock" ] && break; sleep 0.05; done
[ -S "$tmp/h.sock" ] || { echo "perf_profile.sh: halcyond did not start" >&2; cat "$tmp/halcyond.log" >&2; exit 2; }

common=(--proto halcyon --socket "$tmp/h.sock" --op "$op" --batch-keys "$batch" --value-size "$value" --keys "$keys")
prefill=(--prefill-params '"toDisk":false'); [ "$disk" = 1 ] && prefill=()
"$loadgen" "${common[@]}" --conns 1 --pipeline 32 --seconds 0.5 --warmup 0.2 "${prefill[@]}" >/dev/null
if [ "$disk" = 1 ]; then
    # Until the journal's entries are in their files, reads are answered from its table.
    unwritten() { python3 "$here/halcyon_stat.py" "$tmp/h.sock" journal.unwrittenEntries; }
    for _ in $(seq 1 600); do [ "$(unwritten)" = 0 ] && break; sleep 0.1; done
fi
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
switches() { cat /proc/"$pid"/task/*/status | awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { n += $2 } END { print n + 0 }'; }
t0="$(ticks)"; s0="$(switches)"
perf record -q -e cpu-clock -F 997 -g -p "$pid" -o "$tmp/perf.data" -- sleep "$(awk -v s="$seconds" 'BEGIN { print s + 1 }')" 2>/dev/null &
perf_pid=$!
sleep 0.3
line="$("$loadgen" "${common[@]}" --conns "$conns" --pipeline "$pipeline" --seconds "$seconds" --warmup 0.2 --no-prefill)"
t1="$(ticks)"; s1="$(switches)"
wait "$perf_pid" || true
replies="$(sed -n 's/.* replies=\([0-9]*\).*/\1/p' <<<"$line")"
echo "loadgen: $line"
awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v n="$replies" \
    'BEGIN { printf "halcyond CPU: %.2f s for %d replies = %.2f µs per request\n", t / hz, n, t / hz * 1e6 / n }'
awk -v d="$((s1 - s0))" -v n="$replies" 'BEGIN { printf "halcyond context switches: %d = %.3f per request\n", d, d / n }'
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
