"""The atomic, listing and lease methods through the Python client, against the real daemon only (the fake
server has none of them): add, incr/decr, cas, get_many/set_many, keys, remove_prefix,
ttl, leases, and memoize computing once across threads, tasks and processes."""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import threading
import time
import uuid
from typing import Any, Dict, List, Optional

import pytest

import halcyon
from halcyon import errors
from halcyon.aio import AsyncClient
from conftest import Daemon


def _threads(count: int, work: Any) -> List[Any]:
    """Run ``work(i)`` in ``count`` threads started together; their results in order."""
    results: List[Any] = [None] * count
    failures: List[BaseException] = []
    barrier = threading.Barrier(count, timeout=30)

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a worker thread did not finish within 60 s"
    assert failures == []
    return results


def _wait_for_waiters(socket: str, count: int, limit: float = 10.0) -> int:
    """Poll cache.stats until ``count`` callers are parked on a lease (or ``limit``
    passes): the daemon has no event to await for that. Returns the last count seen."""
    seen = 0
    deadline = time.monotonic() + limit
    with halcyon.Client(socket, timeout=10) as c:
        while time.monotonic() < deadline:
            seen = int(c.stats().get("leaseWaiters", 0))
            if seen >= count:
                break
            time.sleep(0.02)
    return seen


# ----------------------------------------------------------------- add

def test_add_has_exactly_one_winner_among_8_connections(rev2_daemon: Daemon, key: str) -> None:
    def work(i: int) -> bool:
        with halcyon.Client(rev2_daemon.socket, timeout=10) as c:
            return c.add(key, i)
    won = _threads(8, work)
    assert won.count(True) == 1
    with halcyon.Client(rev2_daemon.socket) as c:
        assert c.get(key) == won.index(True)
        assert c.add(key, "again") is False


# ---------------------------------------------------------------- incr

def test_incr_loses_nothing_across_4_threads_x_250(rev2_daemon: Daemon, key: str) -> None:
    def work(_: int) -> int:
        last = 0
        with halcyon.Client(rev2_daemon.socket, timeout=10) as c:
            for _ in range(250):
                last = c.incr(key)
        return last
    _threads(4, work)
    with halcyon.Client(rev2_daemon.socket) as c:
        assert c.get(key) == 1000
        assert c.decr(key, 10) == 990
        assert c.incr(key, -990) == 0


def test_incr_initial_and_errors_by_reason(daemon_client: halcyon.Client, key: str) -> None:
    c = daemon_client
    assert c.incr(key, 5, initial=100) == 105
    c.set(key + "s", "text")
    with pytest.raises(errors.NotAnIntegerError) as info:
        c.incr(key + "s")
    assert info.value.reason == "notAnInteger"
    c.set(key + "big", 2**63 - 1)
    with pytest.raises(errors.IntegerOverflowError):
        c.incr(key + "big")
    with pytest.raises(TypeError):
        c.incr(key, 1.5)  # type: ignore[arg-type]


# ----------------------------------------------------------------- cas

def test_cas_refuses_a_stale_version(daemon_client: halcyon.Client, key: str) -> None:
    c = daemon_client
    c.set(key, {"n": 1})
    first = c.get_entry(key)
    assert first is not None and isinstance(first.version, int)
    assert c.cas(key, {"n": 2}, first.version) is True
    assert c.cas(key, {"n": 3}, first.version) is False  # stale: the first cas changed it
    second = c.get_entry(key)
    assert second is not None and second.value == {"n": 2} and second.version != first.version
    description = c.describe(key)
    assert description is not None and description.version == second.version
    c.delete(key)
    assert c.cas(key, "gone", second.version) is False


# ------------------------------------------------------------ multi-key

def test_set_many_and_get_many_keep_order(daemon_client: halcyon.Client, key: str) -> None:
    c = daemon_client
    mapping: Dict[str, Any] = {f"{key}:{i}": v for i, v in enumerate([b"\x00bytes", "text", {"j": [1]}, None, 7])}
    versions = c.set_many(mapping, expire=60)
    assert list(versions) == list(mapping)
    assert all(isinstance(v, int) for v in versions.values())
    asked = list(reversed(list(mapping))) + [f"{key}:missing"]
    got = c.get_many(asked)
    assert list(got) == asked[:-1]  # hits only, in the order asked
    assert got == {k: mapping[k] for k in asked[:-1]}
    with_default = c.get_many(asked, default="-")
    assert list(with_default) == asked and with_default[f"{key}:missing"] == "-"


