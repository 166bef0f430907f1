"""The protocol calls cache frameworks need, end to end against a real halcyond:
multi-key calls of any size (and the multi-key remove), reads in a chosen encoding,
increments that keep bytes or refuse a missing key, add with an expiration already
over, lease introspection and release from another connection, a per-connection
default for sliding reads, and a dropped client closing its socket."""

from __future__ import annotations

import gc
import shutil
import threading
import time
import warnings

import pytest

import halcyon
from conftest import Daemon, _start_daemon


def test_multi_key_calls_of_any_size(daemon_client: halcyon.Client, key: str) -> None:
    # 2,500 keys: three requests each way, written together, merged in order.
    mapping = {f"{key}:{i}": (b"%d" % i if i % 2 else f"v{i}") for i in range(2500)}
    versions = daemon_client.set_many(mapping, 60)
    assert list(versions) == list(mapping) and all(isinstance(v, int) for v in versions.values())
    keys = list(mapping) + [f"{key}:missing"]
    got = daemon_client.get_many(keys)
    assert got == mapping
    assert list(got) == list(mapping)
    removed = daemon_client.delete_many(keys)
    assert removed == [True] * 2500 + [False]
    assert daemon_client.get_many(keys) == {}


def test_a_lower_server_limit_is_learned_from_the_refusal(key: str) -> None:
    small = _start_daemon(["--max-batch", "10"])
    try:
        with halcyon.Client(small.socket, timeout=10) as c:
            mapping = {f"{key}:{i}": i for i in range(25)}
            assert len(c.set_many(mapping)) == 25
            assert c._max_keys == 10
            assert c.get_many(list(mapping)) == mapping
            assert c.delete_many(list(mapping)) == [True] * 25
    finally:
        small.stop()
        shutil.rmtree(small.folder, ignore_errors=True)


def test_remove_many_is_one_call_on_the_wire(daemon_client: halcyon.Client, key: str) -> None:
    daemon_client.set_many({f"{key}:a": "1", f"{key}:b": "2"})
    assert daemon_client.call("cache.removeMany", {"keys": [f"{key}:a", f"{key}:x", f"{key}:b"]}) == {
        "removed": 2, "found": [True, False, True]}
    with pytest.raises(halcyon.errors.EmptyKeyError):
        daemon_client.delete_many([f"{key}:a", ""])


def test_get_in_a_chosen_encoding(daemon_client: halcyon.Client, key: str) -> None:
    daemon_client.set(key, "text")
    assert daemon_client.get(key, encoding="base64") == b"text"
    assert daemon_client.get_many([key], encoding="base64") == {key: b"text"}
    daemon_client.set(key, {"n": 1})
    assert daemon_client.get(key, encoding="utf8") == '{"n":1}'
    with pytest.raises(ValueError):
        daemon_client.get(key, encoding="latin1")


def test_incr_keeps_bytes_bytes_and_text_text(daemon_client: halcyon.Client, key: str) -> None:
    daemon_client.set(key, b"41")
    assert daemon_client.incr(key) == 42
    assert daemon_client.get(key) == b"42"
    daemon_client.set(key, "9")
    assert daemon_client.incr(key, -10) == -1
    assert daemon_client.get(key) == "-1"
    daemon_client.delete(key)
    assert daemon_client.incr(key, 5) == 5
    assert daemon_client.get(key) == 5  # a key incr creates holds a JSON integer


def test_incr_existing_refuses_a_missing_key_atomically(daemon_client: halcyon.Client, key: str) -> None:
    assert daemon_client.incr_existing(key, 3) is None
    assert not daemon_client.exists(key)
    daemon_client.set(key, b"1", 60)
    assert daemon_client.incr_existing(key, 3) == 4
    with pytest.raises(halcyon.errors.NotAnIntegerError):
        daemon_client.set(key, b"\x80pickle")
        daemon_client.incr_existing(key)
    # Racing creators and removers never make incr_existing create the key.
    daemon_client.delete(key)
    stop = threading.Event()

    def churn() -> None:
        with halcyon.Client(daemon_client.path, timeout=10) as other:
            while not stop.is_set():
                other.set(key, b"100")
                other.delete(key)

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        results = [daemon_client.incr_existing(key) for _ in range(200)]
    finally:
        stop.set()
        worker.join(10)
    # A number below 101 could only come from a key the increment created itself.
    assert all(r is None or r >= 101 for r in results)


