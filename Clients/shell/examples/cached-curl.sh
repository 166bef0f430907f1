#!/usr/bin/env bash
# Fetch a URL at most once per TTL: later runs print the cached body instantly.
# A failed download (curl exits non-zero) is not cached, so the next run retries.
#
#   Clients/shell/examples/cached-curl.sh file:///etc/os-release 10m   # any URL curl takes
set -euo pipefail
# shellcheck source=../halcyon.sh
source "$(dirname "${BASH_SOURCE[0]}")/../halcyon.sh"

url=${1:?usage: cached-curl.sh URL [TTL]}
ttl=${2:-10m}
halcyon_cached "$ttl" "curl:$url" -- curl -fsSL "$url"
