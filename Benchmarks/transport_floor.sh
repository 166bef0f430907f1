#!/usr/bin/env bash
# The transport floors against halcyond and memcached, run in turn in every round at each
# cell: what SwiftNIO alone costs per request (`nio-floor`: `transport/`'s TransportFloor, a
# SwiftNIO server that answers each line with the reply halcyond would send and does nothing
# else), what the same server costs on epoll without SwiftNIO (`epoll-floor`: EpollFloor),
# halcyond, memcached, and, at get cells only, halcyond's memory hits on that epoll loop
# (`epoll-halcyon`: EpollHalcyon, the daemon's storage engine answering `cache.get` lines
# there, its keys set in memory at start).
#
# For each cell and server: requests/s, and server CPU µs per request in user and in system
# time (`/proc/PID/stat` over the run, divided by its replies), medians over the rounds; then
# the paired ratios to memcached (each server's run of a round over memcached's run of that
# round, medians over the rounds) of the rate and of the CPU. Where the SwiftNIO floor
# trails memcached, halcyond cannot lead it at that cell without a cheaper transport
# underneath, whatever its own work costs; halcyond's user time over that floor's is what its
# own work adds, and the epoll floor's place says what a transport of its own could give.
#
# usage: Benchmarks/transport_floor.sh [--halcyond PATH] [--rounds 9] [--seconds 1]
#                                      [--threads N] [--memcached-threads 2]
#                                      [--cells "get 8 1,mixed 8 1,get 8 16"]
# --threads: the floors' threads (default: the core count, as halcyond's event loops).
# --memcached-threads: memcached's worker threads (default 2, as `compare.sh` runs it). Needs
# memcached and gcc (loadgen); builds the floors with `swift build -c release` in transport/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
halcyond="$root/.build/release/halcyond"; rounds=9; seconds=1; threads=$(nproc); mc_threads=2
cells="get 8 1,mixed 8 1,get 8 16,mixed 8 16"
while [ $# -gt 0 ]; do
    case "$1" in
        --halcyond) halcyond="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --memcached-threads) mc_threads="$2"; shift 2 ;;
        --cells) cells="$2"; shift 2 ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        *) echo "transport_floor.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x "$halcyond" ] || { echo "transport_floor.sh: no halcyond at $halcyond (swift build -c release --product halcyond)" >&2; exit 2; }
command -v memcached >/dev/null || { echo "transport_floor.sh: install memcached" >&2; exit 2; }
loadgen="$("$here/loadgen/build.sh")"
swift build -c release --package-path "$here/transport" >&2
bin="$(swift build -c release --package-path "$here/transport" --show-bin-path)"

tmp="$(mktemp -d /tmp/htfloor.XXXXXX)"
chmod 700 "$tmp"
pids=()
cleanup() {
    [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
mc_user=(); [ "$(id -u)" = 0 ] && mc_user=(-u root)
"$bin/TransportFloor" "$tmp/nio.sock" "$threads" >"$tmp/nio.log" 2>&1 & pids+=($!)
"$bin/EpollFloor" "$tmp/epoll.sock" "$threads" >"$tmp/epoll.log" 2>&1 & pids+=($!)
"$halcyond" --socket "$tmp/halcyon.sock" --cache-dir "$tmp/cache" >"$tmp/halcyond.log" 2>&1 & pids+=($!)
memcached -s "$tmp/mc.sock" -m 1024 -t "$mc_threads" "${mc_user[@]}" >"$tmp/memcached.log" 2>&1 & pids+=($!)
mkdir "$tmp/eh"
"$bin/EpollHalcyon" "$tmp/eh/eh.sock" "$threads" >"$tmp/eh.log" 2>&1 & pids+=($!)
names=(nio-floor epoll-floor halcyond memcached epoll-halcyon)
protos=(halcyon halcyon halcyon memcached halcyon)
socks=("$tmp/nio.sock" "$tmp/epoll.sock" "$tmp/halcyon.sock" "$tmp/mc.sock" "$tmp/eh/eh.sock")
for s in "${socks[@]}"; do
    for _ in $(seq 200); do [ -S "$s" ] && break; sleep 0.05; done
    [ -S "$s" ] || { echo "transport_floor.sh: no socket at $s" >&2; cat "$tmp"/*.log >&2; exit 1; }
done
# The keys the gets hit: set once (halcyond's to memory only, as compare.sh's floor cells).
"$loadgen" --proto halcyon --socket "$tmp/halcyon.sock" --op get --requests 1 --prefill-params '"toDisk":false' >/dev/null
"$loadgen" --proto memcached --socket "$tmp/mc.sock" --op get --requests 1 >/dev/null

cpu_ticks() { awk '{print $14 "," $15}' "/proc/$1/stat"; }
IFS=, read -r -a cell_list <<<"$cells"
for cell in "${cell_list[@]}"; do
    read -r op conns pipeline <<<"$cell"
    # EpollHalcyon answers gets only.
    servers=4; [ "$op" = get ] && servers=5
    for round in $(seq 1 "$rounds"); do
        for k in $(seq 0 $((servers - 1))); do
            j=$(( (k + round) % servers ))
            before=$(cpu_ticks "${pids[$j]}")
            line=$("$loadgen" --proto "${protos[$j]}" --socket "${socks[$j]}" --op "$op" --conns "$conns" \
                --pipeline "$pipeline" --seconds "$seconds" --warmup 0.3 --no-prefill | tail -1)
            after=$(cpu_ticks "${pids[$j]}")
            echo "$op $conns $pipeline $round ${names[$j]} $before $after $line"
        done
    done
done >"$tmp/runs"

python3 - "$tmp/runs" "$(getconf CLK_TCK)" <<'PY'
import statistics, sys
ticks = int(sys.argv[2])
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    op, conns, pipeline, rnd, name, before, after = f[:7]
    fields = dict(x.split("=", 1) for x in f[7:] if "=" in x)
    # The CPU covers the warm-up too, and so does loadgen's `replies`.
    per = 1e6 / ticks / max(1, int(fields["replies"]))
    (u0, s0), (u1, s1) = (map(int, before.split(",")), map(int, after.split(",")))
    run = (float(fields["rps"]), (u1 - u0) * per, (s1 - s0) * per)
    runs.setdefault((op, conns, pipeline), {}).setdefault(name, []).append(run)
print("| op | load | server | req/s | CPU µs/req user / system / both | rate / memcached | CPU / memcached |")
print("|---|---|---|---:|---:|---:|---:|")
for (op, conns, pipeline), by in runs.items():
    for name in ("nio-floor", "epoll-floor", "epoll-halcyon", "halcyond", "memcached"):
        if name not in by:
            continue
        r = by[name]
        rate = statistics.median(x[0] for x in r)
        user, system = statistics.median(x[1] for x in r), statistics.median(x[2] for x in r)
        both = statistics.median(x[1] + x[2] for x in r)
        pairs = list(zip(r, by["memcached"]))
        rate_ratio = statistics.median(a[0] / b[0] for a, b in pairs)
        cpu_ratio = statistics.median((a[1] + a[2]) / (b[1] + b[2]) for a, b in pairs)
        print(f"| {op} | {conns}×{pipeline} | {name} | {rate:.0f} | {user:.2f} / {system:.2f} / {both:.2f} "
              f"| {rate_ratio:.3f} | {cpu_ratio:.3f} |")
PY
