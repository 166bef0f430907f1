"""The asyncio client against the fake server and the real daemon: methods, types,
concurrency on one connection, pipelines, timeouts, reconnects, memoize."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, List

import pytest

import halcyon
from halcyon import errors
from halcyon.aio import AsyncClient
from conftest import Daemon
from fakeserver import FakeServer
from test_client import VALUES, _hold_io


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_methods_and_types(server_path: str, key: str) -> None:
    async def main() -> None:
        async with AsyncClient(server_path) as c:
            assert await c.ping()
            assert (await c.info())["protocol"] == 1
            for value in VALUES:
                if value is None:
                    continue  # see test_client.NULL_BUG
                assert await c.set(key, value)
                got = await c.get(key)
                assert got == value and type(got) is type(value)
            assert await c.exists(key)
            assert await c.cached_type(key) in ("memory", "disk")
            d = await c.describe(key)
            assert d is not None
            assert await c.touch(key, 30)
            entry = await c.get_entry(key)
            assert entry is not None
            assert await c.delete(key)
            assert await c.get(key, "miss") == "miss"
            assert isinstance(await c.remove_expired(), int)
            assert "removed" in await c.trim()
            assert "bytes" in await c.total_size()
            assert isinstance(await c.stats(), dict)
            with pytest.raises(errors.KeyTooLongError):
                await c.set("k" * 4097, 1)
            with pytest.raises(halcyon.MethodNotFoundError):
                await c.call("no.such")
    run(main())


def test_concurrent_calls_share_one_connection(server_path: str) -> None:
    prefix = uuid.uuid4().hex

    async def main() -> None:
        async with AsyncClient(server_path) as c:
            await asyncio.gather(*(c.set(f"{prefix}{i}", i) for i in range(500)))
            got = await asyncio.gather(*(c.get(f"{prefix}{i}") for i in range(500)))
            assert got == list(range(500))
    run(main())


def test_pipeline_and_batch(server_path: str, key: str) -> None:
    async def main() -> None:
        async with AsyncClient(server_path) as c:
            async with c.pipeline() as p:
                p.set(key, b"x").get(key).exists(key)
            assert p.results == [True, b"x", True]
            b = c.batch()
            b.get(key).delete(key).get(key, "gone")
            assert await b.execute() == [b"x", True, "gone"]
            big = c.batch(raise_on_error=False)
            for _ in range(1001):
                big.call("server.ping")
            results = await big.execute()
            assert all(isinstance(r, errors.BatchTooLargeError) for r in results)
            n = 2_000  # the blocking client's test sends 10,000
            p = c.pipeline(timeout=60)
            for i in range(n):
                p.set(f"{key}:{i}", i)
            assert await p.execute() == [True] * n
    run(main())


def test_timeout(server_path: str, key: str) -> None:
    async def main() -> None:
        async with AsyncClient(server_path) as c:
            await c.ping()
            holder = _hold_io(server_path, 1.5)
            try:
                with pytest.raises(halcyon.HalcyonTimeoutError):
                    await c.set(key, "late", timeout=0.3)
                assert await c.ping(timeout=5)
            finally:
                await asyncio.get_running_loop().run_in_executor(None, holder.join)
    run(main())


def test_memoize(rev2_daemon: Daemon) -> None:
    calls: List[int] = []

    async def main() -> None:
        async with AsyncClient(rev2_daemon.socket) as c:
            @c.memoize(expire=60, prefix=f"amemo-{uuid.uuid4().hex}")
            async def double(x: int) -> int:
                calls.append(x)
                return 2 * x

            assert await double(3) == 6 and await double(3) == 6 and calls == [3]
            assert await double.invalidate(3)
            assert await double(3) == 6 and calls == [3, 3]
    run(main())


def test_reconnect(fake: FakeServer, key: str) -> None:
    async def main() -> None:
        async with AsyncClient(fake.path) as c:
            await c.set(key, "v")
            fake.hangup_next = True
            assert await c.get(key) == "v"
            fake.hangup_next = True
            with pytest.raises(halcyon.HalcyonConnectionError):
                await c.call("server.ping")
            assert await c.ping()
            assert fake.connections == 3
    run(main())


def test_connection_refused() -> None:
    async def main() -> None:
        c = AsyncClient("/tmp/halcyon-no-such-dir/none.sock")
        with pytest.raises(halcyon.HalcyonConnectionError):
            await c.ping()
    run(main())


def test_client_survives_a_new_event_loop(fake: FakeServer) -> None:
    c = AsyncClient(fake.path)
    assert run(c.ping())
    assert run(c.ping())
    run(c.close())


def test_cancelled_task_cancels_its_request(fake: FakeServer, key: str) -> None:
    async def main() -> None:
        async with AsyncClient(fake.path) as c:
            await c.ping()
            holder = _hold_io(fake.path, 1.0)
            task = asyncio.ensure_future(c.set(key, "x"))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.get_running_loop().run_in_executor(None, holder.join)
            assert await c.ping()
    run(main())
    sets = [m for m in fake.received if m.get("method") == "cache.set"]
    cancels = [m for m in fake.received if m.get("method") == "$/cancelRequest"]
    assert cancels and cancels[0]["params"]["id"] == sets[0]["id"]


def test_async_client_has_every_method_of_client() -> None:
    # The docs promise the same methods; a method added to one client only fails here.
    sync = {n for n in dir(halcyon.Client) if not n.startswith("_")}
    asynchronous = {n for n in dir(AsyncClient) if not n.startswith("_")}
    assert sync - asynchronous == set()
    assert asynchronous - sync == set()


def test_notify_sends_and_gets_no_reply(server_path: str, key: str) -> None:
    async def main() -> None:
        async with AsyncClient(server_path) as c:
            await c.notify("no.such.method")           # not even an error comes back
            await c.notify("cache.set", {"key": key, "value": "sent"})
            # The set ran before the next request of the same connection (per-connection order).
            assert await c.get(key) == "sent"
    run(main())