def test_get_many_over_max_batch_is_refused_on_the_wire_and_split_by_the_client(
        daemon_client: halcyon.Client, key: str) -> None:
    limit = int(daemon_client.info().get("limits", {}).get("maxBatch", 1000))
    keys = [f"{key}:{i}" for i in range(limit + 1)]
    with pytest.raises(errors.TooManyKeysError):
        daemon_client.call("cache.getMany", {"keys": keys})
    assert daemon_client.get_many(keys) == {}


# ---------------------------------------------------------- keys, prefix

def test_keys_pages_return_each_key_once(rev2_fresh_daemon: Daemon) -> None:
    with halcyon.Client(rev2_fresh_daemon.socket) as c:
        c.set_many({f"user:{i:02d}": i for i in range(25)})
        c.set("other", 1)
        seen = list(c.keys("user:", page_size=4))
        assert sorted(seen) == [f"user:{i:02d}" for i in range(25)] and len(seen) == 25
        assert sorted(c.keys()) == sorted(seen + ["other"])
        # A restart leaves the disk tier alone to list them.
        rev2_fresh_daemon.restart()
        assert sorted(c.keys("user:", page_size=7)) == sorted(seen)
        with pytest.raises(errors.InvalidParamsError):
            list(c.keys("user:", page_size=0))


def test_remove_prefix(daemon_client: halcyon.Client, key: str) -> None:
    c = daemon_client
    c.set_many({f"{key}:a:{i}": i for i in range(5)})
    c.set(f"{key}:b", 1)
    assert c.remove_prefix(f"{key}:a:") == 5
    assert c.get_many([f"{key}:a:{i}" for i in range(5)]) == {}
    assert c.get(f"{key}:b") == 1
    with pytest.raises(errors.EmptyPrefixError):
        c.remove_prefix("")


def test_keys_and_remove_prefix_see_forced_extension_files(rev2_fresh_daemon: Daemon) -> None:
    """An entry stored with a forcedExtension is listed (from memory, and from its file
    alone after a restart) and removed by prefix: its file too, not only the memory copy."""
    with halcyon.Client(rev2_fresh_daemon.socket) as c:
        c.call("cache.set", {"key": "fx:png", "value": "1", "forcedExtension": "png"})
        c.call("cache.set", {"key": "fx:both", "value": "2"})
        c.call("cache.set", {"key": "fx:both", "value": "3", "forcedExtension": "dat"})
        c.set("other", 1)
        assert sorted(c.keys("fx:")) == ["fx:both", "fx:png"]
        rev2_fresh_daemon.restart()
        assert sorted(c.keys("fx:")) == ["fx:both", "fx:png"]
        assert c.remove_prefix("fx:") == 2
        for key, ext in (("fx:png", "png"), ("fx:both", "dat"), ("fx:both", None)):
            params: Dict[str, Any] = {"key": key}
            if ext:
                params["forcedExtension"] = ext
            assert c.call("cache.get", params) == {"found": False}, (key, ext)
        assert list(c.keys("fx:")) == []
        assert c.get("other") == 1


def test_ttl(daemon_client: halcyon.Client, key: str) -> None:
    c = daemon_client
    assert c.ttl(key) is None
    c.set(key, 1, expire="1h30m")
    left = c.ttl(key)
    assert left is not None and 5400 - 5 < left <= 5401
    c.set(key, 1, expire="never")
    assert c.ttl(key) == math.inf


# --------------------------------------------------------------- leases

