"""Fixtures: a real ``halcyond`` (session-wide, and a fresh one per test for restarts),
the fake server for client-machinery tests, and the ``halcyon`` CLI binary.

``HALCYOND_BIN`` / ``HALCYON_BIN`` name the binaries (CI sets them). By default they
are ``<repo>/.build/debug/halcyond`` and ``.../halcyon``; a missing one is built once
with ``swift build --product ...`` from the repository root. Tests that need a binary
that cannot be found or built are skipped with a message saying so.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE))
# Tests run against the source tree unless the package is installed.
sys.path.insert(0, str(HERE.parent / "src"))

from fakeserver import FakeServer  # noqa: E402

import halcyon  # noqa: E402

_built: Dict[str, Optional[str]] = {}


def _binary(env: str, product: str) -> Optional[str]:
    """Path of a built product, building it once if needed; None when unavailable."""
    if product in _built:
        return _built[product]
    path = os.environ.get(env) or str(REPO / ".build" / "debug" / product)
    if not os.access(path, os.X_OK) and not os.environ.get(env) and shutil.which("swift"):
        subprocess.run(["swift", "build", "--product", product], cwd=REPO,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    _built[product] = path if os.access(path, os.X_OK) else None
    return _built[product]


def short_tmpdir() -> str:
    # Unix socket paths must stay under 108 bytes, so no deep pytest tmp_path.
    return tempfile.mkdtemp(prefix="hc-", dir="/tmp")


class Daemon:
    """One ``halcyond`` process on a private socket and cache folder."""

    def __init__(self, binary: str, folder: str, extra: Optional[List[str]] = None) -> None:
        self.binary = binary
        self.folder = folder
        self.socket = os.path.join(folder, "h.sock")
        self.cache_dir = os.path.join(folder, "cache")
        self.extra = list(extra or [])
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log = os.path.join(folder, "halcyond.log")

    def start(self) -> None:
        args = [self.binary, "--socket", self.socket, "--cache-dir", self.cache_dir,
                "--enable-debug-methods", "--log-level", "warning", *self.extra]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"halcyond exited with {self.proc.returncode}: {self.tail()}")
            try:
                with halcyon.Client(self.socket, timeout=2, retry=False) as c:
                    if c.ping():
                        return
            except (halcyon.HalcyonError, OSError):
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"halcyond did not answer server.ping within 30 s: {self.tail()}")

    def tail(self) -> str:
        try:
            with open(self.log, "rb") as f:
                return f.read()[-2000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self) -> Optional[int]:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None

    def restart(self) -> None:
        self.stop()
        self.start()


def _start_daemon(extra: Optional[List[str]] = None) -> Daemon:
    binary = _binary("HALCYOND_BIN", "halcyond")
    if binary is None:
        pytest.skip("halcyond is not built (set HALCYOND_BIN or run `swift build --product halcyond`)")
    daemon = Daemon(binary, short_tmpdir(), extra)
    try:
        daemon.start()
    except RuntimeError as exc:
        if "not built yet" in str(exc):
            pytest.skip(f"{binary} is still the placeholder: {exc}")
        raise
    return daemon


def _daemon_until_done() -> Iterator[Daemon]:
    """A started daemon for a fixture to yield; stopped and its folder removed after."""
    d = _start_daemon()
    yield d
    d.stop()
    shutil.rmtree(d.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    """One daemon for the whole session (tests use unique keys)."""
    yield from _daemon_until_done()


@pytest.fixture
def fresh_daemon() -> Iterator[Daemon]:
    """A daemon of this test's own (restarts, clear, limits)."""
    yield from _daemon_until_done()


