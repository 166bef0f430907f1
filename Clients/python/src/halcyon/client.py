"""The blocking client: :class:`Client`, its :class:`Pipeline` and batch form.

Threading: a :class:`Client` is safe to share between threads. It owns one connection
and one lock; each call (or a whole pipeline) holds the lock from writing its request to
reading its reply, so calls from several threads are serialised on that connection. For
parallel requests use one client per thread, a pipeline, or :mod:`halcyon.aio`.
"""

from __future__ import annotations

import os
import threading
import time
from typing import (
    Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, TypeVar, Union, cast,
)

from . import _wire, errors
from ._pipeline import PipelineQueue, raise_first_error
from ._transport import Broken, Connection, Timeout
from ._wire import Command, Description, Entry, Expire, Lease, LeaseStatus, Many, Removed
from .memoize import KeyMaker, Memoized, P

__all__ = ["Client", "Pipeline"]

R = TypeVar("R")

#: How long a memoized call's lease holds by default (seconds): a caller that takes it
#: and then hangs blocks the others at most this long.
DEFAULT_LEASE_TTL = 60.0

#: Default seconds a call may wait without progress before it times out.
DEFAULT_TIMEOUT = 5.0

#: How many times this process has forked: a client made before a fork sees it change
#: in the child and opens its own connection (cheaper than asking os.getpid per call).
_forks = [0]


def _count_fork() -> None:
    _forks[0] += 1


os.register_at_fork(after_in_child=_count_fork)


def _timeout_error(timeout: Optional[float], exc: Timeout) -> errors.HalcyonTimeoutError:
    return errors.HalcyonTimeoutError(
        f"halcyond did not answer within {timeout} s ({len(exc.missing)} request(s) cancelled)",
        reason="timeout",
    )


