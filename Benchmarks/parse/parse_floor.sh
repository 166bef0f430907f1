#!/usr/bin/env bash
# Builds and runs parse_floor.c: what libjansson alone costs per request line here.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! [ -e /usr/include/jansson.h ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y -qq libjansson-dev >/dev/null || { apt-get update -qq && apt-get install -y -qq libjansson-dev >/dev/null; }
    else
        echo "parse_floor.sh: jansson.h missing; install libjansson-dev" >&2; exit 2
    fi
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cc -O2 -Wall -Wextra -o "$out/parse_floor" "$here/parse_floor.c" -ljansson
echo "jansson $(pkg-config --modversion jansson 2>/dev/null || echo '?'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
"$out/parse_floor"
