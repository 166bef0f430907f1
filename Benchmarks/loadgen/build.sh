#!/usr/bin/env bash
# Builds the load generator next to its source: Benchmarks/loadgen/loadgen.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cc -O2 -pthread -Wall -Wextra -o "$here/loadgen" "$here/loadgen.c"
echo "$here/loadgen"
