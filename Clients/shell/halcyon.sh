# shellcheck shell=bash
# halcyon.sh: a bash library for scripts that keep values in Halcyon.
#
#   source Clients/shell/halcyon.sh
#   halcyon_set greeting "hello" 10m         # value from an argument, kept 10 minutes
#   printf '\0\1' | halcyon_set blob -       # value from stdin (binary-safe)
#   halcyon_get greeting                     # raw value on stdout; status 1 on a miss
#   halcyon_cached 1h "weather" -- curl -fsS https://wttr.in/?format=3
#
# Every function is a thin layer over the `halcyon` command (the Swift CLI), taken from
# $HALCYON_BIN when set, else from PATH; the socket comes from $HALCYON_SOCKET, else the
# command tries the documented places in order ($XDG_RUNTIME_DIR/halcyon/halcyon.sock,
# /run/user/<uid>/halcyon/halcyon.sock, /tmp/halcyon-<uid>/halcyon.sock,
# /run/halcyon/halcyon.sock), so scripts run by cron find the daemon too. Exit status follows the command:
# 0 success or hit, 1 miss (or "not removed", "not cached"), 2 error (message on stderr).
# Values travel through stdin/stdout and temporary files, never through shell
# variables, so NUL bytes and trailing newlines survive.

# Runs the halcyon command.
_halcyon() {
    "${HALCYON_BIN:-halcyon}" "$@"
}

# halcyon_get KEY: write the value of KEY to stdout. Status 0 hit, 1 miss, 2 error.
halcyon_get() {
    if [ $# -ne 1 ]; then echo "usage: halcyon_get KEY" >&2; return 2; fi
    _halcyon get -- "$1"
}

# halcyon_set KEY VALUE|- [TTL]: store VALUE (or stdin for "-") under KEY.
# TTL takes the command's forms (90, 90s, 10m, 2h, 7d); default: the daemon's.
halcyon_set() {
    if [ $# -lt 2 ] || [ $# -gt 3 ]; then echo "usage: halcyon_set KEY VALUE|- [TTL]" >&2; return 2; fi
    if [ $# -eq 3 ]; then
        _halcyon set --ttl "$3" -- "$1" "$2" >/dev/null
    else
        _halcyon set -- "$1" "$2" >/dev/null
    fi
}

# halcyon_rm KEY: remove KEY. Status 0 removed, 1 it was not there, 2 error.
halcyon_rm() {
    if [ $# -ne 1 ]; then echo "usage: halcyon_rm KEY" >&2; return 2; fi
    _halcyon rm -- "$1" >/dev/null
}

# halcyon_exists KEY: status 0 when KEY is cached, 1 when not, 2 on error. Never
# loads the value and never extends its expiration.
halcyon_exists() {
    if [ $# -ne 1 ]; then echo "usage: halcyon_exists KEY" >&2; return 2; fi
    _halcyon exists -- "$1" >/dev/null
}

# halcyon_touch KEY TTL: give KEY a new expiration, counted from now. Status 1 on a miss.
halcyon_touch() {
    if [ $# -ne 2 ]; then echo "usage: halcyon_touch KEY TTL" >&2; return 2; fi
    _halcyon touch -- "$1" "$2" >/dev/null
}

# halcyon_cached TTL KEY -- COMMAND [ARGS...]: print COMMAND's output, running it only
# when KEY is not cached. Only a run that exits 0 is cached (for TTL); a failing run's
# output and status pass through and nothing is stored, so the next call tries again.
# When the daemon cannot be reached the command simply runs every time (a cache that
# is down must not break the script); a failure to store is reported on stderr.
# Output is binary-safe; the command's stderr is not cached.
halcyon_cached() {
    if [ $# -lt 4 ] || [ "$3" != "--" ]; then
        echo "usage: halcyon_cached TTL KEY -- COMMAND [ARGS...]" >&2
        return 2
    fi
    local ttl=$1 key=$2 out rc=0
    shift 3
    out=$(mktemp "${TMPDIR:-/tmp}/halcyon_cached.XXXXXX") || return 2
    # A hit is written to a file first so a failure half-way prints nothing partial.
    if _halcyon get -- "$key" >"$out" 2>/dev/null; then
        cat "$out"
        rm -f "$out"
        return 0
    fi
    "$@" >"$out" || rc=$?
    if [ "$rc" -eq 0 ]; then
        _halcyon set --ttl "$ttl" -- "$key" - <"$out" >/dev/null \
            || echo "halcyon_cached: could not cache '$key'" >&2
    fi
    cat "$out"
    rm -f "$out"
    return "$rc"
}
