"""A Django cache backend on Halcyon: ``halcyon.contrib.django.HalcyonCache``.

::

    CACHES = {
        "default": {
            "BACKEND": "halcyon.contrib.django.HalcyonCache",
            "LOCATION": "",          # the daemon's socket; "" finds it as the client does
            "TIMEOUT": 300,
            "OPTIONS": {"timeout": 5},
        }
    }

Semantics, as Django's own Redis backend has them (Docs/FRAMEWORKS.md has the table):

- ``TIMEOUT``/``timeout``: seconds from the write (reads never extend a lifetime: the
  backend sets its connections' default with ``connection.configure``); ``None``
  never expires; 0 or less expires at once (``set`` stores nothing and removes the old
  value, ``add`` on a missing key answers ``True`` and keeps nothing, ``touch`` removes).
- Keys: Django's ``make_key`` (``KEY_PREFIX``, ``VERSION``, ``KEY_FUNCTION``) and its
  memcached-portability warnings; the daemon takes any key up to 4096 UTF-8 bytes.
- Values: an ``int`` is stored as its decimal digits, so ``incr``/``decr`` add to it in
  place, atomically, and it stays bytes; anything else is pickled (``OPTIONS
  {"pickle_protocol": n}``). ``incr`` of a missing key raises ``ValueError`` without
  creating it (one step on the daemon).
- ``clear()`` removes the keys starting with ``KEY_PREFIX``, or with no prefix every key
  of the daemon (as the Redis backend's ``FLUSHDB``).
- ``get_many``/``set_many``/``delete_many`` take any number of keys: up to the daemon's
  ``--max-batch`` (1000) each is one atomic step.
- The ``a*`` methods run natively on :class:`halcyon.aio.AsyncClient` (one per event
  loop), never through a thread.

``OPTIONS``: ``timeout`` (seconds a call may wait for the daemon, default 5),
``retry`` (resend once after a broken connection, default True), ``pickle_protocol``,
``memory_timeout`` (how long a value stays in the daemon's RAM after its last read, in
seconds; default the daemon's), ``to_disk`` (default True: values survive restarts).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any, Dict, Iterable, List, Optional

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.core.exceptions import ImproperlyConfigured

from .. import Client, _wire
from ..aio import AsyncClient
from . import NO_SLIDING, clear_keys, pickle_codec

__all__ = ["HalcyonCache"]

_OPTIONS = {"timeout", "retry", "pickle_protocol", "memory_timeout", "to_disk"}


class HalcyonCache(BaseCache):  # type: ignore[misc]  # Django ships no type hints
    """Django's ``BaseCache`` on a ``halcyond`` (see the module docstring).

    Threading: Django keeps one instance per thread (and per async context); the
    instance is thread-safe anyway: its :class:`halcyon.Client` serialises calls, and
    async calls use one :class:`~halcyon.aio.AsyncClient` per event loop.
    """

    def __init__(self, server: Optional[str], params: Dict[str, Any]) -> None:
        super().__init__(params)
        options = dict(params.get("OPTIONS") or {})
        unknown = set(options) - _OPTIONS
        if unknown:
            raise ImproperlyConfigured(
                f"halcyon.contrib.django.HalcyonCache: unknown OPTIONS {sorted(unknown)}; known: {sorted(_OPTIONS)}")
        self._path = _wire.resolve_socket_path(server or None)
        self._call_timeout: Optional[float] = options.get("timeout", 5.0)
        self._retry = bool(options.get("retry", True))
        self._memory_expire = options.get("memory_timeout")
        self._to_disk: Optional[bool] = options.get("to_disk")
        self._dumps, self._loads = pickle_codec(options.get("pickle_protocol"))
        self._client: Optional[Client] = None
        self._client_lock = threading.Lock()
        self._aclients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient]" = (
            weakref.WeakKeyDictionary())

    # ------------------------------------------------------------ plumbing

    @property
    def client(self) -> Client:
        """The blocking client, its reads set not to extend lifetimes."""
        client = self._client
        if client is None:
            with self._client_lock:
                client = self._client
                if client is None:
                    client = Client(self._path, self._call_timeout, retry=self._retry, extend=NO_SLIDING)
                    self._client = client
        return client

    def aclient(self) -> AsyncClient:
        """The asyncio client of the running loop, its reads set not to extend lifetimes."""
        loop = asyncio.get_running_loop()
        client = self._aclients.get(loop)
        if client is None:
            client = AsyncClient(self._path, self._call_timeout, retry=self._retry, extend=NO_SLIDING)
            self._aclients[loop] = client
        return client

    def get_backend_timeout(self, timeout: Any = DEFAULT_TIMEOUT) -> Any:
        """The ``expire`` argument for the client: seconds, ``"never"`` for ``None``,
        or ``"expired"`` for 0 and less."""
        if timeout is DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        if timeout is None:
            return "never"
        return timeout if timeout > 0 else "expired"

    def _decode(self, value: Any) -> Any:
        # Bytes are what this backend wrote; anything else was stored by another client
        # as text or JSON and reads as it is.
        return self._loads(value) if isinstance(value, bytes) else value

    def _write(self, timeout: Any) -> Dict[str, Any]:
        return {"expire": self.get_backend_timeout(timeout), "memory_expire": self._memory_expire,
                "to_disk": self._to_disk}

    def _keys(self, keys: Iterable[str], version: Optional[int]) -> Dict[str, str]:
        return {self.make_and_validate_key(key, version=version): key for key in keys}

    # ------------------------------------------------------------ blocking

    def add(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Optional[int] = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return self.client.add(key, self._dumps(value), **self._write(timeout))

    def get(self, key: str, default: Any = None, version: Optional[int] = None) -> Any:
        key = self.make_and_validate_key(key, version=version)
        value = self.client.get(key, self._missing_key)
        return default if value is self._missing_key else self._decode(value)

    def set(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Optional[int] = None) -> None:
        key = self.make_and_validate_key(key, version=version)
        self.client.set(key, self._dumps(value), **self._write(timeout))

    def touch(self, key: str, timeout: Any = DEFAULT_TIMEOUT, version: Optional[int] = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        expire = self.get_backend_timeout(timeout)
        if expire == "expired":
            return self.client.delete(key)
        return self.client.touch(key, expire, memory_expire=self._memory_expire)

    def delete(self, key: str, version: Optional[int] = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return self.client.delete(key)

    def get_many(self, keys: Iterable[str], version: Optional[int] = None) -> Dict[str, Any]:
        made = self._keys(keys, version)
        found = self.client.get_many(list(made))
        return {made[k]: self._decode(v) for k, v in found.items()}

    def has_key(self, key: str, version: Optional[int] = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return self.client.exists(key)

    def incr(self, key: str, delta: int = 1, version: Optional[int] = None) -> int:
        made = self.make_and_validate_key(key, version=version)
        value = self.client.incr_existing(made, delta)
        if value is None:
            raise ValueError(f"Key '{key}' not found.")
        return value

    def set_many(self, data: Dict[str, Any], timeout: Any = DEFAULT_TIMEOUT,
                 version: Optional[int] = None) -> List[str]:
        mapping = {self.make_and_validate_key(k, version=version): self._dumps(v) for k, v in data.items()}
        self.client.set_many(mapping, **self._write(timeout))
        return []

    def delete_many(self, keys: Iterable[str], version: Optional[int] = None) -> None:
        self.client.delete_many(list(self._keys(keys, version)))

    def clear(self) -> None:
        clear_keys(self.client, self.key_prefix)

    def close(self, **kwargs: Any) -> None:
        # Django calls this at the end of every request. The connection is one socket to
        # a local daemon, cheap to keep and reused by the next request, so it stays open
        # (a dropped backend closes it; see halcyon._transport.Connection.__del__).
        pass

    # ------------------------------------------------------------ asyncio

    async def aadd(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Optional[int] = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return await self.aclient().add(key, self._dumps(value), **self._write(timeout))

    async def aget(self, key: str, default: Any = None, version: Optional[int] = None) -> Any:
        key = self.make_and_validate_key(key, version=version)
        value = await self.aclient().get(key, self._missing_key)
        return default if value is self._missing_key else self._decode(value)

    async def aset(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Optional[int] = None) -> None:
        key = self.make_and_validate_key(key, version=version)
        await self.aclient().set(key, self._dumps(value), **self._write(timeout))

    async def atouch(self, key: str, timeout: Any = DEFAULT_TIMEOUT, version: Optional[int] = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        client = self.aclient()
        expire = self.get_backend_timeout(timeout)
        if expire == "expired":
            return await client.delete(key)
        return await client.touch(key, expire, memory_expire=self._memory_expire)

    async def adelete(self, key: str, version: Optional[int] = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return await self.aclient().delete(key)

    async def aget_many(self, keys: Iterable[str], version: Optional[int] = None) -> Dict[str, Any]:
        made = self._keys(keys, version)
        found = await self.aclient().get_many(list(made))
        return {made[k]: self._decode(v) for k, v in found.items()}

    async def ahas_key(self, key: str, version: Optional[int] = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return await self.aclient().exists(key)

    async def aincr(self, key: str, delta: int = 1, version: Optional[int] = None) -> int:
        made = self.make_and_validate_key(key, version=version)
        value = await self.aclient().incr_existing(made, delta)
        if value is None:
            raise ValueError(f"Key '{key}' not found.")
        return value

    async def aset_many(self, data: Dict[str, Any], timeout: Any = DEFAULT_TIMEOUT,
                        version: Optional[int] = None) -> List[str]:
        mapping = {self.make_and_validate_key(k, version=version): self._dumps(v) for k, v in data.items()}
        await self.aclient().set_many(mapping, **self._write(timeout))
        return []

    async def adelete_many(self, keys: Iterable[str], version: Optional[int] = None) -> None:
        await self.aclient().delete_many(list(self._keys(keys, version)))

    async def aclear(self) -> None:
        client = self.aclient()
        if self.key_prefix:
            await client.remove_prefix(self.key_prefix)
        else:
            await client.clear()

    async def aclose(self, **kwargs: Any) -> None:
        pass
