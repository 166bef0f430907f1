#!/usr/bin/env bash
# Side-by-side load comparison of halcyond, Redis and memcached over Unix sockets.
#
# Starts each server on a socket in a fresh temp folder (no TCP anywhere), drives
# all three with the same C load generator (loadgen/loadgen.c), and writes a
# markdown report: requests/s per cell with the ratios halcyond/redis and
# halcyond/memcached, then halcyond alone per callback-queue policy and for disk
# reads, the latter beside the file floor (a C program reading the same cache files).
# Every server it started is stopped on exit. The floor section is the request
# floor and the target cells: ping, get, set and the 9:1 mix, with each server's CPU per
# request and context switches per request, optionally beside a second halcyond build
# (--baseline), all interleaved run by run.
#
# usage: Benchmarks/compare.sh [--seconds S] [--out FILE] [--only LIST]
#                              [--halcyond PATH [--halcyond BASELINE]] [--baseline PATH]
#                              [--results] [--no-build] [--quick]
#   --seconds S      measured seconds per run (default 1; each run also has 0.5 s warm-up)
#   --warmup S       warm-up seconds before each run (default 0.5)
#   --repeat N       runs per cell, servers interleaved; the report keeps the median (default 3)
#   --single-repeat N  runs of the cells with one request in flight per connection or one
#                    connection (default 3 x --repeat: their rate swings most from run to run)
#   --no-pin-single  run the cells of one connection unpinned
#                    (by default the server's threads and the load generator share one vCPU
#                    for them, see `pin_single` below)
#   --out FILE       report path (default Benchmarks/.reports/compare.md; the tables worth keeping go into Benchmarks/RESULTS.md)
#   --only LIST      comma-separated sections: floor,main,reads,policies,disk,memset,atomic,wal (default all);
#                    diskfloor: only the first part of disk (disk hits against the file floor)
#   --halcyond PATH  use this binary instead of building the repo's release halcyond; given twice,
#                    the second is the baseline
#   --baseline PATH  a second halcyond, run beside the first in the floor, main, atomic and diskfloor sections
#                    (its own socket and cache folder, interleaved with the others; medians)
#   --results        also write the report's tables into Benchmarks/RESULTS.md, replacing the
#                    section this script owns there (between its begin/end markers)
#   --no-build       do not run `swift build` (use .build/release/halcyond as it is)
#   --quick          1 s cells and fewer disk keys (a smoke run, not for the record)
# Environment: DISK_KEYS (keys per disk-read round, default 10000), KEYS (key space, default 10000),
#   HALCYOND_ARGS (extra halcyond flags, split on spaces; e.g. "--log-level warning"),
#   BASELINE_ARGS (extra flags of the --baseline halcyond instead of HALCYOND_ARGS, when set;
#   one binary given twice with different flags compares the flags, e.g. tenancy on and off),
#   SUSTAINED_SECONDS (the wal section's sustained set load, default 60),
#   FLOOR_CELLS (the floor section's cells, "OP CONNS PIPELINE" comma-separated; default all).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
cell_seconds=1
warmup=0.5
repeat=3
single_repeat=""
pin_single=1
out="$here/.reports/compare.md"
only="floor,main,reads,policies,disk,memset,atomic,wal"
halcyond=""
baseline=""
results=0
build=1
keys="${KEYS:-10000}"
disk_keys="${DISK_KEYS:-10000}"

while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) cell_seconds="$2"; shift 2 ;;
        --repeat) repeat="$2"; shift 2 ;;
        --single-repeat) single_repeat="$2"; shift 2 ;;
        --no-pin-single) pin_single=0; shift ;;
        --warmup) warmup="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --only) only="$2"; shift 2 ;;
        --halcyond) if [ -n "$halcyond" ]; then baseline="$2"; else halcyond="$2"; fi; shift 2 ;;
        --no-build) build=0; shift ;;
        --quick) cell_seconds=0.5; warmup=0.3; repeat=1; disk_keys=5000; shift ;;
        --baseline) baseline="$2"; shift 2 ;;
        --results) results=1; shift ;;
        -h|--help) sed -n '2,41p' "$0"; exit 0 ;;
        *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -n "$single_repeat" ] || single_repeat=$((repeat * 3))
want() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
log() { echo "[compare $(date -u +%H:%M:%S)] $*" >&2; }

# ------------------------------------------------------------------ tools
need_pkg() { # command package
    command -v "$1" >/dev/null && return 0
    if [ "$(id -u)" = 0 ]; then
        log "installing $2"
        apt-get install -y -qq "$2" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$2" >/dev/null; }
    else
        echo "compare.sh: $1 missing; install $2" >&2; exit 2
    fi
}
need_pkg redis-server redis-server
need_pkg memcached memcached
need_pkg cc gcc
loadgen="$("$here/loadgen/build.sh")"

if [ -z "$halcyond" ]; then
    if [ "$build" = 1 ]; then
        log "building halcyond (release) in $root"
        (cd "$root" && swift build -c release --product halcyond) >&2 || { echo "compare.sh: halcyond build failed" >&2; exit 2; }
    fi
    halcyond="$root/.build/release/halcyond"
fi
[ -x "$halcyond" ] || { echo "compare.sh: no halcyond at $halcyond" >&2; exit 2; }
[ -z "$baseline" ] || [ -x "$baseline" ] || { echo "compare.sh: no baseline halcyond at $baseline" >&2; exit 2; }

