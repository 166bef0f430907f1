#!/usr/bin/env bash
# Run a command at most once per period across every script and cron job on the
# machine, e.g. send an alert no more than once an hour. The marker key expires by
# itself; no lock files to clean up.
#
#   Clients/shell/examples/once-per.sh 1h disk-alert -- mail -s "disk full" ops@example.com
set -euo pipefail
# shellcheck source=../halcyon.sh
source "$(dirname "${BASH_SOURCE[0]}")/../halcyon.sh"

if [ $# -lt 4 ] || [ "$3" != "--" ]; then
    echo "usage: once-per.sh PERIOD NAME -- COMMAND [ARGS...]" >&2
    exit 2
fi
period=$1 name=$2
shift 3
if halcyon_exists "once-per:$name"; then
    echo "once-per: '$name' already ran in the last $period" >&2
    exit 0
fi
"$@"
halcyon_set "once-per:$name" "$(date -u +%FT%TZ)" "$period"
