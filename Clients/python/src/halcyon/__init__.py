"""Python client for Halcyon, the local cache daemon.

::

    import halcyon
    c = halcyon.Client()                 # $HALCYON_SOCKET or the daemon's default socket
    c.set("a", b"x", expire=60)          # bytes, str or any JSON-able value
    c.get("a")                           # -> b'x' (the type that was stored)

Contents: :class:`Client` (blocking, thread-safe), :class:`Pipeline` (many calls, one
write), :mod:`halcyon.aio` (:class:`~halcyon.aio.AsyncClient` for asyncio),
:mod:`halcyon.errors` (exceptions keyed by the protocol's ``data.reason``).
Standard library only; Python 3.9+.
"""

from . import errors
from ._wire import Description, Entry, Expire, Lease, LeaseStatus, Removed, default_socket_path, resolve_socket_path, socket_candidates
from .client import Client, Pipeline
from .duration import parse_duration
from .memoize import AsyncMemoized, Memoized
from .errors import (
    CancelledError,
    HalcyonConnectionError,
    HalcyonError,
    HalcyonTimeoutError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    OverloadedError,
    ProtocolError,
    StorageError,
    UpstreamError,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Pipeline",
    "Entry",
    "Description",
    "Lease",
    "LeaseStatus",
    "Removed",
    "Memoized",
    "AsyncMemoized",
    "parse_duration",
    "Expire",
    "default_socket_path",
    "resolve_socket_path",
    "socket_candidates",
    "errors",
    "HalcyonError",
    "ProtocolError",
    "InvalidRequestError",
    "MethodNotFoundError",
    "InvalidParamsError",
    "CancelledError",
    "StorageError",
    "OverloadedError",
    "UpstreamError",
    "HalcyonConnectionError",
    "HalcyonTimeoutError",
]
