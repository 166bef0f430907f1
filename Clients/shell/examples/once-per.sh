#!/usr/bin/env bash
# Run a command at most once per period across every script and cron job on the
# machine, e.g. send an alert no more than once an hour. The marker key is claimed with
# an atomic add before the command runs, so of copies started together exactly one
# runs it; it expires by itself (no lock files to clean up). A failing command gives
# the marker back, so the next call tries again.
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
claimed=0
halcyon_add "once-per:$name" "$(date -u +%FT%TZ)" "$period" || claimed=$?
if [ "$claimed" -eq 1 ]; then
    echo "once-per: '$name' already ran in the last $period" >&2
    exit 0
fi
if [ "$claimed" -ne 0 ]; then
    exit 2  # halcyon_add said why on stderr
fi
rc=0
"$@" || rc=$?
if [ "$rc" -ne 0 ]; then
    halcyon_rm "once-per:$name" || true
fi
exit "$rc"
