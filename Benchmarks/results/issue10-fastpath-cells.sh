#!/usr/bin/env bash
# The loop behind issue10-2026-11-24-after-fastpath.md: the issue-10 get cells, Redis and two
# halcyond binaries interleaved; prints loadgen lines with the server CPU ticks of each run
# (prefill included).
# usage: issue10-fastpath-cells.sh NEW_HALCYOND OLD_HALCYOND REPEAT SECONDS
set -uo pipefail
new="$1"; old="$2"; repeat="$3"; secs="$4"
loadgen="$("$(cd "$(dirname "$0")/.." && pwd)/loadgen/build.sh")"
tmp="$(mktemp -d /tmp/fpb.XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
redis-server --port 0 --unixsocket "$tmp/redis.sock" --unixsocketperm 700 --save '' --appendonly no --logfile "$tmp/redis.log" &
rp=$!; pids+=($rp)
"$new" --socket "$tmp/new.sock" --cache-dir "$tmp/cnew" >"$tmp/new.log" 2>&1 & np=$!; pids+=($np)
"$old" --socket "$tmp/old.sock" --cache-dir "$tmp/cold" >"$tmp/old.log" 2>&1 & op=$!; pids+=($op)
sleep 1.5
declare -A sock=([redis]="$tmp/redis.sock" [new]="$tmp/new.sock" [old]="$tmp/old.sock")
declare -A pid=([redis]=$rp [new]=$np [old]=$op)
declare -A proto=([redis]=redis [new]=halcyon [old]=halcyon)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)
for cell in "1 1 100" "8 1 100" "8 16 100" "64 16 100" "8 16 4096"; do
  set -- $cell; c=$1; p=$2; v=$3
  for r in $(seq 1 "$repeat"); do
    for s in redis new old; do
      extra=(); [ "${proto[$s]}" = halcyon ] && extra=(--prefill-params '"toDisk":false')
      c0=$(ticks ${pid[$s]})
      line=$("$loadgen" --proto ${proto[$s]} --socket "${sock[$s]}" --op get --conns $c --pipeline $p --value-size $v --seconds "$secs" --warmup 0.5 --keys 10000 --key-prefix "m$v:" "${extra[@]}" 2>>"$tmp/err")
      c1=$(ticks ${pid[$s]})
      echo "cell=${c}x${p}x${v} server=$s cpu_ticks=$((c1-c0)) tck=$tck $line"
    done
  done
done
