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
#
# Many calls, one process: after `halcyon_open`, halcyon_get, halcyon_set, halcyon_add,
# halcyon_incr, halcyon_rm, halcyon_exists and halcyon_touch (and halcyon_cached's
# check for a hit) go through one `halcyon loop` coprocess over one connection instead
# of starting a process per call, with the same output and status. A call falls back to
# a process of its own when it cannot use the loop: a value from stdin ("-"), a
# subshell that cannot see the coprocess (a pipeline, `( … )`, a background job), or a
# loop that has ended. `halcyon_close` ends the loop (so does the script's exit). The
# loop is bash's one coprocess per shell: a script with a coprocess of its own should
# not call halcyon_open.

# Runs the halcyon command.
_halcyon() {
    "${HALCYON_BIN:-halcyon}" "$@"
}

# halcyon_open: start the `halcyon loop` coprocess that the functions below then use.
# Status 0 when the loop runs (also while the daemon is down: each call then fails with
# cannotConnect and the loop connects again once it is back), 2 when it cannot start.
halcyon_open() {
    if [ -n "${_HALCYON_LOOP_PID-}" ] && kill -0 "$_HALCYON_LOOP_PID" 2>/dev/null; then return 0; fi
    local fifo line=
    # A one-byte token in a FIFO is the lock that keeps two processes (a process
    # substitution and its shell) from talking to the loop at once.
    fifo=$(mktemp -u "${TMPDIR:-/tmp}/halcyon_lock.XXXXXX") && mkfifo -m 600 "$fifo" || return 2
    exec {_HALCYON_LOCK}<>"$fifo"
    rm -f "$fifo"
    printf x >&"$_HALCYON_LOCK"
    coproc _HALCYON_LOOP { exec "${HALCYON_BIN:-halcyon}" loop 2>/dev/null; }
    # The first answer shows the binary has a loop (any status: the daemon may be down).
    if printf '@open ping\n' 1>&"${_HALCYON_LOOP[1]}" 2>/dev/null \
        && IFS= read -r -t 30 -u "${_HALCYON_LOOP[0]}" line && [[ $line == "@open "* ]]; then
        return 0
    fi
    echo "halcyon_open: '${HALCYON_BIN:-halcyon} loop' did not start; every call runs a process of its own" >&2
    halcyon_close
    return 2
}

# halcyon_close: end the loop halcyon_open started (calls then run a process each).
halcyon_close() {
    local pid=${_HALCYON_LOOP_PID-} fd
    if [ -n "${_HALCYON_LOOP[1]-}" ]; then
        fd=${_HALCYON_LOOP[1]}
        exec {fd}>&-
    fi
    if [ -n "$pid" ]; then wait "$pid" 2>/dev/null || true; fi
    if [ -n "${_HALCYON_LOCK-}" ]; then
        exec {_HALCYON_LOCK}>&-
    fi
    unset _HALCYON_LOOP_PID _HALCYON_LOCK
}

# Sets _halcyon_word to $1 escaped for a loop line (Docs/CLI.md, "Many commands, one
# process"): backslash, line feed, carriage return and tab as \\ \n \r \t, a space as
# \x20, the empty word as "". Other bytes, also those that are not UTF-8, pass as they are.
_halcyon_escape() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//$'\n'/\\n}
    s=${s//$'\r'/\\r}
    s=${s//$'\t'/\\t}
    s=${s// /\\x20}
    case $s in
        '') s='""' ;;
        '""') s='\x22\x22' ;;
    esac
    _halcyon_word=$s
}

