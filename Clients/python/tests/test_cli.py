"""The `halcyon` command against the real daemon: exit codes, binary-safe get/set,
every subcommand, errors naming data.reason, and hypothesis round trips.
Skipped (with a message) until the CLI is built."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from typing import Dict, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import halcyon
from conftest import Daemon


def cli(binary: str, sock: str, args: List[str], stdin: bytes = b"") -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run([binary, "--socket", sock, *args], input=stdin, capture_output=True, timeout=30)


@pytest.fixture
def run(daemon: Daemon, cli_bin: str):  # type: ignore[no-untyped-def]
    def go(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:  # type: ignore[type-arg]
        return cli(cli_bin, daemon.socket, list(args), stdin)
    return go


def test_set_get_rm_exists_exit_codes(run, key: str) -> None:  # type: ignore[no-untyped-def]
    assert run("set", key, "value").returncode == 0
    r = run("get", key)
    assert r.returncode == 0 and r.stdout == b"value"
    assert run("exists", key).returncode == 0
    assert run("rm", key).returncode == 0
    assert run("rm", key).returncode == 1
    assert run("exists", key).returncode == 1
    miss = run("get", key)
    assert miss.returncode == 1 and miss.stdout == b""


def test_binary_stdin_and_python_agree(run, daemon: Daemon, key: str) -> None:  # type: ignore[no-untyped-def]
    data = b"\x00\xff\n" * 100
    assert run("set", key, "-", stdin=data).returncode == 0
    assert run("get", key).stdout == data
    with halcyon.Client(daemon.socket) as c:
        assert c.get(key) == data
        c.set(key, "from python")
    assert run("get", key).stdout == b"from python"


def test_ttl_touch_describe(run, key: str) -> None:  # type: ignore[no-untyped-def]
    assert run("set", "--ttl", "10m", key, "v").returncode == 0
    raw = run("describe", "--json", key)
    assert raw.returncode == 0
    described = json.loads(raw.stdout)
    assert described["found"] is True and described["size"] == 1
    human = run("describe", key)
    assert human.returncode == 0 and human.stdout.strip()
    assert run("touch", key, "1h").returncode == 0
    assert run("touch", key + "-missing", "1h").returncode == 1
    assert run("describe", key + "-missing").returncode == 1


def test_server_subcommands(run) -> None:  # type: ignore[no-untyped-def]
    for sub in ("ping", "info", "stats", "trim"):
        r = run(sub)
        assert r.returncode == 0, (sub, r.stderr)
    r = run("call", "server.ping")
    assert r.returncode == 0 and json.loads(r.stdout) == {"pong": True}
    r = run("call", "cache.isCached", '{"key": "nothing-here"}')
    assert r.returncode == 0 and json.loads(r.stdout)["cached"] is False


def test_errors_exit_2_with_reason(run) -> None:  # type: ignore[no-untyped-def]
    r = run("set", "k" * 4097, "v")
    assert r.returncode == 2 and b"keyTooLong" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run("call", "no.such.method")
    assert r.returncode == 2 and b"methodNotFound" in r.stderr


def test_unreachable_daemon_exits_2(cli_bin: str) -> None:
    r = cli(cli_bin, "/tmp/halcyon-no-such-dir/h.sock", ["ping"])
    assert r.returncode == 2 and r.stderr


def test_socket_from_environment(cli_bin: str, daemon: Daemon) -> None:
    env: Dict[str, str] = dict(os.environ, HALCYON_SOCKET=daemon.socket)
    r = subprocess.run([cli_bin, "ping"], capture_output=True, env=env, timeout=30)
    assert r.returncode == 0


# Keys travel as argv, which cannot hold NUL; everything else must round-trip.
cli_keys = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1).filter(
    lambda k: len(k.encode()) <= 4096)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=cli_keys, data=st.binary(max_size=4096))
def test_cli_round_trips_any_bytes_and_key(halcyon_bin: str, daemon: Daemon, key: str, data: bytes) -> None:
    assert cli(halcyon_bin, daemon.socket, ["set", "--", key, "-"], data).returncode == 0
    got = cli(halcyon_bin, daemon.socket, ["get", "--", key])
    assert got.returncode == 0 and got.stdout == data


def test_a_dashed_key_hint_names_the_command_given(run) -> None:  # type: ignore[no-untyped-def]
    r = run("get", "-k")
    assert r.returncode == 2 and b"halcyon get -- -key" in r.stderr, r.stderr
    assert b"halcyon set" not in r.stderr
    r = run("set", "k", "-v2")
    assert r.returncode == 2 and b"halcyon set -- -key -value" in r.stderr, r.stderr


def test_touch_with_zero_says_the_key_expired_now(run, key: str) -> None:  # type: ignore[no-untyped-def]
    assert run("set", key, "v").returncode == 0
    r = run("-v", "touch", key, "0")
    assert r.returncode == 0 and r.stdout == b"expired now: removed\n", r.stdout
    assert run("get", key).returncode == 1


def test_get_streams_a_large_value_without_holding_it(daemon: Daemon, cli_bin: str, key: str) -> None:
    size = 24 << 20
    value = os.urandom(size)
    with halcyon.Client(daemon.socket, timeout=60) as c:
        assert c.set(key, value) is True
    command = [cli_bin, "--socket", daemon.socket, "get", key]
    # The peak RSS comes from /usr/bin/time, which forks the command itself: a child
    # forked from this test process would report this process's RSS, carried across exec.
    timer = shutil.which("time", path="/usr/bin")
    with tempfile.TemporaryDirectory() as scratch:
        peak_file = os.path.join(scratch, "peak")
        prefix = [timer, "-f", "%M", "-o", peak_file] if timer else []
        r = subprocess.run([*prefix, *command], capture_output=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert len(r.stdout) == size and r.stdout == value
        if timer:
            peak_kib = int(open(peak_file).read().split()[-1])
            assert peak_kib * 1024 < size, f"peak RSS {peak_kib} KiB for a {size >> 20} MiB value"
