#!/usr/bin/env bash
# Runs the storage micro-benchmarks (package-benchmark, release) and writes
# .reports/storage.md (tables for Benchmarks/RESULTS.md): the machine, then one markdown table per metric.
#
# usage: Benchmarks/storage.sh [--out FILE] [--filter REGEX]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/.reports/storage.md"
filter=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        --filter) filter=(--filter "$2"); shift 2 ;;
        -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
        *) echo "storage.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
cd "$here"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
swift package --disable-sandbox benchmark --format markdown --grouping metric --no-progress "${filter[@]}" >"$tmp"
mkdir -p "$(dirname "$out")"
{
    echo "# Storage micro-benchmarks (HalcyonCache)"
    echo
    echo "- Run: $(date -u '+%Y-%m-%d %H:%M UTC'), \`Benchmarks/storage.sh\` (package-benchmark, release build)"
    echo "- Machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), $(findmnt -no FSTYPE,OPTIONS -T "${TMPDIR:-/tmp}" | cut -c1-60) under ${TMPDIR:-/tmp}"
    echo "- Halcyon: $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo '?'); load average at start $load_start, at end $(cut -d' ' -f1-3 /proc/loadavg) (other builds share the 2 cores: noisy)"
    echo "- Disk benchmarks: one store or read per iteration, one thread. Memory benchmarks: one iteration = 1,000,000 operations spread over the threads, scaled (\`.mega\`) so that time is per operation and throughput is operations/s."
    echo
    # Keep the harness's tables; drop its build log.
    sed -n '/^## /,$p' "$tmp"
} >"$out"
echo "storage.sh: wrote $out" >&2