class Client:
    """A connection to ``halcyond``.

    Example::

        import halcyon
        c = halcyon.Client()             # finds the socket like the daemon does
        c.set("greeting", "hello", expire=60)
        c.get("greeting")                # -> 'hello'
        c["blob"] = b"\\x00\\xff"          # bytes come back as bytes
        "blob" in c                      # -> True

    Values: ``bytes`` are stored as base64, ``str`` as utf8 and any other JSON-able
    value as json; the daemon remembers each entry's encoding, so ``get`` returns the
    type that was stored (a tuple comes back as a list, dict keys are strings).

    Args:
        path: the socket; default ``$HALCYON_SOCKET``, then
            ``$XDG_RUNTIME_DIR/halcyon/halcyon.sock``, then
            ``/tmp/halcyon-<uid>/halcyon.sock``.
        timeout: seconds a call may go without progress before it raises
            :class:`~halcyon.errors.HalcyonTimeoutError` (default 5; ``None`` waits
            forever). Every method also takes ``timeout=`` for that one call
            (``None`` there means the client's). A request
            that times out is cancelled on the daemon with ``$/cancelRequest``.
        extend: how reads on this client extend lifetimes when a call does not say
            (``None``: the daemon's default, sliding; ``False``: never, for lifetimes
            counted from the write; see :meth:`configure`). Sent with the connection's
            first request, and again on every reconnect.
        retry: resend a request once on a fresh connection when the old one broke
            (e.g. the daemon restarted). Always done when the request was not written
            yet; after it was written, only for idempotent methods (all ``cache.*``
            reads and writes of one key, ``server.*``), never for ``clear``,
            ``remove_expired``, ``trim`` or :meth:`call`.

    The connection is opened lazily on the first call and reopened after it breaks,
    and a forked child opens its own. Thread-safe (see the module docstring); use as a
    context manager to close it.
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
        # Guards _conn, _next_id and _configure; held for a whole request/reply exchange.
        self._lock = threading.RLock()
        self._conn: Optional[Connection] = None
        self._next_id = 1
        # Applied whenever a connection opens (see _connection).
        self._configure: Optional[Command] = None if extend is None else _wire.cmd_configure(extend=extend)
        self._forks = _forks[0]
        # memoize's own connection per thread (see _memo_client); all of them are kept in
        # _memo_clients too (guarded by _lock) so close() reaches other threads' ones.
        self._memo = threading.local()
        self._memo_clients: List["Client"] = []
        # Keys per multi-key request; lowered when the daemon says its limit is lower.
        self._max_keys = _wire.DEFAULT_MAX_KEYS

    # ------------------------------------------------------------ plumbing

    def close(self) -> None:
        """Close the connection, and memoize's (a later call reopens them)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            memo, self._memo_clients = self._memo_clients, []
            self._memo = threading.local()
        for client in memo:
            client.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"halcyon.Client(path={self.path!r}, timeout={self.timeout!r})"

    def _timeout(self, timeout: Optional[float]) -> Optional[float]:
        return self.timeout if timeout is None else float(timeout)

    def _connection(self, timeout: Optional[float]) -> Connection:
        if self._forks != _forks[0]:
            # A forked child must not talk on its parent's connection: both would read
            # each other's replies. Drop the inherited one (closing the child's copy of
            # the descriptor leaves the parent's open) and start fresh.
            self._forks = _forks[0]
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        conn = Connection(self.path, timeout if timeout is not None else DEFAULT_TIMEOUT)
        self._conn = conn
        if self._configure is not None:
            # Per-connection settings die with the connection: apply them again.
            rid = self._next_id
            self._next_id += 1
            try:
                reply = conn.call(self._configure.line(rid), rid, timeout)
            except Timeout as exc:
                raise _timeout_error(timeout, exc) from None
            result = _wire.outcome(reply, self._configure)
            if isinstance(result, errors.HalcyonError):
                raise result
        return conn

    def _outcomes(self, commands: Sequence[Command], timeout: Any, batch: bool) -> List[Any]:
        """Send ``commands`` (one line each, or one batch line) and return each one's
        decoded result or exception, in call order."""
        if not commands:
            return []
        wait = self._timeout(timeout)
        idempotent = all(c.idempotent for c in commands)
        count = len(commands)
        with self._lock:
            attempt = 0
            while True:
                attempt += 1
                first = self._next_id
                self._next_id += count
                # Encoded in bulk: each command's line is its pre-encoded head plus an id.
                if batch:
                    payload = _wire.dumps([c.request(first + i) for i, c in enumerate(commands)])
                else:
                    payload = b"".join([c.line(first + i) for i, c in enumerate(commands)])
                try:
                    conn = self._connection(wait)
                    replies, nulls = conn.exchange(payload, first, count, wait, batch=batch)
                    break
                except Timeout as exc:
                    raise _timeout_error(wait, exc) from None
                except Broken as exc:
                    self._conn = None
                    if self.retry and attempt == 1 and (not exc.delivered or idempotent):
                        continue
                    raise errors.HalcyonConnectionError(str(exc), reason="connectionLost") from None
        null_error = errors.from_reply(nulls[0]["error"]) if nulls else None
        outcome = _wire.outcome
        return [
            (null_error or errors.ProtocolError("no reply for request")) if reply is None else outcome(reply, command)
            for command, reply in zip(commands, replies)
        ]

    def _run_many(self, many: Many, timeout: Any) -> Any:
        """Send a multi-key call as requests of at most the daemon's limit, written
        together, and return the merged result (or raise the first error)."""
        while True:
            size = self._max_keys
            results = self._outcomes(many.commands(size), timeout, False)
            smaller = Many.smaller_limit(results, size)
            if smaller is None:
                return many.finish(results)
            self._max_keys = smaller

    def _run(self, command: Command, timeout: Any) -> Any:
        """Send one command and return its decoded result (or raise its error)."""
        wait = self.timeout if timeout is None else float(timeout)
        with self._lock:
            attempt = 0
            while True:
                attempt += 1
                rid = self._next_id
                self._next_id += 1
                try:
                    conn = self._conn
                    if conn is None or conn.sock is None or self._forks != _forks[0]:
                        conn = self._connection(wait)
                    reply = conn.call(command.line(rid), rid, wait)
                    break
                except Timeout as exc:
                    raise _timeout_error(wait, exc) from None
                except Broken as exc:
                    self._conn = None
                    if self.retry and attempt == 1 and (not exc.delivered or command.idempotent):
                        continue
                    raise errors.HalcyonConnectionError(str(exc), reason="connectionLost") from None
        result = _wire.outcome(reply, command)
        if isinstance(result, errors.HalcyonError):
            raise result
        return result

    # ------------------------------------------------------------ methods

    def get(self, key: str, default: Any = None, *, extend: Any = None,
            memory_only: bool = False, encoding: Optional[str] = None, timeout: Any = None) -> Any:
        """Return the value stored under ``key``, or ``default`` on a miss.

        Args:
            extend: how a hit extends its expiration: ``None`` (the connection's
                default: ``"cacheTime"``, sliding, unless :meth:`configure` changed it),
                ``False``/``"none"``, or an ``expire`` value to reset it to, counted
                from now.
            memory_only: do not look in the disk tier.
            encoding: the value's type regardless of how it was stored: ``"base64"``
                (the stored bytes, as ``bytes``), ``"utf8"`` (``str``) or ``"json"``;
                ``None`` returns the type that was stored. A value that cannot be shown
                that way raises :class:`~halcyon.errors.CannotEncodeError`.
            timeout: seconds for this call (default: the client's).
        """
        return self._run(_wire.cmd_get(key, default, extend=extend, memory_only=memory_only, encoding=encoding),
                         timeout)

    def get_entry(self, key: str, *, extend: Any = None, memory_only: bool = False,
                  encoding: Optional[str] = None,
                  timeout: Any = None) -> Optional[Entry]:
        """Like :meth:`get` but returns an :class:`~halcyon.Entry` (value, encoding,
        tier, expiry) on a hit and ``None`` on a miss, so a stored ``None`` is told
        apart from a miss. ``encoding`` asks for the value in another encoding than
        its own (``"base64"``: the stored bytes exactly, as ``bytes``); a value that
        cannot be shown that way raises :class:`~halcyon.errors.CannotEncodeError`."""
        return cast(Optional[Entry], self._run(
            _wire.cmd_get_entry(key, extend=extend, memory_only=memory_only, encoding=encoding), timeout))

    def set(self, key: str, value: Any, expire: Expire = None, *, memory_expire: Expire = None,
            to_disk: Optional[bool] = None, lease: Optional[str] = None, timeout: Any = None) -> bool:
        """Store ``value`` under ``key``; returns whether it was stored (an expiration
        already in the past stores nothing and returns ``False``).

        Args:
            expire: disk-tier expiration: seconds, ``timedelta``, ``datetime``,
                ``"never"``, or a protocol form (``{"days": 7}``); ``None`` = the
                daemon's default (7 days unless configured).
            memory_expire: how long the memory copy stays in RAM after its last read,
                same forms (daemon default 300 s); it never shortens the entry's
                lifetime (``expire``), except with ``to_disk=False``, where it is the
                lifetime.
            to_disk: ``False`` keeps the value in memory only.
            lease: the token from :meth:`lease`: this write is the value the lease was
                taken for (waiting callers get it). Any write ends the key's lease.
        Raises:
            TypeError: the value is not bytes, str or JSON-able.
        """
        return cast(bool, self._run(
            _wire.cmd_set(key, value, expire, memory_expire=memory_expire, to_disk=to_disk, lease=lease),
            timeout))

    def add(self, key: str, value: Any, expire: Expire = None, *, memory_expire: Expire = None,
            to_disk: Optional[bool] = None, lease: Optional[str] = None, timeout: Any = None) -> bool:
        """Store ``value`` only if ``key`` holds no live entry (set-if-absent); returns
        whether it was stored. Atomic with every other write: among concurrent adds of
        one key exactly one stores. Arguments as for :meth:`set`."""
        return cast(bool, self._run(
            _wire.cmd_add(key, value, expire, memory_expire=memory_expire, to_disk=to_disk, lease=lease),
            timeout))

    def cas(self, key: str, value: Any, version: int, expire: Expire = None, *,
            memory_expire: Expire = None, to_disk: Optional[bool] = None, timeout: Any = None) -> bool:
        """Compare-and-set: store ``value`` only if the key's version is still
        ``version`` (from :meth:`get_entry` or :meth:`describe`); returns ``False`` when
        someone wrote the key in between or it is gone. Arguments as for :meth:`set`."""
        return cast(bool, self._run(
            _wire.cmd_cas(key, value, version, expire, memory_expire=memory_expire, to_disk=to_disk), timeout))

    def incr(self, key: str, by: int = 1, *, initial: Optional[int] = None, expire: Expire = None,
             memory_expire: Expire = None, to_disk: Optional[bool] = None, timeout: Any = None) -> int:
        """Add ``by`` (may be negative) to the integer under ``key`` atomically and
        return the result. A missing or expired key starts at ``initial`` (default 0).
        An existing entry keeps its expiration unless ``expire`` is given, and its
        encoding: a number stored as ``bytes`` reads back as ``bytes`` (``b"6"``), one
        stored as ``str`` as ``str``; a new key holds a JSON integer. See
        :meth:`incr_existing` for an increment that refuses a missing key.

        Raises:
            halcyon.errors.NotAnIntegerError: the stored value is not a JSON integer.
            halcyon.errors.IntegerOverflowError: the result would not fit in 64 bits.
        """
        return cast(int, self._run(_wire.cmd_incr(key, by, initial=initial, expire=expire,
                                                  memory_expire=memory_expire, to_disk=to_disk), timeout))

    def incr_existing(self, key: str, by: int = 1, *, expire: Expire = None, memory_expire: Expire = None,
                      to_disk: Optional[bool] = None, timeout: Any = None) -> Optional[int]:
        """:meth:`incr`, but a missing or expired key is left alone and ``None`` is
        returned (memcached's ``incr``): the check and the add are one step on the
        daemon, so no other write can create or remove the key in between."""
        return cast(Optional[int], self._run(_wire.cmd_incr(
            key, by, expire=expire, memory_expire=memory_expire, to_disk=to_disk, create=False), timeout))

    def decr(self, key: str, by: int = 1, *, initial: Optional[int] = None, expire: Expire = None,
             memory_expire: Expire = None, to_disk: Optional[bool] = None, timeout: Any = None) -> int:
        """:meth:`incr` by ``-by``."""
        return self.incr(key, -by, initial=initial, expire=expire, memory_expire=memory_expire,
                         to_disk=to_disk, timeout=timeout)

    def get_many(self, keys: Iterable[str], default: Any = _wire._MISSING, *, extend: Any = None,
                 memory_only: bool = False, encoding: Optional[str] = None, timeout: Any = None) -> Dict[str, Any]:
        """Read many keys: ``{key: value}`` in the order asked, hits only (like
        pymemcache's ``get_many``), or every key with ``default`` for the misses.
        ``encoding`` as for :meth:`get`. Any number of keys: more than the daemon's
        ``--max-batch`` (default 1000) go as several requests written together, each
        of them one step."""
        return cast(Dict[str, Any], self._run_many(
            _wire.many_get(list(keys), default, extend=extend, memory_only=memory_only, encoding=encoding), timeout))

    def set_many(self, mapping: Mapping[str, Any], expire: Expire = None, *, memory_expire: Expire = None,
                 to_disk: Optional[bool] = None, timeout: Any = None) -> Dict[str, Optional[int]]:
        """Store every ``key: value`` of ``mapping``; returns ``{key: version}``
        (``None`` where nothing was stored). Up to the daemon's ``--max-batch`` (default
        1000) entries are applied in order as one step, atomically with every other
        write; a larger mapping goes as several such steps, written together, and
        another client's write may land between two of them."""
        return cast(Dict[str, Optional[int]], self._run_many(
            _wire.many_set(mapping, expire, memory_expire=memory_expire, to_disk=to_disk), timeout))

    def delete_many(self, keys: Iterable[str], *, memory: Optional[bool] = None, disk: Optional[bool] = None,
                    timeout: Any = None) -> List[bool]:
        """Remove every key (``cache.removeMany``); returns, per key in order, whether
        it held an entry. Up to ``--max-batch`` keys are removed as one step; more go as
        several steps written together (as for :meth:`set_many`)."""
        return cast(List[bool], self._run_many(_wire.many_remove(list(keys), memory=memory, disk=disk), timeout))

    def keys(self, prefix: str = "", *, page_size: Optional[int] = None, timeout: Any = None) -> Iterator[str]:
        """Iterate over the live keys starting with ``prefix``, from both tiers, one
        page (``page_size``, daemon default 1000) per request. Keys present for the whole
        scan are seen exactly once; keys written meanwhile may or may not be."""
        cursor: Optional[str] = None
        while True:
            page, cursor = self._run(_wire.cmd_keys_page(prefix, cursor, page_size), timeout)
            yield from page
            if cursor is None:
                return

    def remove_prefix(self, prefix: str, *, timeout: Any = None) -> int:
        """Remove every key starting with ``prefix`` (non-empty) from both tiers, as one
        write; returns how many."""
        return cast(int, self._run(_wire.cmd_remove_prefix(prefix), timeout))

    def ttl(self, key: str, *, timeout: Any = None) -> Optional[float]:
        """Seconds until ``key`` expires: ``None`` on a miss, ``math.inf`` when it never
        expires. Never loads or extends the entry."""
        return _wire.ttl_from_description(self.describe(key, timeout=timeout), time.time())

    def lease(self, key: str, ttl: Expire, *, wait: float = 0, timeout: Any = None) -> Lease:
        """Read ``key``, or take its lease on a miss (stampede protection across
        processes). See :class:`~halcyon.Lease`: a hit, a token (compute the value and
        ``set(key, value, lease=token)``, or :meth:`release_lease`), or ``leased`` when
        another caller still held it after ``wait`` seconds.

        The lease ends at ``ttl``, at any write of the key, at :meth:`release_lease`, or
        when this client's connection closes. While it waits the call holds this
        client's lock (other threads' calls on this client wait too): memoize uses a
        connection of its own per thread for that reason."""
        limit = self._timeout(timeout)
        if limit is not None and wait:
            limit += wait
        return cast(Lease, self._run(_wire.cmd_lease(key, ttl, wait=wait), limit))

    def release_lease(self, key: str, token: str, *, timeout: Any = None) -> bool:
        """Give a lease back without writing; one waiting caller gets it. Returns
        whether it was still held. The token is what counts: any client (another
        thread's, another process's) may release a lease it was handed the token of."""
        return cast(bool, self._run(_wire.cmd_release_lease(key, token), timeout))

    def lease_status(self, key: str, *, timeout: Any = None) -> Optional[LeaseStatus]:
        """Whether ``key``'s lease is held, without taking it or waiting for it (a
        lock's ``locked()``): a :class:`~halcyon.LeaseStatus`, or ``None`` when free."""
        return cast(Optional[LeaseStatus], self._run(_wire.cmd_lease_status(key), timeout))

    def delete(self, key: str, *, memory: Optional[bool] = None, disk: Optional[bool] = None,
               timeout: Any = None) -> bool:
        """Remove ``key`` (from both tiers unless told otherwise); returns whether
        anything was removed."""
        return cast(bool, self._run(_wire.cmd_delete(key, memory=memory, disk=disk), timeout))

    def exists(self, key: str, *, timeout: Any = None) -> bool:
        """Whether ``key`` is cached in either tier; never loads it, never extends it."""
        return cast(bool, self._run(_wire.cmd_exists(key), timeout))

    def cached_type(self, key: str, *, timeout: Any = None) -> str:
        """Which tier holds ``key``: ``"memory"``, ``"disk"`` or ``"none"``."""
        return cast(str, self._run(_wire.cmd_cached_type(key), timeout))

    def describe(self, key: str, *, timeout: Any = None) -> Optional[Description]:
        """Size, encoding, expiry and last access of ``key`` (``None`` on a miss);
        never loads the value, never extends it."""
        return cast(Optional[Description], self._run(_wire.cmd_describe(key), timeout))

    def touch(self, key: str, expire: Expire = None, *, memory_expire: Expire = None,
              timeout: Any = None) -> bool:
        """Give ``key`` a new expiration counted from now without rewriting it
        (``expire=None``: the daemon's default); returns ``False`` on a miss."""
        return cast(bool, self._run(_wire.cmd_touch(key, expire, memory_expire=memory_expire), timeout))

    def clear(self, *, memory: Optional[bool] = None, disk: Optional[bool] = None,
              shared: Optional[bool] = None, timeout: Any = None) -> Removed:
        """Remove every entry (of both tiers unless told otherwise); returns how many, an
        ``int`` that also tells, with an upstream, how many copies of shared keys this host
        dropped (:class:`~halcyon.Removed`). ``shared=True`` also removes the shared keys
        from Redis, for every host."""
        return cast(Removed, self._run(_wire.cmd_clear(memory=memory, disk=disk, shared=shared), timeout))

    def remove_expired(self, *, memory: Optional[bool] = None, disk: Optional[bool] = None,
                       timeout: Any = None) -> Removed:
        """Remove expired entries now instead of at the next sweep; returns how many (as
        for :meth:`clear`)."""
        return cast(Removed, self._run(_wire.cmd_remove_expired(memory=memory, disk=disk), timeout))

    def trim(self, *, timeout: Any = None) -> Dict[str, Any]:
        """Bring the disk tier under its size limit (least recently accessed first, down
        to half the limit); returns ``{"removed": n, "totalSize": bytes}``."""
        return cast(Dict[str, Any], self._run(_wire.cmd_trim(), timeout))

    def total_size(self, *, timeout: Any = None) -> Dict[str, Any]:
        """The disk tier's size: ``{"bytes": n, "count": n}``."""
        return cast(Dict[str, Any], self._run(_wire.cmd_total_size(), timeout))

    def stats(self, *, timeout: Any = None) -> Dict[str, Any]:
        """The daemon's counters (hits/misses by tier, sets, evictions, ...)."""
        return cast(Dict[str, Any], self._run(_wire.cmd_stats(), timeout))

    def ping(self, *, timeout: Any = None) -> bool:
        """``True`` when the daemon answers."""
        return cast(bool, self._run(_wire.cmd_ping(), timeout))

    def info(self, *, timeout: Any = None) -> Dict[str, Any]:
        """Name, version, protocol, pid, socket, cache folder, limits and defaults."""
        return cast(Dict[str, Any], self._run(_wire.cmd_info(), timeout))

    def identity(self, *, timeout: Any = None) -> Dict[str, Any]:
        """Who the daemon takes this connection for: ``{"namespace": ..., "rights": [...],
        "access": True}`` under ``halcyond --access`` (``namespace`` is ``None`` for the
        whole keyspace of an admin), else ``{"namespace": None, "rights": ["read",
        "write", "admin"], "access": False}``."""
        return cast(Dict[str, Any], self._run(_wire.cmd_identity(), timeout))

    def configure(self, *, callback_queue: Any = None, load_disk_file_synchronously: Optional[bool] = None,
                  extend: Any = None, timeout: Any = None) -> Dict[str, Any]:
        """Change this connection's settings (``connection.configure``); they are
        applied again whenever the client reconnects. Returns the settings now.

        ``extend`` is how reads extend lifetimes when a call does not say (``get``,
        ``get_many``, ``lease``): ``False`` for lifetimes that count from the write,
        as cache frameworks expect; ``True`` for sliding (the daemon's default)."""
        with self._lock:
            command = _wire.cmd_configure(callback_queue=callback_queue,
                                          load_disk_file_synchronously=load_disk_file_synchronously,
                                          extend=extend, previous=self._configure)
            result = cast(Dict[str, Any], self._run(command, timeout))
            self._configure = command
        return result

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None, *, timeout: Any = None) -> Any:
        """Call any method and return its raw ``result`` (errors raise as usual).
        Never resent after a broken connection."""
        return self._run(_wire.cmd_call(method, params), timeout)

    def notify(self, method: str, params: Optional[Mapping[str, Any]] = None) -> None:
        """Send a notification (no id, no reply, not even an error)."""
        with self._lock:
            conn = self._connection(self.timeout)
            try:
                conn.exchange(_wire.dumps(_wire.cmd_call(method, params).request(None)), 0, 0, self.timeout)
            except Broken as exc:
                self._conn = None
                raise errors.HalcyonConnectionError(str(exc), reason="connectionLost") from None
            except Timeout:
                raise errors.HalcyonTimeoutError("could not send the notification", reason="timeout") from None

    # --------------------------------------------------------- mapping API

    def __getitem__(self, key: str) -> Any:
        entry = self.get_entry(key)
        if entry is None:
            raise KeyError(key)
        return entry.value

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: str) -> None:
        if not self.delete(key):
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.exists(key)

    # ------------------------------------------------------ pipelines

    def pipeline(self, *, raise_on_error: bool = True, timeout: Any = None) -> "Pipeline":
        """Queue calls and send them in one write, one line per request::

            with client.pipeline() as p:
                p.set("a", 1)
                p.get("a")
            p.results            # [True, 1]

        Replies are matched by id and returned in call order by :meth:`Pipeline.execute`
        (called on leaving the ``with`` block). With ``raise_on_error`` the first
        failed call's exception is raised after all replies are in (``p.results``
        still holds every outcome, exceptions included); without it the exceptions are
        returned in place. The client's lock is held while it runs.
        """
        return Pipeline(self, batch=False, raise_on_error=raise_on_error, timeout=timeout)

    def batch(self, *, raise_on_error: bool = True, timeout: Any = None) -> "Pipeline":
        """Like :meth:`pipeline` but sent as one JSON-RPC batch (a JSON array on one
        line, answered by one array). The daemon refuses batches over ``--max-batch``
        (default 1000) with :class:`~halcyon.errors.BatchTooLargeError` for every call.
        """
        return Pipeline(self, batch=True, raise_on_error=raise_on_error, timeout=timeout)

    # -------------------------------------------------------- memoize

    def memoize(self, expire: Expire = None, *, prefix: Optional[str] = None, typed: bool = False,
                memory_expire: Expire = None, ignore: Iterable[Union[int, str]] = (),
                lease_ttl: float = DEFAULT_LEASE_TTL) -> Callable[[Callable[P, R]], Memoized[P, R]]:
        """Decorator: cache a function's result in Halcyon, keyed by its arguments, and
        compute it once however many threads and processes ask at the same time.

        ::

            @client.memoize(expire=600)
            def lookup(user_id: int) -> dict: ...

            lookup(7)                    # runs and caches
            lookup(7)                    # from the cache
            lookup.invalidate(7)         # forget that one result
            lookup.cache_key(7)          # the key it uses
            lookup.__wrapped__(7)        # bypass the cache

        A miss takes the key's lease (``cache.lease``): the caller that gets it runs the
        function and stores the result with the lease; every other caller, in this
        process or another, waits (up to ``lease_ttl`` seconds) and gets that result. If
        the function raises, the lease is given back, nothing is cached and the next
        waiter computes. If a holder vanishes (its process dies) its lease ends with its
        connection. A caller still refused after three waits computes without caching.
        Waiting calls use a connection of this client's own per thread, so they never
        hold up other threads' calls.

        The result must be storable (bytes, str or JSON-able; a returned ``None`` is
        cached too). The key is ``memoize:<module>.<qualname>:<sha256 of the
        arguments>`` unless ``prefix`` is given; with ``typed``, ``f(1)`` and ``f(1.0)``
        are cached apart; ``ignore`` leaves arguments out of the key, by position or name
        (``ignore={"self"}`` on a method shares results between instances).
        ``invalidate`` and ``cache_key`` take the function's own parameters, also for
        type checkers (see :class:`~halcyon.memoize.Memoized`).
        """

        def decorate(func: Callable[P, R]) -> Memoized[P, R]:
            keys = KeyMaker(func, prefix, typed, ignore)

            def run(key: str, compute: Callable[[], R]) -> R:
                return self._memoized(key, compute, expire, memory_expire, lease_ttl)

            return Memoized(func, keys, run, self.delete)

        return decorate

    def _memo_client(self) -> "Client":
        """This thread's own connection for memoize's leases. A lease call that waits
        holds its client's lock, and the holder's write must not queue behind it when
        both threads share this client; the lease also lives as long as this connection."""
        client = getattr(self._memo, "client", None)
        if client is None:
            client = Client(self.path, self.timeout, retry=self.retry)
            self._memo.client = client
            with self._lock:
                self._memo_clients.append(client)
        return cast(Client, client)

    def _memoized(self, key: str, compute: Callable[[], R], expire: Expire, memory_expire: Expire,
                  lease_ttl: float) -> R:
        side = self._memo_client()
        for _ in range(3):
            got = side.lease(key, lease_ttl, wait=lease_ttl)
            if got.entry is not None:
                return cast(R, got.entry.value)
            if got.token is None:
                continue  # another caller held it all along: ask again (it may have ended)
            try:
                value = compute()
                side.set(key, value, expire, memory_expire=memory_expire, lease=got.token)
            except BaseException:
                # Not cached: hand the lease on at once so a waiter computes.
                try:
                    side.release_lease(key, got.token)
                except errors.HalcyonError:
                    pass  # the lease ends with its ttl or connection anyway
                raise
            return value
        return compute()


