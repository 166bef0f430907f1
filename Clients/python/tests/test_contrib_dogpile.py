"""halcyon.contrib.dogpile against a real halcyond: dogpile.cache's own generic backend,
serializer and mutex suites (``dogpile.testing.fixtures``, shipped in dogpile.cache's
wheel), as dogpile runs them for its Redis backend, plus what they leave out: the
``"halcyon"`` entry point, daemon-side lifetimes, and the lease mutex across threads."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

pytest.importorskip("dogpile.cache", reason="dogpile.cache is not installed (pip install 'halcyon-cache[dogpile]')")

from dogpile.cache import make_region, register_backend  # noqa: E402
from dogpile.cache.api import NO_VALUE  # noqa: E402
from dogpile.testing.fixtures import (  # noqa: E402
    _GenericBackendTestSuite,
    _GenericMutexTestSuite,
    _GenericSerializerTestSuite,
)

import halcyon  # noqa: E402
from halcyon.contrib.dogpile import HalcyonBackend  # noqa: E402
from conftest import Daemon, _daemon_until_done  # noqa: E402

try:
    from importlib.metadata import entry_points
except ImportError:  # pragma: no cover - Python < 3.8
    entry_points = None  # type: ignore[assignment]


def _registered() -> bool:
    """Whether the installed distribution declares the ``dogpile.cache`` entry point."""
    found = entry_points(group="dogpile.cache") if entry_points else []  # type: ignore[call-arg]
    return any(ep.name == "halcyon" for ep in found)


if not _registered():
    # Running from the source tree without the distribution installed: register the
    # same name the entry point declares (test_entry_point_is_declared checks it).
    register_backend("halcyon", "halcyon.contrib.dogpile", "HalcyonBackend")


@pytest.fixture(scope="module", autouse=True)
def dogpile_daemon() -> Iterator[Daemon]:
    """A daemon of this module's own, found through $HALCYON_SOCKET (the suites'
    backends are configured from class attributes, before any fixture could pass a path)."""
    for daemon in _daemon_until_done():
        old = os.environ.get("HALCYON_SOCKET")
        os.environ["HALCYON_SOCKET"] = daemon.socket
        yield daemon
        if old is None:
            os.environ.pop("HALCYON_SOCKET", None)
        else:
            os.environ["HALCYON_SOCKET"] = old


class TestHalcyonBackend(_GenericBackendTestSuite):
    backend = "halcyon"
    config_args = {"arguments": {"socket_timeout": 10, "foo": "barf"}}


class TestHalcyonSerializer(_GenericSerializerTestSuite, TestHalcyonBackend):
    pass


class TestHalcyonDistributedMutex(_GenericMutexTestSuite):
    backend = "halcyon"
    config_args = {"arguments": {"socket_timeout": 10, "distributed_lock": True}}


class TestHalcyonDistributedMutexPrefix(_GenericMutexTestSuite):
    backend = "halcyon"
    config_args = {"arguments": {"socket_timeout": 10, "distributed_lock": True, "lock_prefix": "_lok."}}


def test_entry_point_is_declared() -> None:
    """pyproject.toml declares the entry point dogpile finds the backend by, and an
    installed distribution exposes it."""
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    section = text.split('[project.entry-points."dogpile.cache"]', 1)[1].split("\n[", 1)[0]
    assert 'halcyon = "halcyon.contrib.dogpile:HalcyonBackend"' in section
    if _registered():
        found = [ep for ep in entry_points(group="dogpile.cache") if ep.name == "halcyon"]  # type: ignore[call-arg]
        assert found[0].load() is HalcyonBackend


def test_daemon_side_lifetime_and_no_sliding(dogpile_daemon: Daemon) -> None:
    region = make_region().configure(
        "halcyon", arguments={"socket_path": dogpile_daemon.socket, "halcyon_expiration_time": 60})
    region.set("lifetime", "v")
    with halcyon.Client(dogpile_daemon.socket) as c:
        first = c.describe("lifetime")
        assert first is not None and first.expires_at is not None
        assert time.time() + 55 < first.expires_at <= time.time() + 61
        time.sleep(1.1)
        assert region.get("lifetime") == "v"
        assert c.describe("lifetime").expires_at == first.expires_at  # type: ignore[union-attr]
        c.set("foreign", "text")
    assert region.get("foreign") is NO_VALUE
    region.delete("lifetime")
    assert region.get("lifetime") is NO_VALUE


def _locking_backend(daemon: Daemon, **arguments: object) -> HalcyonBackend:
    return make_region().configure(  # type: ignore[no-any-return]
        "halcyon", arguments={"socket_path": daemon.socket, "distributed_lock": True, **arguments}).backend


def test_lease_mutex_released_from_another_thread(dogpile_daemon: Daemon) -> None:
    backend = _locking_backend(dogpile_daemon, lock_timeout=30)
    mutex = backend.get_mutex("cross-thread")
    assert mutex.acquire()
    other = backend.get_mutex("cross-thread")
    assert not other.acquire(False)
    released = threading.Thread(target=mutex.release)
    released.start()
    released.join(10)
    assert not mutex.locked()
    assert other.acquire(False)
    other.release()
    with pytest.raises(RuntimeError):
        other.release()


def test_lock_blocking_timeout(dogpile_daemon: Daemon) -> None:
    backend = _locking_backend(dogpile_daemon, lock_blocking_timeout=0.3)
    holder = backend.get_mutex("blocked")
    assert holder.acquire()
    waiter = backend.get_mutex("blocked")
    started = time.monotonic()
    result: list = []
    t = threading.Thread(target=lambda: result.append(waiter.acquire()))
    t.start()
    t.join(10)
    assert result == [False]
    assert 0.25 < time.monotonic() - started < 5
    holder.release()