# ------------------------------------------------------------------ servers
tmp="$(mktemp -d /tmp/hcmp.XXXXXX)"   # short: sun_path holds 108 bytes
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

wait_socket() { # path pid name
    for _ in $(seq 1 200); do
        [ -S "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || { echo "compare.sh: $3 exited; log:" >&2; cat "$tmp/$3.log" >&2; exit 2; }
        sleep 0.1
    done
    echo "compare.sh: $3 did not create $1" >&2; exit 2
}

redis-server --port 0 --unixsocket "$tmp/redis.sock" --unixsocketperm 700 --save '' --appendonly no \
    --logfile "$tmp/redis.log" &
redis_pid=$!
pids+=($!); wait_socket "$tmp/redis.sock" $! redis
# The write anchor: Redis with the same crash guarantee as halcyond's journal (an
# acknowledged write survives kill -9), fsync once a second.
mkdir -p "$tmp/aof"
redis-server --port 0 --unixsocket "$tmp/redisaof.sock" --unixsocketperm 700 --save '' --appendonly yes \
    --appendfsync everysec --dir "$tmp/aof" --logfile "$tmp/redisaof.log" &
redisaof_pid=$!
pids+=($!); wait_socket "$tmp/redisaof.sock" $! redisaof
mc_user=(); [ "$(id -u)" = 0 ] && mc_user=(-u root)
# Two worker threads, as many as halcyond's event loops, so both serve from the same number
# of threads (on two vCPUs memcached's default of four is also the slower one at one
# request in flight: Benchmarks/RESULTS.md, "The transport floor at one request in flight;
# what two event loops cost a set").
memcached -s "$tmp/mc.sock" -m 1024 -t 2 "${mc_user[@]}" >"$tmp/memcached.log" 2>&1 &
memcached_pid=$!
pids+=($!); wait_socket "$tmp/mc.sock" $! memcached
start_halcyond() { # binary name flags [more flags...]: starts it on $tmp/NAME.sock with its own cache folder
    # shellcheck disable=SC2086  # the flags are a list, split on spaces
    "$1" --socket "$tmp/$2.sock" --cache-dir "$tmp/$2-cache" $3 "${@:4}" >"$tmp/$2.log" 2>&1 &
    started_pid=$!
    pids+=($started_pid)
    wait_socket "$tmp/$2.sock" $started_pid "$2"
}
start_halcyond "$halcyond" halcyon "${HALCYOND_ARGS:-}"
halcyond_pid=$started_pid
declare -A sock=([redis]="$tmp/redis.sock" [memcached]="$tmp/mc.sock" [halcyon]="$tmp/halcyon.sock" [redisaof]="$tmp/redisaof.sock")
declare -A server_pid=([redis]="$redis_pid" [memcached]="$memcached_pid" [halcyon]="$halcyond_pid" [redisaof]="$redisaof_pid")
# The baseline build, when given, is the proto `halcyonb` (loadgen speaks halcyon to it).
if [ -n "$baseline" ]; then
    start_halcyond "$baseline" halcyonb "${BASELINE_ARGS-${HALCYOND_ARGS:-}}"
    sock[halcyonb]="$tmp/halcyonb.sock"
    server_pid[halcyonb]=$started_pid
fi
# with_baseline PROTOS: PROTOS, plus halcyonb after halcyon when a baseline runs.
with_baseline() { if [ -n "$baseline" ]; then echo "${1/halcyon/halcyon,halcyonb}"; else echo "$1"; fi; }
clk_tck="$(getconf CLK_TCK)"
# cpu_ticks PID: user + system CPU time the process has used, in clock ticks (/proc/PID/stat).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# context_switches PID: voluntary + involuntary switches of all the process's threads
# (/proc/PID/task/*/status; a thread that exits during a run takes its count with it).
context_switches() {
    cat /proc/"$1"/task/*/status 2>/dev/null |
        awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { n += $2 } END { print n + 0 }'
}

# ------------------------------------------------------------------ cells
raw="$tmp/raw.txt"
: >"$raw"
field() { # line name
    sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"
}
# run PROTO LOADGEN-ARGS...: prints loadgen's line ("" when it failed); keeps it in $raw.
run() {
    local proto="$1"; shift
    local line rc=0 cpu0 cpu1 cs0 cs1 lp="$proto"
    [ "$proto" = redisaof ] && lp=redis
    case "$proto" in halcyon?*) lp=halcyon ;; esac
    local pin=()
    if [ "$pin_now" = 1 ]; then
        taskset -a -p -c 0 "${server_pid[$proto]}" >/dev/null
        pin=(taskset -c 0)
    fi
    cpu0="$(cpu_ticks "${server_pid[$proto]}")"
    cs0="$(context_switches "${server_pid[$proto]}")"
    line="$("${pin[@]}" "$loadgen" --proto "$lp" --socket "${sock[$proto]}" "$@" 2>>"$tmp/loadgen.err")" || rc=$?
    cpu1="$(cpu_ticks "${server_pid[$proto]}")"
    cs1="$(context_switches "${server_pid[$proto]}")"
    [ "$pin_now" = 1 ] && taskset -a -p -c "0-$(($(nproc) - 1))" "${server_pid[$proto]}" >/dev/null
    if [ -z "$line" ]; then
        log "FAILED ($rc): $proto $*: $(tail -1 "$tmp/loadgen.err")"
        echo "FAILED $proto $*" >>"$raw"
        echo ""
        return 0
    fi
    [ "$rc" = 0 ] || log "errors in replies ($rc): $(tail -1 "$tmp/loadgen.err")"
    # Server CPU per request: the server's CPU time over the whole run (warm-up and, on a
    # cell's first run, the prefill included) divided by the replies of the run.
    line="$line server_cpu_us=$(awk -v t="$((cpu1 - cpu0))" -v hz="$clk_tck" -v n="$(field "$line" replies)" \
        'BEGIN { if (n + 0 > 0) printf "%.2f", t / hz * 1e6 / n; else printf "n/a" }')"
    # Context switches per request, counted the same way (all threads, whole run).
    line="$line server_cs_per_req=$(awk -v d="$((cs1 - cs0))" -v n="$(field "$line" replies)" \
        'BEGIN { if (n + 0 > 0) printf "%.3f", d / n; else printf "n/a" }')"
    line="$line server=$proto"
    echo "$line" >>"$raw"
    log "$line"
    echo "$line"
}
rps() { local v; v="$(field "$1" rps)"; echo "${v:-n/a}"; }
cpu() { local v; v="$(field "$1" server_cpu_us)"; echo "${v:-n/a}"; }
cs() { local v; v="$(field "$1" server_cs_per_req)"; echo "${v:-n/a}"; }
ratio() { # a b
    awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2f", a / b; else printf "n/a" }'
}
lat() { # line -> "p50 / p99"
    [ -n "$1" ] && echo "$(field "$1" p50_us) / $(field "$1" p99_us)" || echo "n/a"
}
notes() { # line -> misses/errors when not zero
    local m e d
    [ -n "$1" ] || { echo "failed"; return; }
    m="$(field "$1" misses)"; e="$(field "$1" errors)"
    d=""
    [ "${m:-0}" != 0 ] && d="$d misses=$m"
    [ "${e:-0}" != 0 ] && d="$d errors=$e"
    echo "${d# }"
}
common=(--seconds "$cell_seconds" --warmup "$warmup" --keys "$keys")

# median LINE...: the line with the median requests/s (failed runs left out).
median() {
    printf '%s\n' "$@" | sed -n 's/.* rps=\([0-9.]*\) .*/\1\t&/p' | sort -n -k1,1 |
        awk -F'\t' '{ l[NR] = $2 } END { if (NR) print l[int((NR + 1) / 2)] }'
}
# cell PROTOS ARGS...: runs each proto of the comma-separated PROTOS $repeat times, interleaved
# so that noise from other work on the machine falls on all of them alike; sets med[proto] to
# the median line. Only the first run of a proto prefills.
declare -A med=()
pin_now=0
cell() {
    local protos="$1"; shift
    local -A lines=()
    local rep p pre reps="$repeat" a prev="" c="" pl=""
    # With one request in flight per connection, the rate is set by wake-ups, and on 2
    # vCPUs it swings with where the scheduler puts the processes: on this kind of VM an
    # idle vCPU halts, and waking it costs tens of µs on each side, so runs of one build
    # differ by up to 8x at one connection and by up to 1.8x at four. Those cells take
    # --single-repeat runs. A single connection waits for each batch's replies before it
    # sends the next, so its rate is set by the same wake-ups at any pipeline depth: such
    # cells take --single-repeat runs too and, unless --no-pin-single, run with the
    # server's threads and the load generator on one vCPU (`pin_single`). The hand-off is
    # then a plain context switch on a busy vCPU, and the cell measures each server's own
    # request path rather than vCPU placement.
    for a in "$@"; do
        case "$prev" in --conns) c="$a" ;; --pipeline) pl="$a" ;; esac
        prev="$a"
    done
    pin_now=0
    if [ "$pl" = 1 ] || [ "$c" = 1 ]; then
        reps="$single_repeat"
        [ "$c" = 1 ] && pin_now="$pin_single"
    fi
    # Each repeat starts one server later in the list than the one before, so every
    # server runs in every position (after an idle server, after one still finishing
    # its own background work) equally often.
    local order=(${protos//,/ }) n i
    n=${#order[@]}
    for rep in $(seq 1 "$reps"); do
        pre=(); [ "$rep" -gt 1 ] && pre=(--no-prefill)
        for i in $(seq 0 $((n - 1))); do
            p="${order[$(((i + rep - 1) % n))]}"
            lines[$p]+="$(run "$p" "$@" "${pre[@]}")"$'\n'
        done
    done
    for p in ${protos//,/ }; do
        local arr=()
        mapfile -t arr <<<"${lines[$p]}"
        med[$p]="$(median "${arr[@]}")"
    done
    pin_now=0
}

report="$tmp/report.md"
{
    echo "# halcyond vs Redis vs memcached over Unix sockets"
    echo
    echo "- Run: $(date -u '+%Y-%m-%d %H:%M UTC'), \`Benchmarks/compare.sh\`: each cell is the median of $repeat runs ($single_repeat with one request in flight per connection or one connection$([ "$pin_single" = 1 ] && echo "; at one connection with the server's threads and the load generator pinned to one vCPU")) of $cell_seconds s (after $warmup s warm-up), the servers interleaved, each repeat starting one server later in the list; key space $keys"
    echo "- Machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- The load generator and the server share the same 2 cores, and other builds may run on the machine: treat differences under ~15% as noise."
    echo "- halcyond: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?') ($halcyond)${baseline:+; baseline: $baseline}; $(redis-server --version | cut -d' ' -f1-3); $(memcached -V)"
    echo "- Servers: \`redis-server --port 0 --unixsocket … --save '' --appendonly no\`; \`memcached -s … -m 1024 -t 2\`; \`halcyond --socket … --cache-dir … ${HALCYOND_ARGS:-}\`$([ -n "$baseline" ] && [ -n "${BASELINE_ARGS+set}" ] && echo "; the baseline with \`halcyond … ${BASELINE_ARGS}\`") (defaults otherwise)."
    echo "- Each connection is one client thread sending batches of \`pipeline\` requests and reading all replies before the next batch; latency (µs) is that of one batch."
    echo
} >"$report"

# ------------------------------------------------------------------ 0. the floor and the targets
if want floor; then
    log "section: the request floor and the target cells"
    bcols=""; bsep=""
    [ -n "$baseline" ] && { bcols=" baseline | baseline/redis |"; bsep="---:|---:|"; }
    {
        echo "## The request floor and the target cells: ping, get, set, 9:1 mix (value 100 B)"
        echo
        echo "Gets and pings against Redis without persistence; sets and the mix against Redis with \`appendonly yes\`, \`appendfsync everysec\` (both servers acknowledge a write that survives kill -9). memcached keeps every write in memory only; its ping is \`version\`. Load C×P: C connections, each sending batches of P requests. CPU µs/req: the server's CPU time (user + system, \`/proc/PID/stat\`) over the median run divided by its replies, warm-up included. Context switches/req: voluntary + involuntary switches of all the server's threads (\`/proc/PID/task/*/status\`) over the same run, divided by its replies. CPU/redis: halcyond's CPU per request over Redis's in the same run.${baseline:+ baseline: a second halcyond build (\`$baseline\`), run in turn with the others.}"
        echo
        echo "| op | load | redis | memcached | halcyond | halcyond/redis | halcyond/memcached |$bcols redis p99 µs | halcyond p99 µs | CPU µs/req redis / memcached / halcyond${baseline:+ / baseline} | CPU/redis | ctx switches/req redis / memcached / halcyond${baseline:+ / baseline} |"
        echo "|---|---|---:|---:|---:|---:|---:|$bsep---:|---:|---:|---:|---:|"
    } >>"$report"
    floor_cells="${FLOOR_CELLS:-ping 1 1,ping 8 16,get 1 1,get 8 1,get 8 16,get 64 16,set 1 1,set 8 1,set 8 16,set 64 16,mixed 1 1,mixed 8 1,mixed 8 16,mixed 64 16}"
    IFS=, read -r -a floor_specs <<<"$floor_cells"
    for spec in "${floor_specs[@]}"; do
        read -r op c p <<<"$spec"
        r=redis; case "$op" in set|mixed) r=redisaof ;; esac
        extra=(--op "$op" --value-size 100 --conns "$c" --pipeline "$p" --key-prefix "f:")
        case "$op" in
            ping|set) extra+=(--no-prefill) ;;
            *) extra+=(--prefill-params '"toDisk":false') ;;
        esac
        cell "$(with_baseline "$r,memcached,halcyon")" "${common[@]}" "${extra[@]}"
        rl="${med[$r]}"; m="${med[memcached]}"; h="${med[halcyon]}"; b="${med[halcyonb]:-}"
        label="$op"; [ "$op" = mixed ] && label="9 get : 1 set"
        bvals=""; [ -n "$baseline" ] && bvals=" $(rps "$b") | $(ratio "$(rps "$b")" "$(rps "$rl")") |"
        echo "| $label | ${c}×$p | $(rps "$rl") | $(rps "$m") | $(rps "$h") | $(ratio "$(rps "$h")" "$(rps "$rl")") | $(ratio "$(rps "$h")" "$(rps "$m")") |$bvals $(field "$rl" p99_us) | $(field "$h" p99_us) | $(cpu "$rl") / $(cpu "$m") / $(cpu "$h")${baseline:+ / $(cpu "$b")} | $(ratio "$(cpu "$h")" "$(cpu "$rl")") | $(cs "$rl") / $(cs "$m") / $(cs "$h")${baseline:+ / $(cs "$b")} |" >>"$report"
    done
    {
        echo
        echo "The same cells as paired ratios (\`baseline_ratios.py --peers\`): halcyond's run of each repeat over the peer's run of that repeat, medians over the repeats; the peer is Redis as above and memcached. A pair ran seconds apart, in the same phase of the machine's speed, which two medians need not share."
        echo
        python3 "$here/baseline_ratios.py" --peers "$raw" "${floor_specs[@]}" || echo "(no paired ratios)"
    } >>"$report"
    echo >>"$report"
fi

# ------------------------------------------------------------------ 1. main matrix
if want main; then
    log "section: main matrix"
    {
        echo "## Memory hits (get) and sets: requests/s"
        echo
        echo "Gets hit keys set beforehand (uniform over the key space; halcyond's prefill uses \`\"toDisk\": false\`, the keys only need to be in memory). A halcyond \`cache.set\` also writes the value to the disk tier (\`toDisk\` defaults to true) before it answers; Redis and memcached keep sets in memory only. See *sets to memory only* below for the like-for-like write."
        echo
        echo "Server CPU µs/req: the server process's CPU time (user + system, \`/proc/PID/stat\`) over the median run divided by the replies of that run."
        echo
        echo "| op | value B | conns | pipeline | redis | memcached | halcyond | halcyond/redis | halcyond/memcached |${baseline:+ baseline | halcyond/baseline |} halcyond p50/p99 µs | server CPU µs/req halcyond / redis${baseline:+ / baseline} | notes |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|${baseline:+---:|---:|}---:|---:|---|"
    } >>"$report"
    for op in get set; do
        for v in 100 4096; do
            for c in 1 4; do
                for p in 1 32; do
                    extra=(--op "$op" --value-size "$v" --conns "$c" --pipeline "$p" --key-prefix "m$v:")
                    # Gets need the keys in memory only: a prefill to disk costs ~10 s at halcyond's set rate.
                    if [ "$op" = set ]; then extra+=(--no-prefill); else extra+=(--prefill-params '"toDisk":false'); fi
                    cell "$(with_baseline redis,memcached,halcyon)" "${common[@]}" "${extra[@]}"
                    r="${med[redis]}"; m="${med[memcached]}"; h="${med[halcyon]}"; b="${med[halcyonb]:-}"
                    bvals=""; [ -n "$baseline" ] && bvals=" $(rps "$b") | $(ratio "$(rps "$h")" "$(rps "$b")") |"
                    n="$(notes "$h")"
                    [ -n "$(notes "$r")" ] && n="$n redis: $(notes "$r")"
                    [ -n "$(notes "$m")" ] && n="$n memcached: $(notes "$m")"
                    echo "| $op | $v | $c | $p | $(rps "$r") | $(rps "$m") | $(rps "$h") | $(ratio "$(rps "$h")" "$(rps "$r")") | $(ratio "$(rps "$h")" "$(rps "$m")") |$bvals $(lat "$h") | $(cpu "$h") / $(cpu "$r")${baseline:+ / $(cpu "$b")} | $n |" >>"$report"
                done
            done
        done
    done
    echo >>"$report"
fi

# ------------------------------------------------------------------ 1b. memory-hit read cells
if want reads; then
    log "section: memory-hit reads"
    {
        echo "## Memory-hit gets against Redis without persistence"
        echo
        echo "Targets: ≥ 0.9× Redis at 1×1, ≥ 0.8× at 8×1, ≥ 0.5× at 8×16 and 64×16, ≥ 0.6× at 8×16 with 4 KiB values; server CPU ≤ 5 µs per get."
        echo
        echo "| value B | conns | pipeline | redis | halcyond | halcyond/redis | redis p50/p99 µs | halcyond p50/p99 µs | server CPU µs/req halcyond / redis | notes |"
        echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    } >>"$report"
    for spec in "100 1 1" "100 8 1" "100 8 16" "100 64 16" "4096 8 16"; do
        read -r v c p <<<"$spec"
        cell redis,halcyon "${common[@]}" --op get --value-size "$v" --conns "$c" --pipeline "$p" \
            --key-prefix "r$v:" --prefill-params '"toDisk":false'
        r="${med[redis]}"; h="${med[halcyon]}"
        echo "| $v | $c | $p | $(rps "$r") | $(rps "$h") | $(ratio "$(rps "$h")" "$(rps "$r")") | $(lat "$r") | $(lat "$h") | $(cpu "$h") / $(cpu "$r") | $(notes "$h") |" >>"$report"
    done
    # The floor under every cell above: `server.ping` against PING is the socket, the
    # envelope's parse and the reply, with no cache work.
    cell redis,halcyon "${common[@]}" --op ping --conns 8 --pipeline 16 --no-prefill
    r="${med[redis]}"; h="${med[halcyon]}"
    echo "| ping | 8 | 16 | $(rps "$r") | $(rps "$h") | $(ratio "$(rps "$h")" "$(rps "$r")") | $(lat "$r") | $(lat "$h") | $(cpu "$h") / $(cpu "$r") | \`server.ping\` / PING: the transport alone $(notes "$h") |" >>"$report"
    echo >>"$report"
fi

# ------------------------------------------------------------------ 2. sets to memory only
if want memset; then
    log "section: sets to memory only"
    {
        echo "## Sets to memory only (\`cache.set\` with \`\"toDisk\": false\`), value 100 B"
        echo
        echo "| conns | pipeline | redis | memcached | halcyond toDisk:false | halcyond/redis | halcyond/memcached | halcyond p50/p99 µs | notes |"
        echo "|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    } >>"$report"
    for c in 1 4; do
        for p in 1 32; do
            extra=(--op set --value-size 100 --conns "$c" --pipeline "$p" --key-prefix "s:" --no-prefill)
            cell redis,memcached "${common[@]}" "${extra[@]}"
            r="${med[redis]}"; m="${med[memcached]}"
            cell halcyon "${common[@]}" "${extra[@]}" --set-params '"toDisk":false'
            h="${med[halcyon]}"
            echo "| $c | $p | $(rps "$r") | $(rps "$m") | $(rps "$h") | $(ratio "$(rps "$h")" "$(rps "$r")") | $(ratio "$(rps "$h")" "$(rps "$m")") | $(lat "$h") | $(notes "$h") |" >>"$report"
        done
    done
    echo >>"$report"
fi

# ------------------------------------------------------------------ 3. callback policies
if want policies; then
    log "section: callback policies"
    policies=(
        '"untouch"'
        '"mainAsync"'
        '{"dispatch":{"concurrent":false,"qos":"default"}}'
        '{"operationQueue":{"maxConcurrentOperationCount":1}}'
    )
    {
        echo "## halcyond memory-hit gets per callback-queue policy, value 100 B"
        echo
        echo "Each connection first sends \`connection.configure {\"callbackQueue\": …}\`."
        echo
        echo "| callbackQueue | conns | pipeline | requests/s | vs untouch | p50/p99 µs | notes |"
        echo "|---|---:|---:|---:|---:|---:|---|"
    } >>"$report"
    declare -A base=()
    for pol in "${policies[@]}"; do
        for c in 1 4; do
            for p in 1 32; do
                cell halcyon "${common[@]}" --op get --value-size 100 --conns "$c" --pipeline "$p" \
                    --key-prefix "m100:" --prefill-params '"toDisk":false' --configure "{\"callbackQueue\":$pol}"
                h="${med[halcyon]}"
                [ "$pol" = '"untouch"' ] && base[$c.$p]="$(rps "$h")"
                echo "| \`$pol\` | $c | $p | $(rps "$h") | $(ratio "$(rps "$h")" "${base[$c.$p]:-0}") | $(lat "$h") | $(notes "$h") |" >>"$report"
            done
        done
    done
    echo >>"$report"
fi

# ------------------------------------------------------------------ 4. disk reads
# stat_field SOCKET PATH: one number of halcyond's `cache.stats` (PATH: dotted, e.g.
# journal.unwrittenEntries), "" when the daemon does not answer.
stat_field() { python3 "$here/halcyon_stat.py" "$1" "$2" 2>/dev/null || true; }
if want disk || want diskfloor; then
    log "section: disk hits against the file floor"
    floor="$("$here/diskfloor/build.sh")"
    # A memory tier of 1 MiB holds about 250 of the 10,000 values of 4 KiB: nearly every
    # get of the uniform key space is a disk hit (the put-back evicts another key).
    dprotos=halcyondisk
    start_halcyond "$halcyond" halcyondisk "${HALCYOND_ARGS:-}" --memory-limit 1MiB
    sock[halcyondisk]="$tmp/halcyondisk.sock"; server_pid[halcyondisk]=$started_pid
    if [ -n "$baseline" ]; then
        start_halcyond "$baseline" halcyondiskb "${BASELINE_ARGS-${HALCYOND_ARGS:-}}" --memory-limit 1MiB
        sock[halcyondiskb]="$tmp/halcyondiskb.sock"; server_pid[halcyondiskb]=$started_pid
        dprotos=halcyondisk,halcyondiskb
    fi
    dargs=(--op get --value-size 4096 --keys 10000 --key-prefix "df:")
    for p in ${dprotos//,/ }; do
        # Fill the disk tier once, then wait until the journal's entries are all in their
        # files: until then a read is answered from the journal's table, not a file.
        "$loadgen" --proto halcyon --socket "${sock[$p]}" "${dargs[@]}" --conns 1 --pipeline 32 \
            --seconds 0.1 --warmup 0 >/dev/null 2>>"$tmp/loadgen.err"
        for _ in $(seq 1 600); do
            [ "$(stat_field "${sock[$p]}" journal.unwrittenEntries)" = 0 ] && break
            sleep 0.1
        done
        [ "$(stat_field "${sock[$p]}" journal.unwrittenEntries)" = 0 ] || log "$p: files still unwritten"
    done
    files_dir="$tmp/halcyondisk-cache/default"
    [ -d "$files_dir" ] || { echo "compare.sh: no cache folder $files_dir" >&2; exit 2; }
    {
        echo "## Disk hits against the file floor (\`cache.get\`, value 4 KiB, 10,000 keys, \`--memory-limit 1MiB\`)"
        echo
        echo "A halcyond with a 1 MiB memory tier, filled once with 10,000 values of 4 KiB (written to their files before the runs), then uniform gets over the keys: nearly all are disk hits (\`disk hits\`: replies saying \`\"cacheType\":\"disk\"\`), read on the ioQueue. CPU µs/req and context switches/req as in the floor section. The file floor: \`Benchmarks/diskfloor\` (C) reads the same cache files with open + fstat + read + close, as many threads as connections, each walking its own slice, 3 passes after one warm-up pass; its CPU µs per read is the process's user + system time over the passes (median of 3). halcyond/floor: the two CPU figures' ratio.${baseline:+ baseline: a second halcyond build (\`$baseline\`) with the same flags, in turn with the first.}"
        echo
        echo "| load | halcyond req/s | disk hits / replies | p50/p99 µs | CPU µs/req halcyond${baseline:+ / baseline} | file floor CPU µs/read | halcyond/floor${baseline:+ (baseline/floor)} | ctx switches/req halcyond${baseline:+ / baseline} |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    } >>"$report"
    for spec in "8 16" "1 1"; do
        read -r c p <<<"$spec"
        cell "$dprotos" --seconds "$cell_seconds" --warmup "$warmup" "${dargs[@]}" --conns "$c" --pipeline "$p" --no-prefill
        h="${med[halcyondisk]}"; b="${med[halcyondiskb]:-}"
        floors=()
        for _ in 1 2 3; do
            fl="$("$floor" --dir "$files_dir" --threads "$c" --passes 3 --warmup-passes 1)" || log "diskfloor failed: $fl"
            echo "diskfloor $fl" >>"$raw"
            floors+=("$(field "$fl" cpu_us)")
        done
        f="$(printf '%s\n' "${floors[@]}" | sort -n | sed -n 2p)"
        log "file floor ${c} threads: ${floors[*]} µs/read (median $f)"
        echo "| ${c}×$p | $(rps "$h") | $(field "$h" disk_hits) / $(field "$h" replies) | $(lat "$h") | $(cpu "$h")${baseline:+ / $(cpu "$b")} | $f | $(ratio "$(cpu "$h")" "$f")${baseline:+ ($(ratio "$(cpu "$b")" "$f"))} | $(cs "$h")${baseline:+ / $(cs "$b")} |" >>"$report"
    done
    echo >>"$report"
fi
if want disk; then
    log "section: disk reads"
    {
        echo "## halcyond disk-tier reads (\`cache.get\` of keys only on disk)"
        echo
        echo "$disk_keys keys are set once; then, 3 rounds of: remove every key from the memory tier only (\`cache.remove\` with \`\"fromDisk\": false\`, not timed), and read each key once (timed; each connection walks its own slice, so every read is a disk-tier read: \`disk hits\` counts replies saying \`\"cacheType\":\"disk\"\`). The files stay in the OS page cache, so this measures halcyond's disk path (open, read, metadata, put back into memory), not the device."
        echo
        echo "| loadDiskFileSynchronously | value B | conns | pipeline | requests/s | p50/p99 µs | disk hits / reads | notes |"
        echo "|---|---:|---:|---:|---:|---:|---:|---|"
    } >>"$report"
    for v in 100 4096; do
        prefill=()
        for mode in async request connection; do
            for c in 1 4; do
                for p in 1 32; do
                    args=(--op get --value-size "$v" --conns "$c" --pipeline "$p" --keys "$disk_keys" --requests "$disk_keys"
                        --rounds 3 --sequential --evict-first --key-prefix "d$v:" "${prefill[@]}")
                    case "$mode" in
                        async) label="no (ioQueue)" ;;
                        request) label="per request"; args+=(--get-params '"options":{"loadDiskFileSynchronously":true}') ;;
                        connection) label="per connection"; args+=(--configure '{"loadDiskFileSynchronously":true}') ;;
                    esac
                    h="$(run halcyon "${args[@]}")"
                    prefill=(--no-prefill)
                    echo "| $label | $v | $c | $p | $(rps "$h") | $(lat "$h") | $(field "$h" disk_hits) / $(field "$h" requests) | $(notes "$h") |" >>"$report"
                done
            done
        done
    done
    echo >>"$report"
fi

# ------------------------------------------------------------------ 5. multi-key get, incr
if want atomic; then
    log "section: getMany and incr"
    {
        echo "## \`cache.getMany\` of 100 keys vs Redis \`MGET\`, value 100 B, memory hits"
        echo
        echo "One request reads 100 consecutive keys of the key space (prefilled; halcyond's prefill uses \`\"toDisk\": false\`). keys/s = requests/s × 100."
        echo
        echo "| conns | pipeline | redis MGET req/s | halcyond getMany req/s | halcyond/redis | halcyond keys/s | halcyond p50/p99 µs | CPU µs/req redis / halcyond${baseline:+ / baseline} |${baseline:+ baseline req/s |} notes |"
        echo "|---:|---:|---:|---:|---:|---:|---:|---:|${baseline:+---:|}---|"
    } >>"$report"
    for c in 1 4; do
        for p in 1 8; do
            cell "$(with_baseline redis,halcyon)" "${common[@]}" --op mget --batch-keys 100 --value-size 100 --conns "$c" --pipeline "$p" \
                --key-prefix "mg:" --prefill-params '"toDisk":false'
            r="${med[redis]}"; h="${med[halcyon]}"; b="${med[halcyonb]:-}"
            keys_s="$(awk -v r="$(rps "$h")" 'BEGIN { if (r+0 > 0) printf "%.0f", r * 100; else printf "n/a" }')"
            echo "| $c | $p | $(rps "$r") | $(rps "$h") | $(ratio "$(rps "$h")" "$(rps "$r")") | $keys_s | $(lat "$h") | $(cpu "$r") / $(cpu "$h")${baseline:+ / $(cpu "$b")} |${baseline:+ $(rps "$b") |} $(notes "$h") |" >>"$report"
        done
    done
    {
        echo
        echo "## \`cache.incr\` vs Redis \`INCR\` with \`appendonly yes\`, \`appendfsync everysec\`"
        echo
        echo "1000 counters, uniform. A halcyond incr is answered once the new value's journal record reached the kernel (survives kill -9, like an AOF write before its fsync; the value's file is written behind); Redis appends to its AOF and fsyncs once a second."
        echo
        echo "| conns | pipeline | redis AOF everysec | halcyond | halcyond/redis | halcyond p50/p99 µs | CPU µs/req redis / halcyond${baseline:+ / baseline} |${baseline:+ baseline req/s |} notes |"
        echo "|---:|---:|---:|---:|---:|---:|---:|${baseline:+---:|}---|"
    } >>"$report"
    for c in 1 4; do
        for p in 1 32; do
            cell "$(with_baseline redisaof,halcyon)" --seconds "$cell_seconds" --warmup "$warmup" --keys 1000 --op incr --conns "$c" \
                --pipeline "$p" --key-prefix "ctr:" --no-prefill
            r="${med[redisaof]}"; h="${med[halcyon]}"; b="${med[halcyonb]:-}"
            echo "| $c | $p | $(rps "$r") | $(rps "$h") | $(ratio "$(rps "$h")" "$(rps "$r")") | $(lat "$h") | $(cpu "$r") / $(cpu "$h")${baseline:+ / $(cpu "$b")} |${baseline:+ $(rps "$b") |} $(notes "$h") |" >>"$report"
        done
    done
    echo >>"$report"
fi

# ------------------------------------------------------------------ 6. writes against Redis with AOF
if want wal; then
    log "section: writes (journal) vs redis appendonly everysec"
    {
        echo "## Writes against Redis with \`appendonly yes\`, \`appendfsync everysec\` (value 100 B)"
        echo
        echo "Both acknowledge a write once it would survive kill -9 (halcyond: in its write-ahead journal, fsync every second by default). Mixed: 9 gets to 1 set over keys set beforehand."
        echo
        echo "| load | conns | pipeline | redis AOF | halcyond | halcyond/redis-AOF | redis p50/p99 µs | halcyond p50/p99 µs | server CPU µs/req halcyond / redis | notes |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    } >>"$report"
    for spec in "set 1 1" "set 8 16" "mixed 1 1" "mixed 8 16" "mixed 64 16"; do
        read -r op c p <<<"$spec"
        extra=(--op "$op" --value-size 100 --conns "$c" --pipeline "$p" --key-prefix "w:")
        [ "$op" = set ] && extra+=(--no-prefill)
        cell redisaof,halcyon "${common[@]}" "${extra[@]}"
        r="${med[redisaof]}"; h="${med[halcyon]}"
        label="$op"; [ "$op" = mixed ] && label="9 get : 1 set"
        echo "| $label | $c | $p | $(rps "$r") | $(rps "$h") | $(ratio "$(rps "$h")" "$(rps "$r")") | $(lat "$r") | $(lat "$h") | $(cpu "$h") / $(cpu "$r") | $(notes "$h") |" >>"$report"
    done
    sustained="${SUSTAINED_SECONDS:-60}"
    log "sustained sets: $sustained s over 100000 keys"
    r="$(run redisaof --op set --value-size 100 --conns 8 --pipeline 16 --keys 100000 --seconds "$sustained" --warmup 1 --no-prefill --key-prefix "sus:")"
    h="$(run halcyon --op set --value-size 100 --conns 8 --pipeline 16 --keys 100000 --seconds "$sustained" --warmup 1 --no-prefill --key-prefix "sus:")"
    stats="$(python3 "$here/halcyon_stat.py" "$tmp/halcyon.sock" 2>/dev/null || echo "(stats unavailable)")"
    {
        echo "| sustained set, ${sustained} s, 100,000 keys | 8 | 16 | $(rps "$r") | $(rps "$h") | $(ratio "$(rps "$h")" "$(rps "$r")") | $(lat "$r") | $(lat "$h") | $(cpu "$h") / $(cpu "$r") | $(notes "$h") |"
        echo
        echo "halcyond \`cache.stats\` right after the sustained load (journal bytes, unwritten entries, files written, group sizes, stalls):"
        echo
        echo '```'
        echo "$stats"
        echo '```'
        echo
    } >>"$report"
fi

{
    echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo
    echo "<details><summary>Raw loadgen lines</summary>"
    echo
    echo '```'
    cat "$raw"
    echo '```'
    echo "</details>"
} >>"$report"
mkdir -p "$(dirname "$out")"
cp "$report" "$out"
log "report: $out"

# ------------------------------------------------------------------ RESULTS.md
# The report without its raw lines, one heading level down, replaces what lies between the
# markers in RESULTS.md (appended with them the first time). Full reports stay in .reports/.
if [ "$results" = 1 ]; then
    results_file="$here/RESULTS.md"
    begin='<!-- compare.sh: begin (written by Benchmarks/compare.sh --results; edits here are replaced) -->'
    end='<!-- compare.sh: end -->'
    section="$tmp/section.md"
    {
        echo "$begin"
        echo "## Side by side with Redis and memcached, current (\`compare.sh --results\`)"
        echo
        echo "- Commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)'); command: \`Benchmarks/compare.sh --only $only --seconds $cell_seconds --repeat $repeat --results${baseline:+ --baseline …}\`"
        sed -n '/^- Run:/,$p' "$report" | sed '/^<details>/,$d' | sed 's/^#/##/'
        echo "$end"
    } >"$section"
    touch "$results_file"
    awk -v b="$begin" -v e="$end" -v f="$section" '
        $0 == b { while ((getline l < f) > 0) print l; skip = 1; done = 1; next }
        $0 == e { skip = 0; next }
        !skip { print }
        END { if (!done) { print ""; while ((getline l < f) > 0) print l } }
    ' "$results_file" >"$tmp/RESULTS.md"
    cp "$tmp/RESULTS.md" "$results_file"
    log "tables written to $results_file"
fi
