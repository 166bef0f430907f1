"""Behaviour only the real daemon has: restarts and the disk tier, expirations,
cancellation of timed-out writes, line and batch limits, encodings, and hypothesis
round trips of arbitrary bytes and keys."""

from __future__ import annotations

import datetime as dt
import time

import pytest

import halcyon
from halcyon import errors
from conftest import Daemon, _start_daemon
from test_client import VALUES, _hold_io


def test_reconnect_after_restart_keeps_disk_tier(fresh_daemon: Daemon) -> None:
    values = [v for v in VALUES if v is not None]  # see test_client.NULL_BUG
    with halcyon.Client(fresh_daemon.socket) as c:
        for i, value in enumerate(values):
            c.set(f"k{i}", value)
        fresh_daemon.restart()
        # Same client object: the broken connection is replaced transparently.
        for i, value in enumerate(values):
            entry = c.get_entry(f"k{i}")
            assert entry is not None and entry.value == value and type(entry.value) is type(value)
            assert entry.cache_type in ("disk", "memory")


def test_sigterm_exits_zero(fresh_daemon: Daemon) -> None:
    with halcyon.Client(fresh_daemon.socket) as c:
        c.set("a", "b")
    assert fresh_daemon.stop() == 0


def test_clear_and_total_size(fresh_daemon: Daemon) -> None:
    with halcyon.Client(fresh_daemon.socket) as c:
        for i in range(5):
            c.set(f"k{i}", b"12345678")
        size = c.total_size()
        assert size["count"] == 5 and size["bytes"] >= 40
        assert c.clear() >= 5  # one per entry, or per entry and tier
        assert c.total_size()["count"] == 0
        c.set("m", "memory only", to_disk=False)
        assert c.cached_type("m") == "memory"
        assert c.get("m", memory_only=True) == "memory only"
        assert c.get("k0", memory_only=True) is None  # cleared
        assert c.total_size()["count"] == 0


def test_expirations_on_the_wire(daemon: Daemon, key: str) -> None:
    # Memory and disk get the same expiration, so whichever tier answers agrees.
    with halcyon.Client(daemon.socket) as c:
        now = time.time()
        c.set(key, "v", expire=60, memory_expire=60)
        d = c.describe(key)
        assert d is not None and d.expires_at is not None
        assert now + 59 <= d.expires_at <= now + 62
        if d.cache_type == "disk":
            assert d.expires_at == int(d.expires_at)  # rounded up on disk
        assert d.last_access_at is not None and abs(d.last_access_at - now) < 5
        c.set(key, "v", expire=dt.timedelta(days=2), memory_expire=dt.timedelta(days=2))
        d = c.describe(key)
        assert d is not None and d.expires_at is not None and d.expires_at > now + 2 * 86400 - 5
        when = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=3)
        c.set(key, "v", expire=when, memory_expire=when)
        d = c.describe(key)
        assert d is not None and d.expires_at is not None and abs(d.expires_at - when.timestamp()) <= 1
        c.set(key, "v", expire="never", memory_expire="never")
        d = c.describe(key)
        assert d is not None and d.expires_at is None
        assert c.touch(key, 30, memory_expire=30) is True
        d = c.describe(key)
        assert d is not None and d.expires_at is not None and d.expires_at <= time.time() + 31


def test_one_lifetime_whichever_tier_answers(daemon: Daemon, key: str) -> None:
    # The entry's lifetime is the disk expiration; the memory copy only says how long it
    # stays in RAM (memory_expires_at), and a memory hit reports the lifetime too.
    with halcyon.Client(daemon.socket) as c:
        now = time.time()
        c.set(key, "v", expire=600, memory_expire=30)
        d = c.describe(key)
        assert d is not None and d.cache_type == "memory"
        assert d.expires_at is not None and now + 595 <= d.expires_at <= now + 602
        assert d.memory_expires_at is not None and now + 25 <= d.memory_expires_at <= now + 32
        e = c.get_entry(key, extend=False)
        assert e is not None and e.cache_type == "memory" and e.expires_at == d.expires_at
        # extend=N resets the lifetime even when memory answers.
        e = c.get_entry(key, extend=5000)
        assert e is not None and e.cache_type == "memory" and e.expires_at is not None
        assert e.expires_at >= now + 4995
        c.clear(memory=True, disk=False)
        d = c.describe(key)
        assert d is not None and d.cache_type == "disk" and d.memory_expires_at is None
        assert d.expires_at == e.expires_at


def test_short_expiry_really_expires(daemon: Daemon, key: str) -> None:
    with halcyon.Client(daemon.socket) as c:
        c.set(key, "brief", expire=1, memory_expire=1)
        assert c.get(key, extend=False) == "brief"
        time.sleep(2.1)
        assert c.get(key) is None


def test_timed_out_write_is_cancelled(daemon: Daemon, key: str) -> None:
    with halcyon.Client(daemon.socket) as c:
        holder = _hold_io(daemon.socket, 1.5)
        with pytest.raises(halcyon.HalcyonTimeoutError):
            c.set(key, "never stored", timeout=0.3)
        holder.join()
        # The cancel reached the daemon while the set still waited: it never ran.
        assert c.get(key) is None


def test_cannot_encode(daemon: Daemon, key: str) -> None:
    with halcyon.Client(daemon.socket) as c:
        c.set(key, b"\xff\xfe")
        with pytest.raises(errors.CannotEncodeError) as info:
            c.call("cache.get", {"key": key, "encoding": "utf8"})
        assert info.value.code == -32004
        got = c.call("cache.get", {"key": key, "encoding": "base64"})
        assert got["value"] == "//4="


def test_line_too_long_keeps_connection() -> None:
    d = _start_daemon(["--max-line-bytes", "4096"])
    try:
        with halcyon.Client(d.socket) as c:
            with pytest.raises(errors.LineTooLongError):
                c.set("big", b"x" * 8192)
            assert c.ping()
            c.set("small", "ok")
            assert c.get("small") == "ok"
    finally:
        d.stop()


def test_configure_connection(daemon: Daemon, key: str) -> None:
    with halcyon.Client(daemon.socket) as c:
        settings_now = c.configure(callback_queue="mainAsync", load_disk_file_synchronously=True)
        assert isinstance(settings_now, dict)
        c.set(key, 1)
        assert c.get(key) == 1