@pytest.fixture
def upstream_host() -> Iterator[Tuple[Daemon, "object"]]:
    """A daemon of this test's own started with ``--upstream`` on a ``redis-server`` of its
    own (``test_upstream.Redis``), as (daemon, redis); skipped without redis-server."""
    from test_upstream import REDIS_CLI, REDIS_SERVER, Redis
    if REDIS_SERVER is None or REDIS_CLI is None:
        pytest.skip("redis-server is not installed (scripts/bootstrap installs it)")
    redis = Redis()
    redis.start()
    try:
        daemon = _start_daemon(["--upstream", redis.url])
        try:
            yield daemon, redis
        finally:
            daemon.stop()
            shutil.rmtree(daemon.folder, ignore_errors=True)
    finally:
        redis.remove()


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    folder = short_tmpdir()
    server = FakeServer(os.path.join(folder, "f.sock"))
    yield server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(params=["fake", "daemon"])
def server_path(request: pytest.FixtureRequest) -> str:
    """The socket of the fake server and of the real daemon, in turn: the client's
    behaviour must be the same against both."""
    if request.param == "fake":
        return str(request.getfixturevalue("fake").path)
    return str(request.getfixturevalue("daemon").socket)


@pytest.fixture
def client(server_path: str) -> Iterator[halcyon.Client]:
    with halcyon.Client(server_path, timeout=10) as c:
        yield c


#: The methods protocol revision 2 added.
REVISION_2 = ("cache.add", "cache.incr", "cache.cas", "cache.getMany", "cache.setMany", "cache.keys",
              "cache.removePrefix", "cache.lease", "cache.releaseLease")
_missing: Dict[str, List[str]] = {}


def require_revision_2(daemon: Daemon) -> None:
    """Skip, naming them, when this daemon lacks methods of revision 2 (a binary built
    before they were merged). Probed once per binary: an empty params object is refused
    as invalid by a method that exists and as methodNotFound by one that does not."""
    if daemon.binary not in _missing:
        missing = []
        with halcyon.Client(daemon.socket, timeout=10) as c:
            for method in REVISION_2:
                try:
                    c.call(method, {})
                except halcyon.MethodNotFoundError:
                    missing.append(method)
                except halcyon.HalcyonError:
                    pass
        _missing[daemon.binary] = missing
    if _missing[daemon.binary]:
        pytest.skip(f"{daemon.binary} lacks {', '.join(_missing[daemon.binary])} "
                    "(protocol revision 2): build a daemon that has them")


@pytest.fixture
def rev2_daemon(daemon: Daemon) -> Daemon:
    """The session daemon, skipping the test when it lacks revision 2's methods."""
    require_revision_2(daemon)
    return daemon


@pytest.fixture
def rev2_fresh_daemon(fresh_daemon: Daemon) -> Daemon:
    """A daemon of the test's own, skipping the test when it lacks revision 2's methods."""
    require_revision_2(fresh_daemon)
    return fresh_daemon


@pytest.fixture
def daemon_client(rev2_daemon: Daemon) -> Iterator[halcyon.Client]:
    """A client of the real daemon only: for methods the fake server does not have
    (leases, add, incr, ...), which are never tested against a stand-in."""
    with halcyon.Client(rev2_daemon.socket, timeout=10) as c:
        yield c


@pytest.fixture
def key() -> str:
    """A key no other test uses."""
    return f"t-{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def halcyond_bin() -> str:
    """The built daemon, for tests that run it with flags of their own."""
    path = _binary("HALCYOND_BIN", "halcyond")
    if path is None:
        pytest.skip("halcyond is not built")
    return path


@pytest.fixture(scope="session")
def halcyon_bin() -> str:
    binary = _binary("HALCYON_BIN", "halcyon")
    if binary is None:
        pytest.skip("the halcyon CLI is not built yet (set HALCYON_BIN or run `swift build --product halcyon`)")
    probe = subprocess.run([binary, "--help"], capture_output=True, timeout=30)
    if b"not built yet" in probe.stdout + probe.stderr:
        pytest.skip(f"{binary} is still the placeholder")
    return binary


@pytest.fixture
def cli_bin(halcyon_bin: str) -> str:
    """The command the CLI and shell tests run: the Swift ``halcyon`` binary (the Python
    ``halcyon-py`` copy is gone in its favour)."""
    return halcyon_bin


def wait_for_socket(path: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            return
        except OSError:
            time.sleep(0.02)
        finally:
            s.close()
    raise TimeoutError(path)
