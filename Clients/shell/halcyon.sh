# shellcheck shell=bash
# halcyon.sh: a bash library for scripts that keep values in Halcyon.
#
#   source Clients/shell/halcyon.sh
#   halcyon_set greeting "hello" 10m         # value from an argument, kept 10 minutes
#   printf '\0\1' | halcyon_set blob -       # value from stdin (binary-safe)
#   halcyon_get greeting                     # raw value on stdout; status 1 on a miss
#   halcyon_add lock:nightly "$$" 1h       # status 0 only for the one caller that stored it
#   halcyon_incr visits                      # prints the new count, atomically
#   halcyon_cached 1h "weather" -- curl -fsS https://wttr.in/?format=3
#
# Every function is a thin layer over the `halcyon` command (the Swift CLI), taken from
# $HALCYON_BIN when set, else from PATH; the socket comes from $HALCYON_SOCKET, else the
# command tries the documented places in order ($XDG_RUNTIME_DIR/halcyon/halcyon.sock,
# /run/user/<uid>/halcyon/halcyon.sock, /tmp/halcyon-<uid>/halcyon.sock,
# /run/halcyon/halcyon.sock), so scripts run by cron find the daemon too. Exit status follows the command:
# 0 success or hit, 1 miss (or "not removed", "not cached", "already there"), 2 error
# (message on stderr). Durations (TTL) follow Docs/DURATIONS.md: 90, 30s, 5min, 1h30m, 7d.
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
# TTL is a duration (90, 90s, 10m, 1h30m, 7d) or never; default: the daemon's.
halcyon_set() {
    if [ $# -lt 2 ] || [ $# -gt 3 ]; then echo "usage: halcyon_set KEY VALUE|- [TTL]" >&2; return 2; fi
    if [ $# -eq 3 ]; then
        _halcyon set --ttl "$3" -- "$1" "$2" >/dev/null
    else
        _halcyon set -- "$1" "$2" >/dev/null
    fi
}

# halcyon_add KEY VALUE|- [TTL]: store VALUE only if KEY holds nothing (set-if-absent).
# Status 0 stored, 1 already there, 2 error. Of concurrent callers exactly one gets 0.
halcyon_add() {
    if [ $# -lt 2 ] || [ $# -gt 3 ]; then echo "usage: halcyon_add KEY VALUE|- [TTL]" >&2; return 2; fi
    if [ $# -eq 3 ]; then
        _halcyon add --ttl "$3" -- "$1" "$2" >/dev/null
    else
        _halcyon add -- "$1" "$2" >/dev/null
    fi
}

# halcyon_incr KEY [BY]: add BY (default 1; negative subtracts) to the integer under
# KEY atomically and print the result. A missing key starts at 0.
halcyon_incr() {
    if [ $# -lt 1 ] || [ $# -gt 2 ]; then echo "usage: halcyon_incr KEY [BY]" >&2; return 2; fi
    _halcyon incr -- "$@"
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
# when KEY is not cached. Concurrent callers for one KEY (any scripts, any processes)
# run COMMAND once: the first takes the key's lease and runs it, the others wait for
# its output and print that. Only a run that exits 0 is cached (for TTL); a failing
# run's output and status pass through, its lease is released and nothing is stored,
# so the next caller tries again. Status 3 from the lease itself means another caller
# still held it after the wait (the lease's own time, 5 minutes). When the daemon
# cannot be reached the command simply runs (a cache that is down must not break the
# script). Output is binary-safe; the command's stderr is not cached. COMMAND may be a
# shell function: it runs in this shell, with this shell's variables.
#
# How: a lease lasts as long as the connection that took it, so `halcyon lease` holds
# it while it runs a stand-in command; the stand-in tells this shell (through a FIFO)
# that the lease is ours, waits while COMMAND runs here, then hands its output and
# status to `halcyon lease`, which stores it for the waiters. A KEY starting with "-"
# cannot be given to `halcyon lease`: such keys are cached without the lease.
halcyon_cached() {
    if [ $# -lt 4 ] || [ "$3" != "--" ]; then
        echo "usage: halcyon_cached TTL KEY -- COMMAND [ARGS...]" >&2
        return 2
    fi
    local ttl=$1 key=$2 dir rc=0
    shift 3
    dir=$(mktemp -d "${TMPDIR:-/tmp}/halcyon_cached.XXXXXX") || return 2
    case $key in
        -*) _halcyon_cached_unleased "$ttl" "$key" "$dir/out" "$@" || rc=$?
            cat "$dir/out" ;;
        *) _halcyon_cached_leased "$ttl" "$key" "$dir" "$@" || rc=$? ;;
    esac
    rm -rf "$dir"
    return "$rc"
}

# The stand-in `halcyon lease` runs while it holds the lease: $1 control FIFO, $2 resume
# FIFO, $3 the file COMMAND's output went to.
_HALCYON_STAND_IN='printf "go\n" >"$1"; read -r rc <"$2"; cat "$3"; exit "$rc"'

_halcyon_cached_leased() {
    local ttl=$1 key=$2 dir=$3 word status=0 ran=0 rc=0 pid
    shift 3
    mkfifo "$dir/ctl" "$dir/resume" || return 2
    {
        local lrc=0
        _halcyon lease --ttl "$ttl" "$key" -- sh -c "$_HALCYON_STAND_IN" sh \
            "$dir/ctl" "$dir/resume" "$dir/data" >"$dir/out" || lrc=$?
        printf 'done %s\n' "$lrc" >"$dir/ctl"
    } &
    pid=$!
    read -r word status <"$dir/ctl"
    if [ "$word" = go ]; then
        # The lease is ours: run COMMAND here, then let the stand-in pass it on.
        ran=1
        "$@" >"$dir/data" || rc=$?
        printf '%s\n' "$rc" >"$dir/resume"
        read -r word status <"$dir/ctl"
    fi
    wait "$pid" || true
    if [ "$ran" -eq 1 ]; then
        # Print what COMMAND printed, whether or not storing it worked.
        cat "$dir/data"
        return "$rc"
    fi
    if [ "$status" -eq 2 ] && ! _halcyon ping >/dev/null 2>&1; then
        # No daemon, so the command never ran: run it here, uncached.
        "$@" || return $?
        return 0
    fi
    cat "$dir/out"
    return "$status"
}

# Check, run, store: halcyon_cached for keys `halcyon lease` cannot take.
_halcyon_cached_unleased() {
    local ttl=$1 key=$2 out=$3 rc=0
    shift 3
    if _halcyon get -- "$key" >"$out" 2>/dev/null; then
        return 0
    fi
    "$@" >"$out" || rc=$?
    if [ "$rc" -eq 0 ]; then
        _halcyon set --ttl "$ttl" -- "$key" - <"$out" >/dev/null \
            || echo "halcyon_cached: could not cache '$key'" >&2
    fi
    return "$rc"
}
