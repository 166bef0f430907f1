"""The asyncio client: :class:`AsyncClient`, with the same methods as
:class:`halcyon.Client`, each a coroutine.

Threading: an :class:`AsyncClient` belongs to the event loop it first connects on and
must only be used from that loop's thread. Any number of tasks may call it at once:
their requests share one connection and a reader task hands each reply to the task
waiting for its id, so concurrent calls overlap on the wire.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from typing import (
    Any, AsyncIterator, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, TypeVar, Union, cast,
)

from . import _wire, errors
from ._pipeline import PipelineQueue, raise_first_error
from ._wire import Command, Description, Entry, Expire, Lease, LeaseStatus, Many, Removed
from .client import DEFAULT_LEASE_TTL, DEFAULT_TIMEOUT
from .memoize import AsyncMemoized, KeyMaker, P

__all__ = ["AsyncClient", "AsyncPipeline"]

R = TypeVar("R")


class _Broken(Exception):
    def __init__(self, message: str, delivered: bool) -> None:
        super().__init__(message)
        self.delivered = delivered


class AsyncClient:
    """An asyncio connection to ``halcyond``; see :class:`halcyon.Client` for the
    arguments, the value rules and each method.

    Example::

        from halcyon.aio import AsyncClient

        async def main():
            async with AsyncClient() as c:
                await c.set("k", {"n": 1}, expire=60)
                print(await c.get("k"))
                results = await asyncio.gather(*(c.get(f"k{i}") for i in range(100)))
    """

    def __init__(
        self,
        path: Optional[Union[str, "os.PathLike[str]"]] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        *,
        retry: bool = True,
        extend: Any = None,
    ) -> None:
        self.path = _wire.resolve_socket_path(path)
        self.timeout = timeout
        self.retry = retry
        self._ids = itertools.count(1)
        self._lines = itertools.count(1)
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._reader_task: Optional["asyncio.Task[None]"] = None
        # id -> (future, line number): a null-id error fails every request of its line.
        self._pending: Dict[int, Tuple["asyncio.Future[Dict[str, Any]]", int]] = {}
        self._connect_lock: Optional[asyncio.Lock] = None
        # Applied whenever a connection opens (see _connection).
        self._configure: Optional[Command] = None if extend is None else _wire.cmd_configure(extend=extend)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._max_keys = _wire.DEFAULT_MAX_KEYS

    # ------------------------------------------------------------ plumbing

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection; pending calls fail with a connection error."""
        writer, task = self._writer, self._reader_task
        self._writer = self._reader = None
        self._reader_task = None
        if self._loop is not asyncio.get_running_loop():
            # They belong to a loop that is gone; its end already closed them.
            writer = task = None
            self._pending = {}
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except Exception:
                pass
        self._fail_all(_Broken("client closed", delivered=True))

    def _fail_all(self, exc: BaseException) -> None:
        pending, self._pending = self._pending, {}
        for fut, _ in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    async def _connection(self, timeout: Optional[float]) -> asyncio.StreamWriter:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # Streams, futures and the lock belong to one loop; a client reused under a
            # new loop (a second asyncio.run) starts over instead of failing.
            self._loop = loop
            self._reader = self._writer = None
            self._reader_task = None
            self._pending = {}
            self._connect_lock = None
        if self._writer is not None and not self._writer.is_closing():
            return self._writer
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_unix_connection(self.path),
                    timeout if timeout is not None else DEFAULT_TIMEOUT,
                )
            except (OSError, asyncio.TimeoutError) as exc:
                reason = getattr(exc, "strerror", None) or str(exc) or "timed out"
                raise errors.HalcyonConnectionError(
                    f"cannot connect to halcyond at {self.path}: {reason}", reason="cannotConnect"
                ) from exc
            self._reader, self._writer = reader, writer
            self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(reader))
            if self._configure is not None:
                # Per-connection settings die with the connection: apply them again.
                result = await self._send([self._configure], timeout, batch=False, writer=writer)
                if isinstance(result[0], errors.HalcyonError):
                    raise result[0]
            return writer

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        buffer = bytearray()
        try:
            while True:
                data = await reader.read(1 << 20)
                if not data:
                    raise _Broken("halcyond closed the connection", delivered=True)
                buffer += data
                if b"\n" not in data:
                    continue
                end = buffer.rfind(b"\n")
                if end < 0:
                    continue
                chunk = bytes(buffer[:end])
                del buffer[:end + 1]
                # Every complete line of this read in one json.loads.
                for reply in _wire.parse_lines(chunk):
                    self._dispatch(reply)
        except asyncio.CancelledError:
            raise
        except _Broken as exc:
            self._drop(reader, exc)
        except (OSError, errors.HalcyonError) as exc:
            self._drop(reader, _Broken(f"read failed: {exc}", delivered=True))

    def _drop(self, reader: asyncio.StreamReader, exc: _Broken) -> None:
        if self._reader is reader:
            writer = self._writer
            self._reader = self._writer = None
            self._reader_task = None
            if writer is not None:
                writer.close()
        self._fail_all(exc)

    def _dispatch(self, reply: Dict[str, Any]) -> None:
        rid = reply.get("id")
        if isinstance(rid, int) and rid in self._pending:
            fut, _ = self._pending.pop(rid)
            if not fut.done():
                fut.set_result(reply)
        elif rid is None and "error" in reply and self._pending:
            # A line the daemon could not take; blame the oldest line still waiting.
            line = min(group for _, group in self._pending.values())
            for key in [k for k, (_, g) in self._pending.items() if g == line]:
                fut, _ = self._pending.pop(key)
                if not fut.done():
                    fut.set_result(reply)

    async def _send(self, commands: List[Command], timeout: Optional[float], *, batch: bool,
                    writer: asyncio.StreamWriter) -> List[Any]:
        loop = asyncio.get_running_loop()
        ids = [next(self._ids) for _ in commands]
        futures: List["asyncio.Future[Dict[str, Any]]"] = []
        chunks: List[bytes] = []
        if batch:
            line = next(self._lines)
            for rid in ids:
                fut = loop.create_future()
                self._pending[rid] = (fut, line)
                futures.append(fut)
            chunks.append(_wire.dumps([c.request(i) for c, i in zip(commands, ids)]))
        else:
            for command, rid in zip(commands, ids):
                fut = loop.create_future()
                self._pending[rid] = (fut, next(self._lines))
                futures.append(fut)
                chunks.append(command.line(rid))
        try:
            writer.write(b"".join(chunks))
            await writer.drain()
        except OSError as exc:
            for rid in ids:
                self._pending.pop(rid, None)
            raise _Broken(f"write failed: {exc}", delivered=True) from exc
        try:
            # return_exceptions: when the connection drops every future fails at once,
            # and each failure must be retrieved, not left to warn at collection.
            replies = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), timeout)
        except asyncio.CancelledError:
            # The caller's task was cancelled: cancel its requests on the daemon too.
            self._abandon(ids, writer)
            raise
        except asyncio.TimeoutError:
            missing = self._abandon(ids, writer)
            raise errors.HalcyonTimeoutError(
                f"halcyond did not answer within {timeout} s ({len(missing)} request(s) cancelled)",
                reason="timeout",
            ) from None
        for r in replies:
            if isinstance(r, BaseException):
                raise r
        ok = cast(List[Dict[str, Any]], replies)
        return [
            errors.from_reply(r["error"]) if r.get("id") is None and "error" in r else _wire.outcome(r, c)
            for r, c in zip(ok, commands)
        ]

    def _abandon(self, ids: List[int], writer: asyncio.StreamWriter) -> List[int]:
        """Stop waiting for ``ids`` and send ``$/cancelRequest`` for those unanswered."""
        missing = []
        for rid in ids:
            entry = self._pending.pop(rid, None)
            if entry is not None:
                missing.append(rid)
        if missing and not writer.is_closing():
            writer.write(b"".join(_wire.cancel_line(i) for i in missing))
        return missing

    async def _outcomes(self, commands: List[Command], timeout: Optional[float], batch: bool) -> List[Any]:
        if not commands:
            return []
        wait = self.timeout if timeout is None else float(timeout)
        idempotent = all(c.idempotent for c in commands)
        attempt = 0
        while True:
            attempt += 1
            writer = await self._connection(wait)
            try:
                return await self._send(commands, wait, batch=batch, writer=writer)
            except _Broken as exc:
                if self.retry and attempt == 1 and (not exc.delivered or idempotent):
                    continue
                raise errors.HalcyonConnectionError(str(exc), reason="connectionLost") from None

    async def _run_many(self, many: Many, timeout: Optional[float]) -> Any:
        """See :meth:`halcyon.Client._run_many`."""
        while True:
            size = self._max_keys
            results = await self._outcomes(many.commands(size), timeout, False)
            smaller = Many.smaller_limit(results, size)
            if smaller is None:
                return many.finish(results)
            self._max_keys = smaller

    async def _run(self, command: Command, timeout: Optional[float]) -> Any:
        result = (await self._outcomes([command], timeout, False))[0]
        if isinstance(result, errors.HalcyonError):
            raise result
        return result

    # ------------------------------------------------------------ methods

    async def get(self, key: str, default: Any = None, *, extend: Any = None,
                  memory_only: bool = False, encoding: Optional[str] = None, timeout: Optional[float] = None) -> Any:
        """See :meth:`halcyon.Client.get`."""
        return await self._run(
            _wire.cmd_get(key, default, extend=extend, memory_only=memory_only, encoding=encoding), timeout)

    async def get_entry(self, key: str, *, extend: Any = None, memory_only: bool = False,
                        encoding: Optional[str] = None,
                        timeout: Optional[float] = None) -> Optional[Entry]:
        """See :meth:`halcyon.Client.get_entry`."""
        return cast(Optional[Entry], await self._run(
            _wire.cmd_get_entry(key, extend=extend, memory_only=memory_only, encoding=encoding), timeout))

    async def set(self, key: str, value: Any, expire: Expire = None, *, memory_expire: Expire = None,
                  to_disk: Optional[bool] = None, lease: Optional[str] = None,
                  timeout: Optional[float] = None) -> bool:
        """See :meth:`halcyon.Client.set`."""
        return cast(bool, await self._run(
            _wire.cmd_set(key, value, expire, memory_expire=memory_expire, to_disk=to_disk, lease=lease),
            timeout))

    async def add(self, key: str, value: Any, expire: Expire = None, *, memory_expire: Expire = None,
                  to_disk: Optional[bool] = None, lease: Optional[str] = None,
                  timeout: Optional[float] = None) -> bool:
        """See :meth:`halcyon.Client.add`."""
        return cast(bool, await self._run(
            _wire.cmd_add(key, value, expire, memory_expire=memory_expire, to_disk=to_disk, lease=lease),
            timeout))

    async def cas(self, key: str, value: Any, version: int, expire: Expire = None, *,
                  memory_expire: Expire = None, to_disk: Optional[bool] = None,
                  timeout: Optional[float] = None) -> bool:
        """See :meth:`halcyon.Client.cas`."""
        return cast(bool, await self._run(
            _wire.cmd_cas(key, value, version, expire, memory_expire=memory_expire, to_disk=to_disk), timeout))

    async def incr(self, key: str, by: int = 1, *, initial: Optional[int] = None, expire: Expire = None,
                   memory_expire: Expire = None, to_disk: Optional[bool] = None,
                   timeout: Optional[float] = None) -> int:
        """See :meth:`halcyon.Client.incr`."""
        return cast(int, await self._run(_wire.cmd_incr(key, by, initial=initial, expire=expire,
                                                        memory_expire=memory_expire, to_disk=to_disk), timeout))

    async def incr_existing(self, key: str, by: int = 1, *, expire: Expire = None, memory_expire: Expire = None,
                            to_disk: Optional[bool] = None, timeout: Optional[float] = None) -> Optional[int]:
        """See :meth:`halcyon.Client.incr_existing`."""
        return cast(Optional[int], await self._run(_wire.cmd_incr(
            key, by, expire=expire, memory_expire=memory_expire, to_disk=to_disk, create=False), timeout))

    async def decr(self, key: str, by: int = 1, *, initial: Optional[int] = None, expire: Expire = None,
                   memory_expire: Expire = None, to_disk: Optional[bool] = None,
                   timeout: Optional[float] = None) -> int:
        """See :meth:`halcyon.Client.decr`."""
        return await self.incr(key, -by, initial=initial, expire=expire, memory_expire=memory_expire,
                               to_disk=to_disk, timeout=timeout)

    async def get_many(self, keys: Iterable[str], default: Any = _wire._MISSING, *, extend: Any = None,
                       memory_only: bool = False, encoding: Optional[str] = None,
                       timeout: Optional[float] = None) -> Dict[str, Any]:
        """See :meth:`halcyon.Client.get_many`."""
        return cast(Dict[str, Any], await self._run_many(
            _wire.many_get(list(keys), default, extend=extend, memory_only=memory_only, encoding=encoding), timeout))

    async def set_many(self, mapping: Mapping[str, Any], expire: Expire = None, *,
                       memory_expire: Expire = None, to_disk: Optional[bool] = None,
                       timeout: Optional[float] = None) -> Dict[str, Optional[int]]:
        """See :meth:`halcyon.Client.set_many`."""
        return cast(Dict[str, Optional[int]], await self._run_many(
            _wire.many_set(mapping, expire, memory_expire=memory_expire, to_disk=to_disk), timeout))

    async def delete_many(self, keys: Iterable[str], *, memory: Optional[bool] = None,
                          disk: Optional[bool] = None, timeout: Optional[float] = None) -> List[bool]:
        """See :meth:`halcyon.Client.delete_many`."""
        return cast(List[bool], await self._run_many(
            _wire.many_remove(list(keys), memory=memory, disk=disk), timeout))

    async def keys(self, prefix: str = "", *, page_size: Optional[int] = None,
                   timeout: Optional[float] = None) -> AsyncIterator[str]:
        """See :meth:`halcyon.Client.keys`; ``async for key in client.keys("user:")``."""
        cursor: Optional[str] = None
        while True:
            page, cursor = await self._run(_wire.cmd_keys_page(prefix, cursor, page_size), timeout)
            for key in page:
                yield key
            if cursor is None:
                return

    async def remove_prefix(self, prefix: str, *, timeout: Optional[float] = None) -> int:
        """See :meth:`halcyon.Client.remove_prefix`."""
        return cast(int, await self._run(_wire.cmd_remove_prefix(prefix), timeout))

    async def ttl(self, key: str, *, timeout: Optional[float] = None) -> Optional[float]:
        """See :meth:`halcyon.Client.ttl`."""
        return _wire.ttl_from_description(await self.describe(key, timeout=timeout), time.time())

    async def lease(self, key: str, ttl: Expire, *, wait: float = 0,
                    timeout: Optional[float] = None) -> Lease:
        """See :meth:`halcyon.Client.lease`. Other tasks' calls go on while it waits."""
        limit = self.timeout if timeout is None else float(timeout)
        if limit is not None and wait:
            limit += wait
        return cast(Lease, await self._run(_wire.cmd_lease(key, ttl, wait=wait), limit))

    async def release_lease(self, key: str, token: str, *, timeout: Optional[float] = None) -> bool:
        """See :meth:`halcyon.Client.release_lease`."""
        return cast(bool, await self._run(_wire.cmd_release_lease(key, token), timeout))

    async def lease_status(self, key: str, *, timeout: Optional[float] = None) -> Optional[LeaseStatus]:
        """See :meth:`halcyon.Client.lease_status`."""
        return cast(Optional[LeaseStatus], await self._run(_wire.cmd_lease_status(key), timeout))

    async def delete(self, key: str, *, memory: Optional[bool] = None, disk: Optional[bool] = None,
                     timeout: Optional[float] = None) -> bool:
        """See :meth:`halcyon.Client.delete`."""
        return cast(bool, await self._run(_wire.cmd_delete(key, memory=memory, disk=disk), timeout))

    async def exists(self, key: str, *, timeout: Optional[float] = None) -> bool:
        """See :meth:`halcyon.Client.exists`."""
        return cast(bool, await self._run(_wire.cmd_exists(key), timeout))

    async def cached_type(self, key: str, *, timeout: Optional[float] = None) -> str:
        """See :meth:`halcyon.Client.cached_type`."""
        return cast(str, await self._run(_wire.cmd_cached_type(key), timeout))

    async def describe(self, key: str, *, timeout: Optional[float] = None) -> Optional[Description]:
        """See :meth:`halcyon.Client.describe`."""
        return cast(Optional[Description], await self._run(_wire.cmd_describe(key), timeout))

    async def touch(self, key: str, expire: Expire = None, *, memory_expire: Expire = None,
                    timeout: Optional[float] = None) -> bool:
        """See :meth:`halcyon.Client.touch`."""
        return cast(bool, await self._run(_wire.cmd_touch(key, expire, memory_expire=memory_expire), timeout))

    async def clear(self, *, memory: Optional[bool] = None, disk: Optional[bool] = None,
                    shared: Optional[bool] = None, timeout: Optional[float] = None) -> Removed:
        """See :meth:`halcyon.Client.clear`."""
        return cast(Removed, await self._run(_wire.cmd_clear(memory=memory, disk=disk, shared=shared), timeout))

    async def remove_expired(self, *, memory: Optional[bool] = None, disk: Optional[bool] = None,
                             timeout: Optional[float] = None) -> Removed:
        """See :meth:`halcyon.Client.remove_expired`."""
        return cast(Removed, await self._run(_wire.cmd_remove_expired(memory=memory, disk=disk), timeout))

    async def trim(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """See :meth:`halcyon.Client.trim`."""
        return cast(Dict[str, Any], await self._run(_wire.cmd_trim(), timeout))

    async def total_size(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """See :meth:`halcyon.Client.total_size`."""
        return cast(Dict[str, Any], await self._run(_wire.cmd_total_size(), timeout))

    async def stats(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """See :meth:`halcyon.Client.stats`."""
        return cast(Dict[str, Any], await self._run(_wire.cmd_stats(), timeout))

    async def ping(self, *, timeout: Optional[float] = None) -> bool:
        """See :meth:`halcyon.Client.ping`."""
        return cast(bool, await self._run(_wire.cmd_ping(), timeout))

    async def info(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """See :meth:`halcyon.Client.info`."""
        return cast(Dict[str, Any], await self._run(_wire.cmd_info(), timeout))

    async def identity(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """See :meth:`halcyon.Client.identity`."""
        return cast(Dict[str, Any], await self._run(_wire.cmd_identity(), timeout))

    async def configure(self, *, callback_queue: Any = None, load_disk_file_synchronously: Optional[bool] = None,
                        extend: Any = None, timeout: Optional[float] = None) -> Dict[str, Any]:
        """See :meth:`halcyon.Client.configure`."""
        command = _wire.cmd_configure(callback_queue=callback_queue,
                                      load_disk_file_synchronously=load_disk_file_synchronously,
                                      extend=extend, previous=self._configure)
        result = cast(Dict[str, Any], await self._run(command, timeout))
        self._configure = command
        return result

    async def call(self, method: str, params: Optional[Mapping[str, Any]] = None, *,
                   timeout: Optional[float] = None) -> Any:
        """See :meth:`halcyon.Client.call`."""
        return await self._run(_wire.cmd_call(method, params), timeout)

    async def notify(self, method: str, params: Optional[Mapping[str, Any]] = None, *,
                     timeout: Optional[float] = None) -> None:
        """See :meth:`halcyon.Client.notify`: sends the line and returns once it is written;
        the daemon answers nothing, not even an error."""
        wait = self.timeout if timeout is None else float(timeout)
        writer = await self._connection(wait)
        try:
            writer.write(_wire.dumps(_wire.cmd_call(method, params).request(None)))
            await asyncio.wait_for(writer.drain(), wait)
        except asyncio.TimeoutError:
            raise errors.HalcyonTimeoutError("could not send the notification", reason="timeout") from None
        except OSError as exc:
            raise errors.HalcyonConnectionError(f"write failed: {exc}", reason="connectionLost") from None

    def pipeline(self, *, raise_on_error: bool = True, timeout: Optional[float] = None) -> "AsyncPipeline":
        """See :meth:`halcyon.Client.pipeline`; use ``async with``."""
        return AsyncPipeline(self, batch=False, raise_on_error=raise_on_error, timeout=timeout)

    def batch(self, *, raise_on_error: bool = True, timeout: Optional[float] = None) -> "AsyncPipeline":
        """See :meth:`halcyon.Client.batch`; use ``async with``."""
        return AsyncPipeline(self, batch=True, raise_on_error=raise_on_error, timeout=timeout)

    def memoize(self, expire: Expire = None, *, prefix: Optional[str] = None, typed: bool = False,
                memory_expire: Expire = None, ignore: Iterable[Union[int, str]] = (),
                lease_ttl: float = DEFAULT_LEASE_TTL,
                ) -> Callable[[Callable[P, Awaitable[R]]], AsyncMemoized[P, R]]:
        """See :meth:`halcyon.Client.memoize`; decorates ``async def`` functions, and
        ``invalidate`` is a coroutine. Concurrent tasks, threads and processes compute
        once: the others wait for the lease holder's result (other tasks' calls on this
        client go on meanwhile)."""

        def decorate(func: Callable[P, Awaitable[R]]) -> AsyncMemoized[P, R]:
            keys = KeyMaker(func, prefix, typed, ignore)

            async def run(key: str, compute: Callable[[], Awaitable[R]]) -> R:
                for _ in range(3):
                    got = await self.lease(key, lease_ttl, wait=lease_ttl)
                    if got.entry is not None:
                        return cast(R, got.entry.value)
                    if got.token is None:
                        continue
                    try:
                        value = await compute()
                        await self.set(key, value, expire, memory_expire=memory_expire, lease=got.token)
                    except BaseException:
                        try:
                            await self.release_lease(key, got.token)
                        except errors.HalcyonError:
                            pass  # the lease ends with its ttl or connection anyway
                        raise
                    return value
                return await compute()

            return AsyncMemoized(func, keys, run, self.delete)

        return decorate


class AsyncPipeline(PipelineQueue):
    """Calls queued on an :class:`AsyncClient` and written together; ``await
    p.execute()`` or leave an ``async with`` block. Queueing methods are plain (not
    coroutines) and return the pipeline."""

    def __init__(self, client: AsyncClient, *, batch: bool, raise_on_error: bool,
                 timeout: Optional[float]) -> None:
        super().__init__(batch=batch, raise_on_error=raise_on_error, timeout=timeout)
        self._client = client

    async def __aenter__(self) -> "AsyncPipeline":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            await self.execute()

    async def execute(self) -> List[Any]:
        """Send the queued calls; results in call order (see :meth:`halcyon.Client.pipeline`)."""
        self.results = await self._client._outcomes(self._take(), self._timeout, self._batch)
        if self._raise:
            raise_first_error(self.results)
        return self.results
