"""Cache backends for Python frameworks, each an optional extra of ``halcyon-cache``:

- :mod:`halcyon.contrib.django`: a Django ``CACHES`` backend (``halcyon-cache[django]``);
- :mod:`halcyon.contrib.dogpile`: the dogpile.cache backend ``"halcyon"``
  (``halcyon-cache[dogpile]``);
- :mod:`halcyon.contrib.cachelib`: a ``cachelib.BaseCache``, e.g. for Flask-Caching
  (``halcyon-cache[cachelib]``);
- :mod:`halcyon.contrib.requests_cache`: a requests-cache backend
  (``halcyon-cache[requests-cache]``).

Importing this package imports no framework; each module imports only its own.
Docs/FRAMEWORKS.md gives a settings snippet per framework and the semantics chosen.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Union

from .. import Client
from .._wire import Expire

__all__ = ["PerThreadClients", "pickle_codec"]


class PerThreadClients:
    """One :class:`halcyon.Client` per thread, all on one socket, made on first use.

    Backends use it where one thread may wait on the daemon while another must go on:
    a lease that waits holds its client's connection, and a lease lives as long as the
    connection that took it, so each thread takes its locks on a connection of its own.
    Every client made is kept (guarded by ``_lock``) so :meth:`close` reaches them all.

    Threading: thread-safe.
    """

    def __init__(self, path: Optional[str], timeout: Optional[float], extend: Any = None) -> None:
        self.path = path
        self.timeout = timeout
        self._extend = extend
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: List[Client] = []

    def get(self) -> Client:
        """This thread's client."""
        client: Optional[Client] = getattr(self._local, "client", None)
        if client is None:
            client = Client(self.path, self.timeout, extend=self._extend)
            self._local.client = client
            with self._lock:
                self._all.append(client)
        return client

    def close(self) -> None:
        """Close every thread's connection (a later call reopens its own)."""
        with self._lock:
            clients, self._all = self._all, []
        self._local = threading.local()
        for client in clients:
            client.close()


#: The ``extend`` every backend's clients get: every framework here counts a timeout
#: from the write, never from the last read.
NO_SLIDING = False


def clear_keys(client: Client, prefix: str) -> None:
    """A framework's ``clear()``: the keys starting with its prefix, or without a prefix
    every key of the daemon (as the Redis backends' ``FLUSHDB``)."""
    if prefix:
        client.remove_prefix(prefix)
    else:
        client.clear()


def seconds_or_never(seconds: Optional[Union[int, float]]) -> Expire:
    """A framework's "no expiry" (``None``) as the protocol's ``"never"``; any other
    number as seconds (0 or less: already expired)."""
    return "never" if seconds is None else seconds


def pickle_codec(protocol: Optional[int] = None) -> "tuple[Callable[[Any], bytes], Callable[[bytes], Any]]":
    """The codec Django's and cachelib's Redis backends use, so their values and
    Halcyon's read the same: an ``int`` (not a ``bool``) as its decimal digits, which
    ``incr`` can add to in place, anything else pickled."""
    import pickle

    proto = pickle.HIGHEST_PROTOCOL if protocol is None else protocol

    def dumps(value: Any) -> bytes:
        if type(value) is int:
            return b"%d" % value
        return pickle.dumps(value, proto)

    def loads(data: bytes) -> Any:
        try:
            return int(data)
        except ValueError:
            return pickle.loads(data)

    return dumps, loads
