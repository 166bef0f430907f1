"""Clients/shell/halcyon.sh against the real daemon through the real `halcyon` command.
Skipped (with a message) until the CLI is built."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

import halcyon
from conftest import REPO

LIBRARY = REPO / "Clients" / "shell" / "halcyon.sh"
EXAMPLES = REPO / "Clients" / "shell" / "examples"


def sh(script: str, daemon_socket: str, cli: str, stdin: bytes = b"", args: List[str] = ()) -> subprocess.CompletedProcess:  # type: ignore[assignment,type-arg]
    env: Dict[str, str] = dict(os.environ, HALCYON_SOCKET=daemon_socket, HALCYON_BIN=cli)
    return subprocess.run(["bash", "-c", f"source {LIBRARY}\n{script}", "bash", *args],
                          input=stdin, capture_output=True, env=env, timeout=60)


@pytest.fixture
def env(server_path: str, cli_bin: str) -> Dict[str, str]:
    """Every test runs with each CLI (Swift, Python) against each server (fake, real)."""
    return {"daemon_socket": server_path, "cli": cli_bin}


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


def test_library_and_examples_pass_shellcheck() -> None:
    import shutil
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    files = [str(LIBRARY), *sorted(str(p) for p in EXAMPLES.glob("*.sh"))]
    r = subprocess.run(["shellcheck", "-x", "-P", "SCRIPTDIR", *files], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stdout.decode()
