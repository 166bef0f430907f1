"""An entry stored with an absolute ``{"date": T}`` expiration lives until T, against a real
``halcyond``: sliding reads (the connection default) and a touch without an expiration
leave ``expiresAt`` at T, from memory, from disk, after a clean restart and after a
kill -9 (the journal's replay); an explicit touch replaces the lifetime and its kind.

T has a fraction just under a whole second, so a lifetime that slid by even a millisecond
would round up to the next second and show.
"""

from __future__ import annotations

import math
import time
from typing import Any, Dict

from conftest import Daemon

import halcyon


def _expires_at(c: halcyon.Client, key: str) -> Any:
    reply: Dict[str, Any] = c.call("cache.get", {"key": key})
    assert reply["found"], reply
    return reply["expiresAt"]


def _wait_past(instant: float) -> None:
    """Returns once the wall clock is past `instant` (a few milliseconds at most here):
    what is awaited is time itself (at most a second here), for a slide to have
    something to add."""
    deadline = time.monotonic() + 2
    while time.time() <= instant and time.monotonic() < deadline:
        time.sleep(0.002)
    assert time.time() > instant


def _kill_and_restart(daemon: Daemon) -> None:
    proc = daemon.proc
    assert proc is not None
    proc.kill()
    proc.wait(timeout=10)
    daemon.proc = None
    daemon.start()


def test_an_absolute_date_never_slides(fresh_daemon: Daemon) -> None:
    base = math.floor(time.time()) + 3600
    t = base + 0.9995
    expected = base + 1  # rounded up to the whole second
    with halcyon.Client(fresh_daemon.socket) as c:
        stored = c.call("cache.set", {"key": "fixed", "value": "v", "expiration": {"date": t}})
        assert stored["expiresAt"] == expected
        _wait_past(time.time() + 0.005)

        # Sliding reads from memory, then from disk (memory copy dropped).
        assert _expires_at(c, "fixed") == expected
        c.call("cache.remove", {"key": "fixed", "fromDisk": False})
        assert _expires_at(c, "fixed") == expected
        assert _expires_at(c, "fixed") == expected

        # A touch without an expiration leaves it; an explicit date replaces it.
        assert c.call("cache.touch", {"key": "fixed"})["expiresAt"] == expected

        # Across a clean restart, and across a kill -9 (the journal replays it).
        fresh_daemon.restart()
        assert _expires_at(c, "fixed") == expected
        c.call("cache.set", {"key": "fresh", "value": "w", "expiration": {"date": t}})
        _kill_and_restart(fresh_daemon)
        _wait_past(time.time() + 0.005)
        assert _expires_at(c, "fixed") == expected
        assert _expires_at(c, "fresh") == expected
        assert c.call("cache.touch", {"key": "fresh"})["expiresAt"] == expected
        _kill_and_restart(fresh_daemon)
        assert _expires_at(c, "fresh") == expected


def test_an_explicit_touch_replaces_the_lifetime_and_its_kind(fresh_daemon: Daemon) -> None:
    base = math.floor(time.time()) + 3600
    with halcyon.Client(fresh_daemon.socket) as c:
        c.call("cache.set", {"key": "k", "value": "v", "expiration": {"date": base + 0.9995}})
        # Sliding now: each read counts 100 s again from itself; past the next whole
        # second, a read's lifetime ends a second later than the touch's.
        first = c.call("cache.touch", {"key": "k", "expiration": {"seconds": 100}})["expiresAt"]
        _wait_past(math.floor(time.time()) + 1)
        assert _expires_at(c, "k") > first
        # Absolute again, at a new instant, also after a kill -9.
        later = base + 7200
        assert c.call("cache.touch", {"key": "k", "expiration": {"date": later}})["expiresAt"] == later
        assert c.call("cache.touch", {"key": "k"})["expiresAt"] == later
        _kill_and_restart(fresh_daemon)
        assert _expires_at(c, "k") == later
