"""Clients/shell/halcyon.sh against the real daemon through the real `halcyon` command.
Skipped (with a message) until the CLI is built."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

import halcyon
from conftest import HERE, REPO, Daemon, require_revision_2

LIBRARY = REPO / "Clients" / "shell" / "halcyon.sh"
EXAMPLES = REPO / "Clients" / "shell" / "examples"


def sh(script: str, daemon_socket: str, cli: str, stdin: bytes = b"", args: List[str] = ()) -> subprocess.CompletedProcess:  # type: ignore[assignment,type-arg]
    env: Dict[str, str] = dict(os.environ, HALCYON_SOCKET=daemon_socket, HALCYON_BIN=cli)
    return subprocess.run(["bash", "-c", f"source {LIBRARY}\n{script}", "bash", *args],
                          input=stdin, capture_output=True, env=env, timeout=60)


@pytest.fixture
def env(daemon: Daemon, cli_bin: str) -> Dict[str, str]:
    """The real daemon and the real `halcyon` command (leases, add and incr exist only
    there, so no stand-in server)."""
    require_revision_2(daemon)
    if subprocess.run([cli_bin, "lease", "--help"], capture_output=True, timeout=30).returncode != 0:
        pytest.skip(f"{cli_bin} has no 'lease' command: halcyon_cached needs it")
    return {"daemon_socket": daemon.socket, "cli": cli_bin}


def _start_all(commands: List[List[str]], run_env: Dict[str, str]) -> List[subprocess.CompletedProcess]:  # type: ignore[type-arg]
    """Start every command before waiting for any; their outcomes in order."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=run_env) for c in commands]
    done = []
    for c, p in zip(commands, procs):
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        done.append(subprocess.CompletedProcess(c, p.returncode, out, err))
    return done


def test_add_and_incr(env: Dict[str, str], key: str) -> None:
    assert sh('halcyon_add "$1" first 1h', **env, args=[key]).returncode == 0
    assert sh('halcyon_add "$1" second', **env, args=[key]).returncode == 1
    assert sh('halcyon_get "$1"', **env, args=[key]).stdout == b"first"
    r = sh('halcyon_incr "$1n" && halcyon_incr "$1n" 5 && halcyon_incr "$1n" -2', **env, args=[key])
    assert r.returncode == 0 and r.stdout.split() == [b"1", b"6", b"4"], r.stderr


def _cached_by_concurrent_callers(env: Dict[str, str], key: str, counter: Path, callers: int,
                                  printf: str) -> List[subprocess.CompletedProcess]:  # type: ignore[type-arg]
    """Starts `callers` scripts at once that each `halcyon_cached` KEY, with a command that
    counts its runs in `counter` and holds the lease until the other callers wait on it,
    so they really overlap (instead of arriving after the value is stored)."""
    waiter = (f"import sys; sys.path[:0] = [{str(HERE)!r}, {str(HERE.parent / 'src')!r}]; "
              f"from test_features import _wait_for_waiters; _wait_for_waiters({env['daemon_socket']!r}, {callers - 1})")
    script = (f'halcyon_cached 1h "$1" -- bash -c \'echo run >> "$0"; "$1" -c "$2"; printf "{printf}"\' '
              '"$2" "$3" "$4"')
    run_env = dict(os.environ, HALCYON_SOCKET=env["daemon_socket"], HALCYON_BIN=env["cli"])
    command = ["bash", "-c", f"source {LIBRARY}\n{script}", "bash", key, str(counter), sys.executable, waiter]
    return _start_all([command] * callers, run_env)