def test_lease_handoff_to_a_waiter(rev2_daemon: Daemon, key: str) -> None:
    with halcyon.Client(rev2_daemon.socket) as holder, halcyon.Client(rev2_daemon.socket) as other:
        got = holder.lease(key, "30s")
        assert got.token is not None and got.entry is None
        assert other.lease(key, 30).leased  # wait=0: told at once
        answer: List[halcyon.Lease] = []
        waiter = threading.Thread(target=lambda: answer.append(other.lease(key, 30, wait=20)))
        waiter.start()
        assert _wait_for_waiters(rev2_daemon.socket, 1) >= 1
        assert holder.set(key, "computed", lease=got.token)
        waiter.join(timeout=20)
        assert not waiter.is_alive()
        # Not woken, it would have waited its 20 s out and been told "leased".
        assert answer[0].entry is not None and answer[0].entry.value == "computed"


def test_released_or_disconnected_lease_passes_on(rev2_daemon: Daemon, key: str) -> None:
    with halcyon.Client(rev2_daemon.socket) as a, halcyon.Client(rev2_daemon.socket) as b:
        token = a.lease(key, 30).token
        assert token is not None
        assert a.release_lease(key, token) is True
        assert a.release_lease(key, token) is False
        again = b.lease(key, 30).token
        assert again is not None
        b.close()  # the holder goes away: its lease ends with its connection
        deadline = time.monotonic() + 10
        while a.lease(key, 30).token is None:
            assert time.monotonic() < deadline, "the closed connection's lease did not end"
            time.sleep(0.02)


def test_a_cancelled_waiting_lease_call_is_answered_at_once(rev2_daemon: Daemon, key: str) -> None:
    """$/cancelRequest takes a parked cache.lease out of the lease table and answers it
    -32800 (started: false) at once, not when its wait runs out; the holder's later write
    wakes nobody."""
    import json
    import socket as sockets

    with halcyon.Client(rev2_daemon.socket) as holder:
        token = holder.lease(key, "30s").token
        assert token is not None
        raw = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
        raw.settimeout(10)
        raw.connect(rev2_daemon.socket)
        reader = raw.makefile("rb")
        raw.sendall((json.dumps({"jsonrpc": "2.0", "id": 7, "method": "cache.lease",
                                 "params": {"key": key, "ttl": {"seconds": 30}, "wait": 60}}) + "\n").encode())
        assert _wait_for_waiters(rev2_daemon.socket, 1) == 1
        started = time.monotonic()
        raw.sendall((json.dumps({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}}) + "\n").encode())
        reply = json.loads(reader.readline())
        assert time.monotonic() - started < 5  # the wait was 60 s
        assert reply["id"] == 7 and reply["error"]["code"] == -32800
        assert reply["error"]["data"]["started"] is False
        assert int(holder.stats().get("leaseWaiters", 0)) == 0
        assert holder.set(key, "computed", lease=token)
        # Nothing more is written for the cancelled call: the next line answers the ping.
        raw.sendall((json.dumps({"jsonrpc": "2.0", "id": 8, "method": "server.ping"}) + "\n").encode())
        assert json.loads(reader.readline())["id"] == 8
        raw.close()


# -------------------------------------------------------------- memoize

def test_memoize_threads_compute_once(rev2_daemon: Daemon) -> None:
    calls: List[int] = []
    gate = threading.Event()
    with halcyon.Client(rev2_daemon.socket) as c:
        @c.memoize(expire=60, prefix=f"mt-{uuid.uuid4().hex}", lease_ttl=30)
        def slow(x: int) -> int:
            calls.append(x)
            gate.wait(timeout=20)
            return x * 10

        def work(_: int) -> int:
            return slow(4)

        opener = threading.Thread(target=lambda: (_wait_for_waiters(rev2_daemon.socket, 7), gate.set()))
        opener.start()
        assert _threads(8, work) == [40] * 8
        opener.join(timeout=20)
        assert calls == [4]


def test_memoize_failure_is_not_cached_and_passes_the_lease_on(daemon_client: halcyon.Client) -> None:
    calls: List[int] = []

    @daemon_client.memoize(prefix=f"mf-{uuid.uuid4().hex}")
    def flaky(x: int) -> int:
        calls.append(x)
        if len(calls) == 1:
            raise RuntimeError("first run fails")
        return x

    with pytest.raises(RuntimeError):
        flaky(1)
    assert flaky(1) == 1 and flaky(1) == 1
    assert calls == [1, 1]


