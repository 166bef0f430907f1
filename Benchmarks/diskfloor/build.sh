#!/usr/bin/env bash
# Builds the file-floor program next to its source: Benchmarks/diskfloor/diskfloor.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cc -O2 -pthread -Wall -Wextra -o "$here/diskfloor" "$here/diskfloor.c"
echo "$here/diskfloor"
