"""The dogpile.cache backend ``"halcyon"``: ``halcyon.contrib.dogpile.HalcyonBackend``.

Registered through the ``dogpile.cache`` entry point when ``halcyon-cache[dogpile]``
is installed::

    from dogpile.cache import make_region

    region = make_region().configure(
        "halcyon",
        expiration_time=3600,
        arguments={"socket_path": None, "distributed_lock": True, "lock_timeout": 30},
    )

Arguments (named as for dogpile's Redis backend where it has them):

- ``socket_path``: the daemon's socket (default: the client's own lookup,
  ``$HALCYON_SOCKET`` then the documented places);
- ``socket_timeout``: seconds a call may wait for the daemon (default 5);
- ``halcyon_expiration_time``: the daemon-side lifetime of every value, in seconds
  (default ``None``: never, as the Redis backend without ``redis_expiration_time``;
  dogpile's own ``expiration_time`` still decides when a value is regenerated);
- ``distributed_lock``: ``True`` makes ``get_mutex`` a lease of the daemon
  (``cache.lease``), so one process of the machine regenerates a value while the
  others wait; default ``False`` (dogpile's in-process lock);
- ``lock_timeout``: the lease's ttl in seconds (default ``None``: held until released
  or its holder's connection closes, so a crashed holder never blocks the others);
- ``lock_prefix``: the lock key is ``lock_prefix + key`` (default ``"_lock"``);
- ``lock_blocking``/``lock_blocking_timeout``: whether ``acquire()`` waits, and for at
  most how many seconds (default: waits as long as it takes).

Reads never extend a value's lifetime (dogpile counts from the creation time). Values
are the bytes dogpile serialised; a key another client wrote as text or JSON is a miss.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterable, List, Mapping, Optional

from dogpile.cache.api import NO_VALUE, BytesBackend, CacheMutex

from .. import Client
from . import NO_SLIDING, PerThreadClients, seconds_or_never

__all__ = ["HalcyonBackend", "HalcyonLeaseMutex"]

#: How long one lease request may wait on the daemon before the mutex asks again.
_WAIT_SLICE = 30.0


class HalcyonLeaseMutex(CacheMutex):
    """A dogpile mutex made of the daemon's lease on ``key``: held by one caller of the
    whole machine at a time.

    The token the lease returned is the proof of holding, so any thread may release
    it. Each thread takes leases on a connection of its own (a lease that waits holds
    its connection; a lease ends with the connection that took it).

    Threading: thread-safe; ``_state`` guards the token.
    """

    def __init__(self, clients: PerThreadClients, key: str, ttl: Optional[float], blocking: bool,
                 blocking_timeout: Optional[float]) -> None:
        self.key = key
        self._clients = clients
        self._ttl = seconds_or_never(ttl)
        self._blocking = blocking
        self._blocking_timeout = blocking_timeout
        self._state = threading.Lock()
        self._token: Optional[str] = None

    def acquire(self, wait: bool = True) -> bool:
        client = self._clients.get()
        deadline = None
        if wait and self._blocking and self._blocking_timeout is not None:
            deadline = time.monotonic() + self._blocking_timeout
        while True:
            slice_ = 0.0
            if wait and self._blocking:
                slice_ = _WAIT_SLICE if deadline is None else max(0.0, min(_WAIT_SLICE, deadline - time.monotonic()))
            got = client.lease(self.key, self._ttl, wait=slice_)
            if got.token is not None:
                with self._state:
                    self._token = got.token
                return True
            if got.entry is not None:
                # Something was stored under the lock's own key: no lease can be taken
                # on a key that holds a value. Remove it, as a stale lock, and retry.
                client.delete(self.key)
                continue
            if slice_ == 0.0 or (deadline is not None and time.monotonic() >= deadline):
                return False

    def release(self) -> None:
        with self._state:
            token, self._token = self._token, None
        if token is None:
            raise RuntimeError(f"release of an unacquired lease mutex on {self.key!r}")
        self._clients.get().release_lease(self.key, token)

    def locked(self) -> bool:
        return self._clients.get().lease_status(self.key) is not None


class HalcyonBackend(BytesBackend):
    """dogpile.cache's ``BytesBackend`` on a ``halcyond`` (see the module docstring).

    Threading: thread-safe. Values go through one shared :class:`halcyon.Client`;
    leases through one client per thread.
    """

    lock_template = "_lock{0}"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        arguments = dict(arguments)
        self.socket_path: Optional[str] = arguments.pop("socket_path", None)
        self.socket_timeout: Optional[float] = arguments.pop("socket_timeout", 5.0)
        self.halcyon_expiration_time: Optional[float] = arguments.pop("halcyon_expiration_time", None)
        self.distributed_lock = bool(arguments.pop("distributed_lock", False))
        self.lock_timeout: Optional[float] = arguments.pop("lock_timeout", None)
        self.lock_blocking = bool(arguments.pop("lock_blocking", True))
        self.lock_blocking_timeout: Optional[float] = arguments.pop("lock_blocking_timeout", None)
        prefix = arguments.pop("lock_prefix", None)
        if prefix is not None:
            if not isinstance(prefix, str) or not prefix:
                raise ValueError(f"Invalid `lock_prefix` submitted: `{prefix}`.")
            self.lock_template = prefix + "{0}"
        self._expire = seconds_or_never(self.halcyon_expiration_time)
        self.client = Client(self.socket_path, self.socket_timeout, extend=NO_SLIDING)
        self._lock_clients = PerThreadClients(self.client.path, self.socket_timeout)

    def get_mutex(self, key: str) -> Optional[CacheMutex]:
        if not self.distributed_lock:
            return None
        return HalcyonLeaseMutex(self._lock_clients, self.lock_template.format(key), self.lock_timeout,
                                 self.lock_blocking, self.lock_blocking_timeout)

    def get_serialized(self, key: str) -> Any:
        value = self.client.get(key)
        return value if isinstance(value, bytes) else NO_VALUE

    def get_serialized_multi(self, keys: Iterable[str]) -> List[Any]:
        keys = list(keys)
        if not keys:
            return []
        found = self.client.get_many(keys)
        out = []
        for key in keys:
            value = found.get(key)
            out.append(value if isinstance(value, bytes) else NO_VALUE)
        return out

    def set_serialized(self, key: str, value: bytes) -> None:
        self.client.set(key, value, self._expire)

    def set_serialized_multi(self, mapping: Mapping[str, bytes]) -> None:
        if mapping:
            self.client.set_many(mapping, self._expire)

    def delete(self, key: str) -> None:
        self.client.delete(key)

    def delete_multi(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        if keys:
            self.client.delete_many(keys)