def test_8_concurrent_cached_run_the_command_once(env: Dict[str, str], key: str, tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    results = _cached_by_concurrent_callers(env, key, counter, 8, "\\x00shared\\n")
    assert [r.returncode for r in results] == [0] * 8, [r.stderr for r in results]
    assert all(r.stdout == b"\x00shared\n" for r in results)
    assert counter.read_text().count("run") == 1


def test_set_get_rm_exists(env: Dict[str, str], key: str) -> None:
    r = sh('halcyon_set "$1" "hello world" 10m && halcyon_get "$1"', **env, args=[key])
    assert r.returncode == 0 and r.stdout == b"hello world", r.stderr
    assert sh('halcyon_exists "$1"', **env, args=[key]).returncode == 0
    assert sh('halcyon_touch "$1" 1h', **env, args=[key]).returncode == 0
    assert sh('halcyon_rm "$1"', **env, args=[key]).returncode == 0
    assert sh('halcyon_rm "$1"', **env, args=[key]).returncode == 1
    assert sh('halcyon_exists "$1"', **env, args=[key]).returncode == 1
    miss = sh('halcyon_get "$1"', **env, args=[key])
    assert miss.returncode == 1 and miss.stdout == b""


def test_binary_value_through_stdin(env: Dict[str, str], key: str) -> None:
    data = bytes(range(256)) + b"\n\n"
    assert sh('halcyon_set "$1" -', **env, stdin=data, args=[key]).returncode == 0
    assert sh('halcyon_get "$1"', **env, args=[key]).stdout == data
    # The Python client sees the same bytes.
    with halcyon.Client(env["daemon_socket"]) as c:
        assert c.get(key) == data


def test_usage_errors(env: Dict[str, str]) -> None:
    r = sh("halcyon_cached 10m only-a-key", **env)
    assert r.returncode == 2 and b"usage" in r.stderr
    assert sh("halcyon_get", **env).returncode == 2


def test_cached_runs_command_once_within_ttl(env: Dict[str, str], key: str, tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    script = 'halcyon_cached 1h "$1" -- bash -c \'echo run >> "$0"; printf "\\x00out\\xff\\n\\n"\' "$2"'
    first = sh(script, **env, args=[key, str(counter)])
    second = sh(script, **env, args=[key, str(counter)])
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout == second.stdout == b"\x00out\xff\n\n"
    assert counter.read_text().count("run") == 1


def test_cached_does_not_cache_failures(env: Dict[str, str], key: str, tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    script = 'halcyon_cached 1h "$1" -- bash -c \'echo run >> "$0"; echo partial; exit 3\' "$2"'
    for _ in range(2):
        r = sh(script, **env, args=[key, str(counter)])
        assert r.returncode == 3 and r.stdout == b"partial\n"
    assert counter.read_text().count("run") == 2
    with halcyon.Client(env["daemon_socket"]) as c:
        assert not c.exists(key)


def test_cached_runs_command_when_daemon_is_down(cli_bin: str, key: str) -> None:
    r = sh('halcyon_cached 1m "$1" -- echo fresh', "/tmp/halcyon-no-such-dir/h.sock", cli_bin, args=[key])
    assert r.returncode == 0 and r.stdout == b"fresh\n"


def test_cached_key_starting_with_a_dash(env: Dict[str, str], key: str, tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    script = 'halcyon_cached 1h "$1" -- bash -c \'echo run >> "$0"; echo out\' "$2"'
    for _ in range(2):
        r = sh(script, **env, args=["-" + key, str(counter)])
        assert r.returncode == 0 and r.stdout == b"out\n", r.stderr
    assert counter.read_text().count("run") == 1


def test_example_cached_build(env: Dict[str, str], tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text(os.urandom(8).hex())
    run_env = dict(os.environ, HALCYON_SOCKET=env["daemon_socket"], HALCYON_BIN=env["cli"])
    first = subprocess.run([str(EXAMPLES / "cached-build.sh"), str(src)], capture_output=True, env=run_env, timeout=60)
    second = subprocess.run([str(EXAMPLES / "cached-build.sh"), str(src)], capture_output=True, env=run_env, timeout=60)
    assert first.returncode == 0 and first.stdout[:2] == b"\x1f\x8b", first.stderr
    assert second.stdout == first.stdout


def test_example_once_per(env: Dict[str, str], tmp_path: Path) -> None:
    name = os.urandom(8).hex()
    marker = tmp_path / "ran"
    run_env = dict(os.environ, HALCYON_SOCKET=env["daemon_socket"], HALCYON_BIN=env["cli"])
    cmd = [str(EXAMPLES / "once-per.sh"), "1h", name, "--", "bash", "-c", f"echo x >> {marker}"]
    for _ in range(2):
        assert subprocess.run(cmd, capture_output=True, env=run_env, timeout=60).returncode == 0
    assert marker.read_text() == "x\n"


def test_example_once_per_four_started_together_run_once(env: Dict[str, str], tmp_path: Path) -> None:
    name = os.urandom(8).hex()
    marker = tmp_path / "ran"
    run_env = dict(os.environ, HALCYON_SOCKET=env["daemon_socket"], HALCYON_BIN=env["cli"])
    cmd = [str(EXAMPLES / "once-per.sh"), "1h", name, "--", "bash", "-c", f"echo x >> {marker}"]
    results = _start_all([cmd] * 4, run_env)
    assert [r.returncode for r in results] == [0] * 4, [r.stderr for r in results]
    assert marker.read_text() == "x\n"


def test_example_once_per_gives_the_claim_back_on_failure(env: Dict[str, str], tmp_path: Path) -> None:
    name = os.urandom(8).hex()
    run_env = dict(os.environ, HALCYON_SOCKET=env["daemon_socket"], HALCYON_BIN=env["cli"])
    failing = [str(EXAMPLES / "once-per.sh"), "1h", name, "--", "false"]
    assert subprocess.run(failing, capture_output=True, env=run_env, timeout=60).returncode == 1
    with halcyon.Client(env["daemon_socket"]) as c:
        assert not c.exists(f"once-per:{name}")


def test_library_and_examples_pass_shellcheck() -> None:
    import shutil
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    files = [str(LIBRARY), *sorted(str(p) for p in EXAMPLES.glob("*.sh"))]
    r = subprocess.run(["shellcheck", "-x", "-P", "SCRIPTDIR", *files], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stdout.decode()


# The loop form: halcyon_open routes the functions through one `halcyon loop` coprocess.

ODD_VALUES = [b"with space", b" lead and trail ", b"line\nfeed\n\n", b"tab\tcr\r", b"back\\slash \\n",
              b"\xff\xfe not utf-8 \x80", b"caf\xc3\xa9 \xe2\x9c\x93", b"", b'""', b"-dash", b"\x01\x7f"]


@pytest.mark.parametrize("value", ODD_VALUES)
def test_loop_round_trips_odd_keys_and_values(env: Dict[str, str], key: str, value: bytes) -> None:
    # Keys with spaces and line feeds; values with those, backslashes and bytes that are
    # not UTF-8 (NUL cannot be in a shell variable: such values go through stdin).
    odd_key = key + " a key\nwith a line feed"
    script = ('halcyon_open || exit 9\n'
              '[ -n "$_HALCYON_LOOP_PID" ] || exit 8\n'
              'halcyon_set "$1" "$2" 1h || exit 7\n'
              'halcyon_get "$1"')
    r = sh(script, **env, args=[odd_key, value])  # type: ignore[list-item]
    assert r.returncode == 0, r.stderr
    assert r.stdout == value
    with halcyon.Client(env["daemon_socket"]) as c:
        got = c.get(odd_key)
        assert (got.encode() if isinstance(got, str) else got) == value


def test_loop_functions_match_the_process_form(env: Dict[str, str], key: str) -> None:
    script = r'''
halcyon_open || exit 9
halcyon_get "$1"; echo " get=$?"
halcyon_add "$1" first; echo "add=$?"
halcyon_add "$1" second; echo "add=$?"
halcyon_get "$1"; echo " get=$?"
halcyon_incr "$1n" -3; halcyon_incr "$1n" 5
halcyon_exists "$1"; echo "exists=$?"
halcyon_touch "$1" 1h; echo "touch=$?"
printf 'from\0stdin' | halcyon_set "$1b" -; echo "stdin=$?"
halcyon_get "$1b" | od -An -c | tr -s ' '
v=$(halcyon_get "$1"); echo "subst=$v"
halcyon_rm "$1"; echo "rm=$?"
halcyon_rm "$1"; echo "rm=$?"
halcyon_get "$(printf '\377')"; echo "bad=$?"
halcyon_close
halcyon_get "$1n"; echo " closed=$?"
'''
    r = sh(script, **env, args=[key])
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split("\n") == [
        " get=1", "add=0", "add=1", "first get=0", "-3", "2", "exists=0", "touch=0", "stdin=0",
        " f r o m \\0 s t d i n", "subst=first", "rm=0", "rm=1", "bad=2", "2 closed=0", ""]
    assert r.stderr.decode().startswith("halcyon: notUTF8: ")


def test_loop_errors_keep_their_reason_words(env: Dict[str, str]) -> None:
    r = sh('halcyon_open; halcyon_get "$(printf "k%.0s" {1..5000})"; echo "rc=$?"', **env)
    assert r.stdout == b"rc=2\n"
    assert r.stderr.startswith(b"halcyon: keyTooLong: "), r.stderr


def test_loop_in_pipelines_and_concurrent_substitutions(env: Dict[str, str], key: str) -> None:
    # A pipeline's subshell cannot see the coprocess (it falls back to a process); two
    # process substitutions can, and take turns through the lock.
    script = r'''
halcyon_open || exit 9
halcyon_set "$1a" aaa; halcyon_set "$1b" bbb
halcyon_get "$1a" | cat; echo
paste <(for i in 1 2 3 4 5; do halcyon_get "$1a"; echo; done) <(for i in 1 2 3 4 5; do halcyon_get "$1b"; echo; done)
'''
    r = sh(script, **env, args=[key])
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"aaa\n" + b"aaa\tbbb\n" * 5


def _start_script(daemon: Daemon, cli: str, script: str, *args: str) -> subprocess.Popen:  # type: ignore[type-arg]
    """Starts a bash script that sourced the library, talking to `daemon`, and returns once
    it printed `ready`."""
    run_env = dict(os.environ, HALCYON_SOCKET=daemon.socket, HALCYON_BIN=cli)
    p = subprocess.Popen(["bash", "-c", f"source {LIBRARY}\n{script}", "bash", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=run_env)
    assert p.stdout is not None
    assert p.stdout.readline() == b"ready\n"
    return p


# Opens the loop, stores "kept" under $1, says ready and waits for a line on FIFO $2.
_STORE_THEN_WAIT = '''halcyon_open || exit 9
halcyon_set "$1" kept 1h
echo ready; read -r _ < "$2"'''


def _fifos(folder: Path, *names: str) -> List[Path]:
    paths = [folder / name for name in names]
    for path in paths:
        os.mkfifo(path)
    return paths


def _go(fifo: Path) -> None:
    """Lets a script waiting in `read -r _ < FIFO` go on."""
    with open(fifo, "w") as f:
        f.write("go\n")


def test_loop_survives_a_daemon_restart(fresh_daemon: Daemon, cli_bin: str, key: str, tmp_path: Path) -> None:
    require_revision_2(fresh_daemon)
    (go,) = _fifos(tmp_path, "go")
    script = _STORE_THEN_WAIT + r'''
halcyon_get "$1"; echo " first=$?"
halcyon_get "$1"; echo " second=$?"
'''
    p = _start_script(fresh_daemon, cli_bin, script, key, str(go))
    fresh_daemon.restart()
    _go(go)
    out, err = p.communicate(timeout=60)
    # The loop was idle during the restart: the next call goes out on a new connection.
    assert out == b"kept first=0\nkept second=0\n", err


def test_loop_while_the_daemon_is_down(fresh_daemon: Daemon, cli_bin: str, key: str, tmp_path: Path) -> None:
    require_revision_2(fresh_daemon)
    go, back = _fifos(tmp_path, "go", "back")
    script = _STORE_THEN_WAIT + r'''
halcyon_get "$1"; echo " down=$?"
echo asked; read -r _ < "$3"
halcyon_get "$1"; echo " back=$?"
'''
    p = _start_script(fresh_daemon, cli_bin, script, key, str(go), str(back))
    assert p.stdout is not None
    fresh_daemon.stop()
    _go(go)
    assert p.stdout.readline() == b" down=2\n"
    assert p.stdout.readline() == b"asked\n"
    fresh_daemon.start()
    _go(back)
    out, err = p.communicate(timeout=60)
    assert out == b"kept back=0\n", err
    assert err.startswith(b"halcyon: cannotConnect: "), err


def test_cached_with_the_loop_open(env: Dict[str, str], key: str, tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    script = ('halcyon_open || exit 9\n'
              'for i in 1 2 3; do halcyon_cached 1h "$1" -- bash -c \'echo run >> "$0"; printf "v\\n"\' "$2"; done')
    r = sh(script, **env, args=[key, str(counter)])
    assert r.returncode == 0 and r.stdout == b"v\n" * 3, r.stderr
    assert counter.read_text().count("run") == 1


def test_cached_key_starting_with_a_dash_runs_once_across_callers(env: Dict[str, str], key: str, tmp_path: Path) -> None:
    # Such keys take the lease too (through `halcyon lease --key`): of four callers
    # started together, one runs the command while the other three wait for its value.
    counter = tmp_path / "runs"
    results = _cached_by_concurrent_callers(env, "-" + key, counter, 4, "shared\\n")
    assert [r.returncode for r in results] == [0] * 4, [r.stderr for r in results]
    assert all(r.stdout == b"shared\n" for r in results)
    assert counter.read_text().count("run") == 1


def test_cached_with_the_daemon_down_prints_nothing_about_it(cli_bin: str, key: str) -> None:
    r = sh('halcyon_cached 1m "$1" -- echo fresh', "/tmp/halcyon-no-such-dir/h.sock", cli_bin, args=[key])
    assert r.returncode == 0 and r.stdout == b"fresh\n"
    assert r.stderr == b""
