"""A requests-cache backend on Halcyon: ``halcyon.contrib.requests_cache.HalcyonCache``.

::

    import requests_cache
    from halcyon.contrib.requests_cache import HalcyonCache

    session = requests_cache.CachedSession(backend=HalcyonCache(), expire_after=600)
    session.get("https://example.invalid/api")    # every process of the machine shares it

Shaped like requests-cache's Redis backend: responses and redirects are two
:class:`HalcyonDict` collections under ``namespace`` (keys ``<namespace>:responses:<key>``
and ``<namespace>:redirects:<key>``); a response that expires gets a daemon-side
lifetime of its expiry plus ``ttl_offset`` seconds (default 3600, so an expired
response stays to be revalidated), one that never expires none (``"never"``). Reads
never extend a lifetime: requests-cache decides expiry from the response itself.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional

from requests_cache.backends.base import BaseCache, BaseStorage
from requests_cache.serializers import SerializerType, pickle_serializer

from .. import Client
from . import NO_SLIDING

__all__ = ["HalcyonCache", "HalcyonDict", "DEFAULT_TTL_OFFSET"]

_MISS: Any = object()

#: Seconds an expired response is kept past its expiry, as for the Redis backend.
DEFAULT_TTL_OFFSET = 3600


class HalcyonCache(BaseCache):
    """requests-cache's ``BaseCache`` on a ``halcyond``.

    Args:
        namespace: the prefix of every key (the cache's name).
        socket_path: the daemon's socket (default: the client's own lookup).
        serializer: how responses are stored (default: pickle).
        ttl: give responses that expire a daemon-side lifetime (default True).
        ttl_offset: seconds added to that lifetime (default 3600).
        kwargs: passed to ``BaseCache`` and the storage (e.g. ``decode_content``).

    Threading: thread-safe; both collections share one :class:`halcyon.Client`.
    """

    def __init__(self, namespace: str = "http_cache", socket_path: Optional[str] = None,
                 serializer: Optional[SerializerType] = None, ttl: bool = True,
                 ttl_offset: int = DEFAULT_TTL_OFFSET, **kwargs: Any) -> None:
        super().__init__(cache_name=namespace, **kwargs)
        skwargs = {"serializer": serializer, **kwargs} if serializer else kwargs
        self.responses: HalcyonDict = HalcyonDict(
            namespace, "responses", socket_path=socket_path, ttl=ttl, ttl_offset=ttl_offset, **skwargs)
        self.redirects: HalcyonDict = HalcyonDict(
            namespace, "redirects", connection=self.responses.connection, serializer=None, ttl=False, **kwargs)


class HalcyonDict(BaseStorage[str, Any]):
    """A dict-like collection of the daemon's keys ``<namespace>:<collection_name>:<key>``
    (``<namespace>:<key>`` without a collection name), shaped like ``RedisDict``.

    Values go through ``serializer`` (default pickle); ``None`` stores them as they
    are (bytes, str or anything JSON can hold). Iteration lists the collection's keys
    with ``cache.keys`` (each present key once); ``clear`` is one ``cache.removePrefix``.

    Threading: thread-safe (one :class:`halcyon.Client`).
    """

    def __init__(self, namespace: str, collection_name: Optional[str] = None, socket_path: Optional[str] = None,
                 connection: Optional[Client] = None, serializer: Optional[SerializerType] = pickle_serializer,
                 ttl: bool = True, ttl_offset: int = DEFAULT_TTL_OFFSET, **kwargs: Any) -> None:
        super().__init__(serializer=serializer, **kwargs)
        self.connection = connection or Client(socket_path, extend=NO_SLIDING)
        self.namespace = namespace
        self.collection_name = collection_name
        self.prefix = f"{namespace}:" if collection_name is None else f"{namespace}:{collection_name}:"
        self.ttl = ttl
        self.ttl_offset = ttl_offset

    def _key(self, key: str) -> str:
        return self.prefix + key

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.connection.exists(self._key(key))

    def __getitem__(self, key: str) -> Any:
        value = self.connection.get(self._key(key), _MISS)
        if value is _MISS:
            raise KeyError(key)
        return self.deserialize(key, value)

    def __setitem__(self, key: str, item: Any) -> None:
        expire: Any = "never"
        expires_delta = getattr(item, "expires_delta", None)
        if self.ttl and expires_delta is not None:
            seconds = expires_delta + self.ttl_offset
            if seconds > 0:
                expire = seconds
        self.connection.set(self._key(key), self.serialize(item), expire)

    def __delitem__(self, key: str) -> None:
        if not self.connection.delete(self._key(key)):
            raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        yield from self.keys()

    def __len__(self) -> int:
        return sum(1 for _ in self.connection.keys(self.prefix))

    def keys(self) -> Iterator[str]:  # type: ignore[override]
        cut = len(self.prefix)
        for name in self.connection.keys(self.prefix):
            yield name[cut:]

    def items(self) -> Iterator[Any]:  # type: ignore[override]
        for key in self.keys():
            try:
                yield key, self[key]
            except KeyError:
                pass  # removed (or expired) since it was listed

    def values(self) -> Iterator[Any]:  # type: ignore[override]
        for _, value in self.items():
            yield value

    def bulk_delete(self, keys: Iterable[str]) -> None:
        names = [self._key(k) for k in keys]
        if names:
            self.connection.delete_many(names)

    def clear(self) -> None:
        self.connection.remove_prefix(self.prefix)

    def close(self) -> None:
        self.connection.close()
