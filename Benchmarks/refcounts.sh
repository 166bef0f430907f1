#!/usr/bin/env bash
# Reference counting per request: how many times halcyond calls swift_retain and
# swift_release for each request of one kind, and, with --callers, who calls swift_retain.
#
# Counts are exact, not sampled: perf counts the calls through uprobes on libswiftCore's
# swift_retain and swift_release while loadgen runs. One event loop (--event-loop-threads 1)
# and one connection keep the daemon's own counting per read burst the same from run to run:
# with --pipeline P the burst's share is spread over P requests, so compare builds at one
# (conns, pipeline) point only. A uprobe costs microseconds, so the request rate here is a
# fraction of the real one; only the counts mean anything.
#
# --disk: halcyond gets a 1 MiB memory tier and 10,000 keys of 4 KiB are written to the disk
# tier first (as `perf_profile.sh --disk`), so gets are disk hits.
#
# --callers: gdb stops at every swift_retain for --seconds and prints a short backtrace;
# the report is the share of the first three callers' frames, in the whole daemon (perf's
# own call graphs stop inside libswiftCore, whose code has no frame pointers, and its
# uprobe records drop events at this rate).
#
# usage: Benchmarks/refcounts.sh --halcyond PATH [--op get|set|ping] [--conns 1] [--pipeline 16]
#                                [--seconds 3] [--callers] [--disk]
# Needs perf (Debian: linux-perf) with uprobes, gdb for --callers, and gcc for loadgen; root.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
halcyond=""; op=get; conns=1; pipeline=16; seconds=3; callers=0; disk=0
while [ $# -gt 0 ]; do
    case "$1" in
        --halcyond) halcyond="$2"; shift 2 ;;
        --op) op="$2"; shift 2 ;;
        --conns) conns="$2"; shift 2 ;;
        --pipeline) pipeline="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --callers) callers=1; shift ;;
        --disk) disk=1; shift ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        *) echo "refcounts.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x "$halcyond" ] || { echo "refcounts.sh: --halcyond PATH (a release build) is required" >&2; exit 2; }
command -v perf >/dev/null || { echo "refcounts.sh: install linux-perf" >&2; exit 2; }
loadgen="$("$here/loadgen/build.sh")"
core="$(ldd "$halcyond" | awk '/libswiftCore.so/ { print $3; exit }')"
[ -n "$core" ] || { echo "refcounts.sh: $halcyond does not load libswiftCore.so" >&2; exit 2; }
for fn in swift_retain swift_release; do
    perf probe -q -x "$core" "$fn" >/dev/null 2>&1 || perf probe -l 2>/dev/null | grep -q ":$fn " \
        || { echo "refcounts.sh: cannot place a uprobe on $fn" >&2; exit 2; }
done

tmp="$(mktemp -d /tmp/hrefs.XXXXXX)"
pid=""; load=""
cleanup() {
    [ -n "$load" ] && kill -9 "$load" 2>/dev/null
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
flags=(--event-loop-threads 1); [ "$disk" = 1 ] && flags+=(--memory-limit 1MiB)
# No crash backtracer: with --callers the daemon dies of a breakpoint trap (see below), and a
# backtracer it started would outlive it, waiting on a process that is gone.
SWIFT_BACKTRACE=enable=no "$halcyond" --socket "$tmp/h.sock" --cache-dir "$tmp/cache" "${flags[@]}" >"$tmp/halcyond.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$tmp/h.sock" ] && break; sleep 0.1; done
[ -S "$tmp/h.sock" ] || { echo "refcounts.sh: halcyond did not start" >&2; cat "$tmp/halcyond.log" >&2; exit 2; }
common=(--proto halcyon --socket "$tmp/h.sock" --op "$op" --conns "$conns" --pipeline "$pipeline")
[ "$disk" = 1 ] && common+=(--value-size 4096 --keys 10000)
# Prefill and warm up, then let the write-behind store write the prefill's files, so that
# its work does not count against the requests (and, with --disk, every get opens a file).
"$loadgen" "${common[@]}" --seconds 1 >/dev/null
if [ "$disk" = 1 ]; then
    for _ in $(seq 1 600); do
        [ "$(python3 "$here/halcyon_stat.py" "$tmp/h.sock" journal.unwrittenEntries)" = 0 ] && break
        sleep 0.1
    done
else
    sleep 4
fi

if [ "$callers" = 0 ]; then
    perf stat -x, -e probe_libswiftCore:swift_retain,probe_libswiftCore:swift_release -p "$pid" \
        -o "$tmp/stat.csv" -- sleep $((seconds + 1)) &
    stat=$!
    sleep 0.3
    "$loadgen" "${common[@]}" --seconds "$seconds" --no-prefill >"$tmp/load.txt"
    wait "$stat"
    replies="$(grep -o 'replies=[0-9]*' "$tmp/load.txt" | cut -d= -f2)"
    retains="$(awk -F, '/swift_retain/ { print $1 }' "$tmp/stat.csv")"
    releases="$(awk -F, '/swift_release/ { print $1 }' "$tmp/stat.csv")"
    awk -v op="$op" -v c="$conns" -v p="$pipeline" -v n="$replies" -v a="$retains" -v r="$releases" \
        'BEGIN { printf "%s %dx%d: %d replies, %.2f swift_retain and %.2f swift_release per request\n", op, c, p, n, a / n, r / n }'
    exit 0
fi

command -v gdb >/dev/null || { echo "refcounts.sh: --callers needs gdb" >&2; exit 2; }
"$loadgen" "${common[@]}" --seconds $((seconds * 20 + 30)) --no-prefill >/dev/null 2>&1 &
load=$!
sleep 0.5
cat >"$tmp/gdb.cmds" <<'EOF'
set pagination off
set print thread-events off
break swift_retain
commands
silent
bt 4
continue
end
continue
EOF
# gdb is stopped by a signal it cannot catch, which leaves its breakpoints in the daemon's
# code: the daemon runs on into one and dies of the trap, or is killed by the cleanup.
( timeout -s KILL "$seconds" gdb -p "$pid" -batch -x "$tmp/gdb.cmds" >"$tmp/gdb.txt" 2>&1 ) 2>/dev/null || true
python3 - "$tmp/gdb.txt" <<'EOF'
import collections, re, subprocess, sys
text = open(sys.argv[1], errors="replace").read()
counts = collections.Counter()
total = 0
for block in re.split(r"\n(?=#0 )", text):
    frames = re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", block, re.M)
    if not frames or "swift_retain" not in frames[0]:
        continue
    total += 1
    counts[" <- ".join(frames[1:4])] += 1
if total == 0:
    sys.exit("refcounts.sh: gdb stopped at no swift_retain")
names = list(counts)
demangled = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(names),
                           capture_output=True, text=True).stdout.split("\n")
print(f"{total} calls of swift_retain; share of each caller (its two callers after it):")
for (name, n), shown in sorted(zip(counts.items(), demangled), key=lambda item: -item[0][1])[:40]:
    print(f"{100 * n / total:5.1f}%  {shown[:220]}")
EOF