class Pipeline(PipelineQueue):
    """Calls queued on a :class:`Client` and sent together (see :meth:`Client.pipeline`).

    Each method takes the same arguments as the client's and returns the pipeline, so
    calls can chain. Not thread-safe: build it in one thread; :meth:`execute` holds
    the client's lock while it runs.
    """

    def __init__(self, client: Client, *, batch: bool, raise_on_error: bool, timeout: Any) -> None:
        super().__init__(batch=batch, raise_on_error=raise_on_error, timeout=timeout)
        self._client = client

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.execute()

    def execute(self) -> List[Any]:
        """Send the queued calls and return their results in call order (see
        :meth:`Client.pipeline` for errors). The queue is emptied."""
        self.results = self._client._outcomes(self._take(), self._timeout, self._batch)
        if self._raise:
            raise_first_error(self.results)
        return self.results

    def __iter__(self) -> Iterator[Any]:
        return iter(self.results)

    def cached_type(self, key: str) -> "Pipeline":
        """Queue :meth:`Client.cached_type`."""
        return self._add(_wire.cmd_cached_type(key))

    def clear(self, *, memory: Optional[bool] = None, disk: Optional[bool] = None,
              shared: Optional[bool] = None) -> "Pipeline":
        """Queue :meth:`Client.clear`."""
        return self._add(_wire.cmd_clear(memory=memory, disk=disk, shared=shared))

    def remove_expired(self, *, memory: Optional[bool] = None, disk: Optional[bool] = None) -> "Pipeline":
        """Queue :meth:`Client.remove_expired`."""
        return self._add(_wire.cmd_remove_expired(memory=memory, disk=disk))

    def trim(self) -> "Pipeline":
        """Queue :meth:`Client.trim`."""
        return self._add(_wire.cmd_trim())

    def total_size(self) -> "Pipeline":
        """Queue :meth:`Client.total_size`."""
        return self._add(_wire.cmd_total_size())

    def stats(self) -> "Pipeline":
        """Queue :meth:`Client.stats`."""
        return self._add(_wire.cmd_stats())

    def ping(self) -> "Pipeline":
        """Queue :meth:`Client.ping`."""
        return self._add(_wire.cmd_ping())

    def info(self) -> "Pipeline":
        """Queue :meth:`Client.info`."""
        return self._add(_wire.cmd_info())