# Runs one command through the loop. Prints what the command prints (its error line on
# stderr) and returns its status; returns 255, having sent nothing, when this shell
# cannot use the loop.
_halcyon_loop_call() {
    local request=$1 tag line status payload
    if [ -z "${_HALCYON_LOOP_PID-}" ] || [ -z "${_HALCYON_LOOP[1]-}" ] || [ -z "${_HALCYON_LOCK-}" ]; then
        return 255
    fi
    # Bash closes the coprocess in subshells other than $(…) and <(…).
    { : >&"${_HALCYON_LOOP[1]}"; } 2>/dev/null || return 255
    IFS= read -r -t 60 -n 1 -u "$_HALCYON_LOCK" _ 2>/dev/null || return 255
    # The tag tells this call's reply from one a killed caller left unread.
    _HALCYON_SEQ=$(( ${_HALCYON_SEQ-0} + 1 ))
    tag="@$BASHPID.$_HALCYON_SEQ"
    if ! printf '%s %s\n' "$tag" "$request" 1>&"${_HALCYON_LOOP[1]}" 2>/dev/null; then
        printf x >&"$_HALCYON_LOCK"
        return 255
    fi
    line=
    while IFS= read -r -u "${_HALCYON_LOOP[0]}" line; do
        if [[ $line == "$tag "* ]]; then break; fi
        line=
    done
    printf x >&"$_HALCYON_LOCK"
    if [ -z "$line" ]; then
        echo "halcyon: connectionLost: the halcyon loop ended before it answered" >&2
        return 2
    fi
    line=${line#"$tag "}
    status=${line%% *}
    payload=
    if [[ $line == *" "* ]]; then payload=${line#* }; fi
    if [ "$status" -ge 2 ]; then
        printf 'halcyon: %b\n' "$payload" >&2
    elif [ -n "$payload" ]; then
        printf '%b' "$payload"
    fi
    return "$status"
}

# Runs one halcyon command: through the loop when halcyon_open started one and this
# shell can reach it, else as a process of its own.
_halcyon_run() {
    if [ -n "${_HALCYON_LOOP_PID-}" ]; then
        local request='' word rc=0
        for word in "$@"; do
            _halcyon_escape "$word"
            request+=" $_halcyon_word"
        done
        _halcyon_loop_call "${request# }" || rc=$?
        if [ "$rc" -ne 255 ]; then return "$rc"; fi
    fi
    _halcyon "$@"
}

# halcyon_get KEY: write the value of KEY to stdout. Status 0 hit, 1 miss, 2 error.
halcyon_get() {
    if [ $# -ne 1 ]; then echo "usage: halcyon_get KEY" >&2; return 2; fi
    _halcyon_run get -- "$1"
}

# halcyon_set KEY VALUE|- [TTL]: store VALUE (or stdin for "-") under KEY.
# TTL is a duration (90, 90s, 10m, 1h30m, 7d) or never; default: the daemon's.
halcyon_set() {
    if [ $# -lt 2 ] || [ $# -gt 3 ]; then echo "usage: halcyon_set KEY VALUE|- [TTL]" >&2; return 2; fi
    _halcyon_store set "$@"
}

# The body of halcyon_set and halcyon_add: COMMAND KEY VALUE|- [TTL]. A value from
# stdin goes to a process of its own (the loop's stdin carries its commands).
_halcyon_store() {
    local command=$1 runner=_halcyon_run
    shift
    if [ "$2" = - ]; then runner=_halcyon; fi
    if [ $# -eq 3 ]; then
        "$runner" "$command" --ttl "$3" -- "$1" "$2" >/dev/null
    else
        "$runner" "$command" -- "$1" "$2" >/dev/null
    fi
}

# halcyon_add KEY VALUE|- [TTL]: store VALUE only if KEY holds nothing (set-if-absent).
# Status 0 stored, 1 already there, 2 error. Of concurrent callers exactly one gets 0.
halcyon_add() {
    if [ $# -lt 2 ] || [ $# -gt 3 ]; then echo "usage: halcyon_add KEY VALUE|- [TTL]" >&2; return 2; fi
    _halcyon_store add "$@"
}

# halcyon_incr KEY [BY]: add BY (default 1; negative subtracts) to the integer under
# KEY atomically and print the result. A missing key starts at 0.
halcyon_incr() {
    if [ $# -lt 1 ] || [ $# -gt 2 ]; then echo "usage: halcyon_incr KEY [BY]" >&2; return 2; fi
    _halcyon_run incr -- "$@"
}

# halcyon_rm KEY: remove KEY. Status 0 removed, 1 it was not there, 2 error.
halcyon_rm() {
    if [ $# -ne 1 ]; then echo "usage: halcyon_rm KEY" >&2; return 2; fi
    _halcyon_run rm -- "$1" >/dev/null
}

# halcyon_exists KEY: status 0 when KEY is cached, 1 when not, 2 on error. Never
# loads the value and never extends its expiration.
halcyon_exists() {
    if [ $# -ne 1 ]; then echo "usage: halcyon_exists KEY" >&2; return 2; fi
    _halcyon_run exists -- "$1" >/dev/null
}

# halcyon_touch KEY TTL: give KEY a new expiration, counted from now. Status 1 on a miss.
halcyon_touch() {
    if [ $# -ne 2 ]; then echo "usage: halcyon_touch KEY TTL" >&2; return 2; fi
    _halcyon_run touch -- "$1" "$2" >/dev/null
}

# halcyon_cached TTL KEY -- COMMAND [ARGS...]: print COMMAND's output, running it only
# when KEY is not cached. Concurrent callers for one KEY (any scripts, any processes)
# run COMMAND once: the first takes the key's lease and runs it, the others wait for
# its output and print that. Only a run that exits 0 is cached (for TTL); a failing
# run's output and status pass through, its lease is released and nothing is stored,
# so the next caller tries again. Status 3 from the lease itself means another caller
# still held it after the wait (the lease's own time, 5 minutes). When the daemon
# cannot be reached the command simply runs, and nothing is printed about the daemon
# (a cache that is down must not break the script). Output is binary-safe; the
# command's stderr is not cached. COMMAND may be a shell function: it runs in this
# shell, with this shell's variables. Any KEY works, one starting with "-" too. After
# halcyon_open a hit costs no process at all.
#
# How: a lease lasts as long as the connection that took it, so `halcyon lease` holds
# it while it runs a stand-in command; the stand-in tells this shell (through a FIFO)
# that the lease is ours, waits while COMMAND runs here, then hands its output and
# status to `halcyon lease`, which stores it for the waiters.
halcyon_cached() {
    if [ $# -lt 4 ] || [ "$3" != "--" ]; then
        echo "usage: halcyon_cached TTL KEY -- COMMAND [ARGS...]" >&2
        return 2
    fi
    local ttl=$1 key=$2 dir rc=0
    shift 3
    if [ -n "${_HALCYON_LOOP_PID-}" ]; then
        # A hit through the loop prints the value and is done; anything else (a miss, an
        # error, no loop here) goes on to the lease, which judges again.
        _halcyon_escape "$key"
        _halcyon_loop_call "get -- $_halcyon_word" 2>/dev/null || rc=$?
        if [ "$rc" -eq 0 ]; then return 0; fi
        rc=0
    fi
    dir=$(mktemp -d "${TMPDIR:-/tmp}/halcyon_cached.XXXXXX") || return 2
    _halcyon_cached_leased "$ttl" "$key" "$dir" "$@" || rc=$?
    rm -rf "$dir"
    return "$rc"
}

# The stand-in `halcyon lease` runs while it holds the lease: $1 control FIFO, $2 resume
# FIFO, $3 the file COMMAND's output went to. (Single quotes: the stand-in expands them.)
# shellcheck disable=SC2016
_HALCYON_STAND_IN='printf "go\n" >"$1"; read -r rc <"$2"; cat "$3"; exit "$rc"'

_halcyon_cached_leased() {
    local ttl=$1 key=$2 dir=$3 word status=0 ran=0 rc=0 pid
    shift 3
    mkfifo "$dir/ctl" "$dir/resume" || return 2
    {
        local lrc=0
        # --key takes any key, one starting with '-' too (after '--' comes the command).
        _halcyon lease --ttl "$ttl" --key "$key" -- sh -c "$_HALCYON_STAND_IN" sh \
            "$dir/ctl" "$dir/resume" "$dir/data" >"$dir/out" 2>"$dir/err" || lrc=$?
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
        cat "$dir/err" >&2
        cat "$dir/data"
        return "$rc"
    fi
    if [ "$status" -eq 2 ] && ! _halcyon ping >/dev/null 2>&1; then
        # No daemon, so the command never ran: run it here, uncached, and say nothing
        # about the daemon.
        "$@" || return $?
        return 0
    fi
    cat "$dir/err" >&2
    cat "$dir/out"
    return "$status"
}
