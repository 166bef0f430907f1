"""A cachelib cache on Halcyon: ``halcyon.contrib.cachelib.HalcyonCache``.

::

    from halcyon.contrib.cachelib import HalcyonCache

    cache = HalcyonCache(key_prefix="myapp:", default_timeout=300)
    cache.set("answer", 42)
    cache.inc("answer")          # 43, atomically on the daemon

Flask-Caching and anything else that takes a ``cachelib.BaseCache`` can use it.
Semantics, as cachelib's ``RedisCache`` has them: ``timeout=None`` is the default
timeout, 0 never expires, a negative timeout stores nothing (Redis refuses it);
lifetimes count from the write (reads never extend them); values go through
``serializer`` (by default cachelib's Redis format: an ``int`` as its digits, so
``inc``/``dec`` add to it in place, anything else pickled behind ``!``); ``inc`` and
``dec`` on a missing key start it at 0; ``clear()`` removes the keys starting with
``key_prefix``, or without a prefix every key of the daemon. ``key_prefix`` is a string
or a callable returning one (asked at every call); a key is named as RedisCache names
it, ``f"{prefix}{key}"``, so a key that is not a string names the entry its text does.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable, Dict, List, Optional, Union

from cachelib.base import BaseCache
from cachelib.serializers import BaseRedisSerializer

from .. import Client
from . import NO_SLIDING, clear_keys

__all__ = ["HalcyonCache", "HalcyonSerializer"]


class HalcyonSerializer(BaseRedisSerializer):
    """The default serializer: cachelib's Redis format, so a value reads the same
    through either backend."""


class HalcyonCache(BaseCache):
    """``cachelib.BaseCache`` on a ``halcyond``.

    Args:
        socket_path: the daemon's socket (default: the client's own lookup).
        default_timeout: seconds (or a ``timedelta``) for ``timeout=None``; 0 never
            expires.
        key_prefix: prepended to every key (a str, or a callable returning one).
        ignore_delete_many_errors: as for ``RedisCache`` (a missing key is deleted).
        socket_timeout: seconds a call may wait for the daemon (default 5).

    Threading: thread-safe (one :class:`halcyon.Client`, which serialises calls).
    """

    serializer = HalcyonSerializer()

    def __init__(
        self,
        socket_path: Optional[str] = None,
        default_timeout: Union[int, dt.timedelta] = 300,
        key_prefix: Union[str, Callable[[], str], None] = None,
        ignore_delete_many_errors: bool = True,
        socket_timeout: Optional[float] = 5.0,
    ) -> None:
        super().__init__(default_timeout, ignore_delete_many_errors=ignore_delete_many_errors)
        self.key_prefix = key_prefix or ""
        self.client = Client(socket_path, socket_timeout, extend=NO_SLIDING)

    def _prefix(self) -> str:
        prefix = self.key_prefix
        return prefix if isinstance(prefix, str) else prefix()

    def _name(self, key: Any, prefix: Optional[str] = None) -> str:
        # As RedisCache formats a key: the prefix, then the key's text (``str(key)``), so
        # a key that is not a string (cachelib's own tests pass functions) names the same
        # entry on every call.
        return f"{self._prefix() if prefix is None else prefix}{key}"

    def _expire(self, timeout: Union[int, dt.timedelta, None]) -> Any:
        seconds = self._normalize_timeout(timeout)
        if seconds == 0:
            return "never"
        return seconds if seconds > 0 else "expired"

    def _load(self, value: Any) -> Any:
        # Bytes are what a serializer wrote; a number `inc` created on a missing key (or
        # a value another client stored as text or JSON) reads as it is.
        return self.serializer.loads(value) if isinstance(value, bytes) else value

    def get(self, key: str) -> Any:
        return self._load(self.client.get(self._name(key)))

    def get_many(self, *keys: str) -> List[Any]:
        prefix = self._prefix()
        names = [self._name(k, prefix) for k in keys]
        found = self.client.get_many(names)
        return [self._load(found.get(n)) for n in names]

    def set(self, key: str, value: Any, timeout: Union[int, dt.timedelta, None] = None) -> bool:
        return self.client.set(self._name(key), self.serializer.dumps(value), self._expire(timeout))

    def add(self, key: str, value: Any, timeout: Union[int, dt.timedelta, None] = None) -> bool:
        return self.client.add(self._name(key), self.serializer.dumps(value), self._expire(timeout))

    def set_many(self, mapping: Dict[str, Any], timeout: Union[int, dt.timedelta, None] = None) -> List[Any]:
        prefix = self._prefix()
        names = {self._name(k, prefix): k for k in mapping}
        versions = self.client.set_many({self._name(k, prefix): self.serializer.dumps(v) for k, v in mapping.items()},
                                        self._expire(timeout))
        return [names[n] for n, version in versions.items() if version is not None]

    def delete(self, key: str) -> bool:
        return self.client.delete(self._name(key))

    def delete_many(self, *keys: str) -> List[Any]:
        if not keys:
            return []
        prefix = self._prefix()
        # One step on the daemon; a key that was absent counts as deleted, as for
        # RedisCache, and a failure raises (so nothing is reported deleted that was not).
        self.client.delete_many([self._name(k, prefix) for k in keys])
        return list(keys)

    def has(self, key: str) -> bool:
        return self.client.exists(self._name(key))

    def clear(self) -> bool:
        clear_keys(self.client, self._prefix())
        return True

    def inc(self, key: str, delta: int = 1) -> Optional[int]:
        return self.client.incr(self._name(key), delta)

    def dec(self, key: str, delta: int = 1) -> Optional[int]:
        return self.client.incr(self._name(key), -delta)