def test_memoize_ignore_self(daemon_client: halcyon.Client) -> None:
    calls: List[int] = []
    tag = uuid.uuid4().hex

    class Repo:
        def __init__(self, name: str) -> None:
            self.name = name

        @daemon_client.memoize(prefix=f"mi-{tag}", ignore={"self"})
        def load(self, x: int) -> int:
            calls.append(x)
            return x + 1

    assert Repo("a").load(1) == 2 and Repo("b").load(1) == 2
    assert calls == [1]
    assert Repo("c").load.cache_key(1) == Repo("d").load.cache_key(1)
    assert Repo("c").load.invalidate(1) is True
    assert Repo("c").load(1) == 2 and calls == [1, 1]


def test_async_memoize_tasks_compute_once(rev2_daemon: Daemon) -> None:
    calls: List[int] = []

    async def main() -> None:
        async with AsyncClient(rev2_daemon.socket) as c:
            gate = asyncio.Event()

            @c.memoize(expire=60, prefix=f"am-{uuid.uuid4().hex}", lease_ttl=30)
            async def slow(x: int) -> int:
                calls.append(x)
                await asyncio.wait_for(gate.wait(), timeout=20)
                return x * 3

            async def opener() -> None:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(None, _wait_for_waiters, rev2_daemon.socket, 9)
                gate.set()

            results = await asyncio.gather(opener(), *(slow(5) for _ in range(10)))
            assert results[1:] == [15] * 10
            assert await slow.invalidate(5) is True

    asyncio.run(main())
    assert calls == [5]


def _memo_child(socket: str, prefix: str, marker: str, start: Any) -> None:
    client = halcyon.Client(socket, timeout=30)

    @client.memoize(expire=60, prefix=prefix, lease_ttl=30)
    def compute(x: int) -> str:
        with open(marker, "a") as f:
            f.write(f"{os.getpid()}\n")
        # Hold the lease until the other five are parked on it, so they all really
        # wait instead of arriving after the value is stored.
        _wait_for_waiters(socket, 5)
        return f"value-{x}"

    start.wait(30)
    assert compute(9) == "value-9"


def test_memoize_across_6_processes_computes_once(rev2_fresh_daemon: Daemon, tmp_path: Any) -> None:
    marker = str(tmp_path / "computed")
    prefix = f"mp-{uuid.uuid4().hex}"
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(6)
    procs = [ctx.Process(target=_memo_child, args=(rev2_fresh_daemon.socket, prefix, marker, start)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    codes: List[Optional[int]] = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():
            p.kill()
    assert codes == [0] * 6
    with open(marker) as f:
        assert len(f.read().split()) == 1


def test_a_memory_only_entry_lives_for_the_expire_it_was_given(daemon_client: halcyon.Client, key: str) -> None:
    # Without memory_expire, expire is the lifetime (not the daemon's 300 s memory default).
    assert daemon_client.set(key, "v", expire=3600, to_disk=False)
    entry = daemon_client.get_entry(key)
    assert entry is not None and entry.cache_type == "memory"
    assert entry.expires_at is not None and abs(entry.expires_at - (time.time() + 3600)) < 5
    assert daemon_client.set(key, "v", expire=3600, memory_expire=60, to_disk=False)
    entry = daemon_client.get_entry(key, extend=False)
    assert entry is not None and entry.expires_at is not None and abs(entry.expires_at - (time.time() + 60)) < 5


def test_touch_with_zero_ends_the_entry_now(daemon_client: halcyon.Client, key: str) -> None:
    before = daemon_client.stats()["expirations"]
    assert daemon_client.set(key, "v", expire=600)
    assert daemon_client.touch(key, 0) is True
    assert daemon_client.get(key) is None and key not in daemon_client
    assert daemon_client.stats()["expirations"] == before + 1
    assert daemon_client.touch(key, 0) is False
    raw = daemon_client.call("cache.touch", {"key": key, "expiration": {"date": 1000}})
    assert raw == {"touched": False, "expiresAt": None}
    assert daemon_client.set(key, "v", expire=600)
    raw = daemon_client.call("cache.touch", {"key": key, "expiration": {"date": 1000}})
    assert raw["touched"] is True and 0 < raw["expiresAt"] <= time.time()
