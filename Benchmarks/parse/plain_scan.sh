#!/usr/bin/env bash
# Builds and runs plain_scan.swift: the reply writer's plain-string check, in ns per value,
# for each variant of the C scan and for the Swift word-at-a-time scan it replaced. Compiles
# Sources/CHalcyonSystem/plain_ascii.c with cc; needs a Swift toolchain.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# shellcheck source=plain_scan_object.sh
. "$here/plain_scan_object.sh"
plain_scan_object "$out" "$root"
swiftc -O -I "$out/CHalcyonSystem" -o "$out/plain_scan" "$here/plain_scan.swift" "$out/plain_ascii.o"
echo "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), AVX2: $(grep -q -m1 -w avx2 /proc/cpuinfo && echo yes || echo no)"
echo
"$out/plain_scan"