def test_add_with_an_expiration_already_over(daemon_client: halcyon.Client, key: str) -> None:
    assert daemon_client.add(key, "x", 0) is True
    assert daemon_client.get(key) is None
    daemon_client.set(key, "held", 60)
    assert daemon_client.add(key, "x", 0) is False
    assert daemon_client.get(key) == "held"


def test_lease_status_and_release_from_another_connection(rev2_daemon: Daemon, key: str) -> None:
    with halcyon.Client(rev2_daemon.socket, timeout=10) as holder, \
            halcyon.Client(rev2_daemon.socket, timeout=10) as other:
        assert other.lease_status(key) is None
        got = holder.lease(key, 30)
        assert got.token is not None
        status = other.lease_status(key)
        assert status is not None and status.waiters == 0
        assert status.expires_at is not None and time.time() < status.expires_at <= time.time() + 31
        assert other.lease(key, 30).leased  # introspection took nothing: still held
        assert other.release_lease(key, got.token) is True
        assert holder.lease_status(key) is None
        assert holder.release_lease(key, got.token) is False
        never = holder.lease(key, "never")
        assert other.lease_status(key) == halcyon.LeaseStatus(expires_at=None, waiters=0)
        assert never.token is not None and holder.release_lease(key, never.token)


def test_reads_extend_or_not_by_the_connection_default(rev2_daemon: Daemon, key: str) -> None:
    with halcyon.Client(rev2_daemon.socket, timeout=10) as writer:
        writer.set(key, "v", 100)
        first = writer.describe(key)
        assert first is not None and first.expires_at is not None
    time.sleep(1.1)
    with halcyon.Client(rev2_daemon.socket, timeout=10, extend=False) as fixed:
        assert fixed.get(key) == "v"
        assert fixed.get_many([key]) == {key: "v"}
        assert fixed.describe(key).expires_at == first.expires_at  # type: ignore[union-attr]
        settings = fixed.configure(extend=True)
        assert settings["extendingExpiration"] == "cacheTime"
        assert fixed.get(key) == "v"
        assert fixed.describe(key).expires_at > first.expires_at  # type: ignore[union-attr]
        # Settings accumulate: a later configure keeps the earlier ones across reconnects.
        fixed.configure(extend=False)
        fixed.configure(load_disk_file_synchronously=True)
        fixed.close()
        assert fixed.configure()["extendingExpiration"] == "none"


def test_a_dropped_client_closes_its_socket(rev2_daemon: Daemon) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        c = halcyon.Client(rev2_daemon.socket, timeout=10)
        assert c.ping()
        del c
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_async_client_has_the_same_calls(rev2_daemon: Daemon, key: str) -> None:
    import asyncio

    from halcyon.aio import AsyncClient

    async def main() -> None:
        async with AsyncClient(rev2_daemon.socket, timeout=10, extend=False) as c:
            mapping = {f"{key}:{i}": b"%d" % i for i in range(1500)}
            await c.set_many(mapping)
            assert await c.get_many(list(mapping)) == mapping
            assert await c.incr_existing(f"{key}:7") == 8
            assert await c.get(f"{key}:7", encoding="utf8") == "8"
            assert await c.incr_existing(f"{key}:none") is None
            assert await c.delete_many(list(mapping)) == [True] * 1500
            got = await c.lease(key, 30)
            assert (await c.lease_status(key)) is not None
            assert got.token is not None and await c.release_lease(key, got.token)

    asyncio.run(main())
