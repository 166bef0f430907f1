"""The daemon at the edges of its contract: one daemon per cache folder, a folder it cannot
use, a value no tier can keep, and refusals of an upstream address or password file that
say what is wrong. Each runs real ``halcyond`` processes on private folders."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

import halcyon
from halcyon import errors
from conftest import Daemon, _start_daemon, short_tmpdir


@pytest.fixture
def folder() -> Iterator[str]:
    path = short_tmpdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def tree(path: str) -> List[str]:
    """Every path under ``path``, relative and sorted."""
    found: List[str] = []
    for root, dirs, files in os.walk(path):
        found.extend(os.path.relpath(os.path.join(root, name), path) for name in dirs + files)
    return sorted(found)


def run_refused(args: List[str], user: List[str] = []) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    """Runs a halcyond that must refuse to start; fails the test if it still runs after 20 s."""
    try:
        return subprocess.run([*user, *args], capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"halcyond started instead of refusing: {args}")


# ---------------------------------------------------------------- one daemon per folder

def test_a_second_daemon_on_a_folder_in_use_exits_1_creates_nothing_and_loses_nothing(
        halcyond_bin: str, folder: str) -> None:
    first = Daemon(halcyond_bin, folder)
    first.start()
    try:
        assert first.proc is not None
        written: Dict[str, bytes] = {f"k{i}": f"value {i}".encode() * 20 for i in range(2000)}
        with halcyon.Client(first.socket) as c:
            for key, value in written.items():
                assert c.set(key, value) is True
        cache_folder = os.path.join(first.cache_dir, "default")
        # The first daemon's own files keep changing (its materializer writes behind);
        # everything else must stay as it was.
        def outside_the_first_daemons_files() -> List[str]:
            return [p for p in tree(folder) if not p.startswith(("cache/default/", "cache/default.journal/"))]
        before = outside_the_first_daemons_files()
        other_socket = os.path.join(folder, "other.sock")
        second = run_refused([halcyond_bin, "--socket", other_socket, "--cache-dir", first.cache_dir,
                              "--log-level", "warning"])
        message = second.stderr.decode()
        assert second.returncode == 1, message
        assert cache_folder in message and f"pid {first.proc.pid}" in message, message
        assert len(message.strip().splitlines()) == 1, message
        assert outside_the_first_daemons_files() == before, "the refused daemon created or removed files"
        assert not os.path.exists(other_socket) and not os.path.exists(other_socket + ".lock")

        # The first daemon's acknowledged writes survive its kill -9 and a restart.
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=10)
        first.proc = None
        first.start()
        with halcyon.Client(first.socket) as c:
            missing = [k for k, v in written.items() if c.get(k) != v]
        assert missing == []
    finally:
        first.stop()


def test_a_refused_daemon_removes_the_folders_it_made(halcyond_bin: str, folder: str) -> None:
    # The cache's parent folders do not exist yet, and its name is too long for a file
    # name: the daemon makes the parents, fails on the lock file, and removes them again.
    r = run_refused([halcyond_bin, "--socket", os.path.join(folder, "s.sock"),
                     "--cache-dir", os.path.join(folder, "new", "deeper"), "--name", "n" * 300])
    assert r.returncode == 1 and b"ENAMETOOLONG" in r.stderr, r.stderr
    assert tree(folder) == []


# ---------------------------------------------------------------- unusable folder

def test_a_cache_folder_that_is_a_file_exits_1_naming_path_and_errno(halcyond_bin: str, folder: str) -> None:
    cache_dir = os.path.join(folder, "cache")
    os.makedirs(cache_dir, mode=0o700)
    Path(cache_dir, "default").write_text("a file where the folder should be")
    r = run_refused([halcyond_bin, "--socket", os.path.join(folder, "s.sock"), "--cache-dir", cache_dir])
    message = r.stderr.decode()
    assert r.returncode == 1, message
    assert os.path.join(cache_dir, "default") in message and "ENOTDIR" in message, message
    assert not os.path.exists(os.path.join(folder, "s.sock"))
    assert sorted(os.listdir(cache_dir)) == ["default"], "nothing is created beside the refused folder"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run the daemon as another user (root ignores modes)")
def test_a_cache_folder_the_user_cannot_write_exits_1_naming_path_and_errno(halcyond_bin: str, folder: str) -> None:
    # The daemon runs as nobody: its socket folder is nobody's, its cache folder root's.
    os.chown(folder, 65534, 65534)
    cache_dir = os.path.join(folder, "cache")
    os.makedirs(os.path.join(cache_dir, "default"), mode=0o755)
    os.chmod(cache_dir, 0o755)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    r = run_refused([halcyond_bin, "--socket", os.path.join(folder, "s.sock"), "--cache-dir", cache_dir],
                    user=nobody)
    message = r.stderr.decode()
    assert r.returncode == 1, message
    assert os.path.join(cache_dir, "default") in message and "EACCES" in message, message


# ---------------------------------------------------------------- values no tier can keep

@pytest.fixture(scope="module")
def small_daemon() -> Iterator[Daemon]:
    d = _start_daemon(["--disk-size-limit", "64KiB", "--memory-limit", "32KiB"])
    yield d
    d.stop()
    shutil.rmtree(d.folder, ignore_errors=True)


def test_a_value_larger_than_the_disk_limit_is_refused_with_the_limit(small_daemon: Daemon) -> None:
    key = "big-disk"
    fits = 65536 - 48 - len(key)  # the disk counts the file: header, key, value
    with halcyon.Client(small_daemon.socket) as c:
        for store in (lambda v: c.set(key, v), lambda v: c.add(key, v)):
            with pytest.raises(errors.ValueTooLargeError) as refused:
                store(b"x" * (fits + 1))
            assert refused.value.reason == "valueTooLarge"
            assert refused.value.tier == "disk" and refused.value.limit == 65536
            assert refused.value.data["param"] == "value"
            assert c.get(key) is None
        assert c.set(key, b"x" * fits) is True
        version = c.get_entry(key).version
        with pytest.raises(errors.InvalidParamsError) as refused:
            c.cas(key, b"y" * (fits + 1), version)
        assert refused.value.reason == "valueTooLarge"
        assert c.get(key) == b"x" * fits


def test_a_memory_only_value_larger_than_the_memory_limit_is_refused(small_daemon: Daemon) -> None:
    with halcyon.Client(small_daemon.socket) as c:
        with pytest.raises(errors.ValueTooLargeError) as refused:
            c.set("big-memory", b"m" * (32768 + 1), to_disk=False)
        assert refused.value.tier == "memory" and refused.value.limit == 32768
        assert c.get("big-memory") is None
        assert c.set("fits-memory", b"m" * 32768, to_disk=False) is True
        assert c.get("fits-memory") == b"m" * 32768


def test_set_many_with_one_value_too_large_stores_none(small_daemon: Daemon) -> None:
    with halcyon.Client(small_daemon.socket) as c:
        with pytest.raises(errors.InvalidParamsError) as refused:
            c.set_many({"many-a": b"a", "many-b": b"b" * 70000})
        assert refused.value.reason == "valueTooLarge"
        assert refused.value.data["param"] == "entries[1].value"
        assert c.get("many-a") is None and c.get("many-b") is None


def test_the_cli_names_value_too_large(small_daemon: Daemon, halcyon_bin: str) -> None:
    r = subprocess.run([halcyon_bin, "--socket", small_daemon.socket, "set", "cli-big", "-"], input=b"z" * 70000,
                       capture_output=True, timeout=30)
    assert r.returncode == 2 and r.stderr.startswith(b"halcyon: valueTooLarge: "), r.stderr


# ---------------------------------------------------------------- upstream refusals

@pytest.mark.parametrize("url, words", [
    ("redis://cache:secret@127.0.0.1:6379", ["--upstream-password-file", "redis://cache:***@127.0.0.1:6379"]),
    ("http://127.0.0.1:6379", ["redis://", "unix://"]),
])
def test_an_upstream_address_error_says_what_is_wrong_in_words(halcyond_bin: str, folder: str, url: str,
                                                                words: List[str]) -> None:
    r = run_refused([halcyond_bin, "--socket", os.path.join(folder, "s.sock"),
                     "--cache-dir", os.path.join(folder, "cache"), "--upstream", url])
    message = r.stderr.decode()
    assert r.returncode == 2, message
    for word in words:
        assert word in message, message
    for enum_name in ("passwordInURL", "unsupportedScheme", "secret"):
        assert enum_name not in message, message


def test_a_password_file_others_may_read_is_refused(halcyond_bin: str, folder: str) -> None:
    password = Path(folder, "redis.password")
    password.write_text("hunter2\n")
    password.chmod(0o644)
    r = run_refused([halcyond_bin, "--socket", os.path.join(folder, "s.sock"),
                     "--cache-dir", os.path.join(folder, "cache"),
                     "--upstream", "redis://127.0.0.1:1", "--upstream-password-file", str(password)])
    message = r.stderr.decode()
    assert r.returncode == 1, message
    assert str(password) in message and "0644" in message and "chmod 600" in message, message
    assert "hunter2" not in message
    assert not os.path.exists(os.path.join(folder, "s.sock")) and not os.path.exists(os.path.join(folder, "cache"))
    assert stat.S_IMODE(password.stat().st_mode) == 0o644
