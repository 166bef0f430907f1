#!/usr/bin/env bash
# Builds and runs scanner_floor.swift: a request line parsed by jansson and by the
# hot-path scanner, in ns per line. Compiles HalcyonJSON's sources with it (swiftc -O, whole
# module; the base64 writer left out, it needs a package dependency; the plain-string scan
# compiled with cc), so no package build is needed; needs libjansson-dev and a Swift toolchain.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# HalcyonJSON's one C function (the plain-string scan), with a module map for its header.
# shellcheck source=plain_scan_object.sh
. "$here/plain_scan_object.sh"
plain_scan_object "$out" "$root"
swiftc -O -wmo -parse-as-library -module-name HalcyonJSON -emit-library -static -emit-module \
    -emit-module-path "$out/HalcyonJSON.swiftmodule" -I "$root/Sources/CJansson" -I "$out/CHalcyonSystem" \
    -o "$out/libHalcyonJSON.a" $(ls "$root"/Sources/HalcyonJSON/*.swift | grep -v 'Base64')
swiftc -O -I "$out" -I "$root/Sources/CJansson" -I "$out/CHalcyonSystem" -L "$out" -lHalcyonJSON -ljansson \
    -o "$out/scanner_floor" "$here/scanner_floor.swift" "$out/plain_ascii.o"
echo "jansson $(pkg-config --modversion jansson 2>/dev/null || echo '?'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
"$out/scanner_floor"
