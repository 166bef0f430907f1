"""Exceptions raised by the Halcyon clients.

Every error the daemon sends carries a JSON-RPC ``code`` and a stable camelCase
``data.reason`` (PROTOCOL.md section 2). The client turns it into an exception whose
class is chosen by the reason first, then by the code family, so a program can catch
as narrowly or as broadly as it likes::

    try:
        client.set("k" * 5000, b"x")
    except halcyon.errors.KeyTooLongError:        # exactly this reason
        ...
    except halcyon.InvalidParamsError:            # any -32602
        ...
    except halcyon.HalcyonError:                  # anything from Halcyon
        ...

The hierarchy by code::

    HalcyonError
    +-- ProtocolError            -32700 / -32600 / -32601 / -32602 / -32603
    |   +-- ParseError           -32700
    |   +-- InvalidRequestError  -32600 (LineTooLongError, BatchTooLargeError)
    |   +-- MethodNotFoundError  -32601 (DebugMethodsDisabledError)
    |   +-- InvalidParamsError   -32602 (KeyTooLongError, ValueTooLargeError, EmptyKeyError, ...)
    |   +-- InternalError        -32603
    +-- CancelledError           -32800 (not asyncio.CancelledError)
    +-- StorageError             -32001 .. -32004
    |   +-- StorageNotReadyError -32001 (DiskStorageIsNotReadyError)
    |   +-- CannotWriteError     -32002 (CannotCreateCacheFileError, ...)
    |   +-- CannotReadError      -32003 (CannotLoadDataFromDiskError)
    |   +-- CannotEncodeError    -32004
    +-- OverloadedError          -32005 (TooManyInFlightError, TooManyConnectionsError, ShuttingDownError,
    |                                    PeerNotAllowedError)
    +-- UpstreamError            -32006 (UpstreamUnavailableError, UpstreamAuthenticationFailedError, UpstreamRefusedError)
    +-- HalcyonConnectionError   (also a builtin ConnectionError): cannot reach the daemon
    +-- HalcyonTimeoutError      (also a builtin TimeoutError): no answer in time

A reason this module does not know yet still gets a class of its own, made on first
use as a subclass of its code family (``for_reason("fooBar", code)`` returns
``FooBarError``), so ``except`` clauses keep working when the daemon grows a reason.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Mapping, Optional, Tuple, Type, cast

__all__ = [
    "HalcyonError",
    "ProtocolError",
    "ParseError",
    "InvalidRequestError",
    "MethodNotFoundError",
    "InvalidParamsError",
    "InternalError",
    "CancelledError",
    "StorageError",
    "StorageNotReadyError",
    "CannotWriteError",
    "CannotReadError",
    "CannotEncodeError",
    "OverloadedError",
    "HalcyonConnectionError",
    "HalcyonTimeoutError",
    "LineTooLongError",
    "BatchTooLargeError",
    "KeyTooLongError",
    "ValueTooLargeError",
    "InvalidKeyError",
    "UnknownParamError",
    "DiskStorageIsNotReadyError",
    "CannotCreateCacheFileError",
    "CannotSetCacheFileAttributeError",
    "CannotLoadDataFromDiskError",
    "CannotRemoveCacheFileError",
    "RequestCancelledError",
    "EmptyKeyError",
    "MissingParamError",
    "WrongTypeError",
    "NotAnIntegerError",
    "IntegerOverflowError",
    "InvalidCursorError",
    "TooManyKeysError",
    "EmptyPrefixError",
    "NoUpstreamError",
    "TooManyLeaseWaitersForKeyError",
    "TooManyLeaseWaitersError",
    "TooManyConnectionsError",
    "PeerNotAllowedError",
    "TooManyInFlightError",
    "ShuttingDownError",
    "DebugMethodsDisabledError",
    "for_reason",
    "from_reply",
]


class HalcyonError(Exception):
    """Base of every exception this package raises.

    Attributes:
        message: the daemon's human-readable text (or the client's own).
        code: the JSON-RPC error code, or ``None`` for client-side failures.
        reason: the protocol's ``data.reason`` (stable camelCase), or ``None``.
        data: the whole ``data`` object of the error reply (empty when none).
    """

    def __init__(
        self,
        message: str,
        code: Optional[int] = None,
        reason: Optional[str] = None,
        data: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.data: Dict[str, Any] = dict(data or {})

    def __str__(self) -> str:
        if self.reason:
            return f"{self.message} [{self.reason}]"
        return self.message


class ProtocolError(HalcyonError):
    """The request was malformed or named something the daemon does not know."""


class ParseError(ProtocolError):
    """-32700: the line the daemon read was not JSON."""


class InvalidRequestError(ProtocolError):
    """-32600: a JSON value that is not a request, a line too long, a batch too large."""


class MethodNotFoundError(ProtocolError):
    """-32601: unknown method (``debug.*`` without ``--enable-debug-methods``, too)."""


class InvalidParamsError(ProtocolError, ValueError):
    """-32602: a missing/ill-typed/unknown param, a bad key, expiration or encoding."""


class InternalError(ProtocolError):
    """-32603: a bug in the daemon; never caused by bad input."""


class CancelledError(HalcyonError):
    """-32800: the request was cancelled (``data.started`` tells whether it ran).

    Not related to :class:`asyncio.CancelledError`.
    """

    @property
    def started(self) -> Optional[bool]:
        """Whether the work ran before the reply was withdrawn (its effects stand)."""
        value = self.data.get("started")
        return value if isinstance(value, bool) else None


class StorageError(HalcyonError):
    """-32001 .. -32004: the cache folder or a stored file could not be used."""

    @property
    def errno(self) -> Optional[int]:
        """The errno behind the failure when the daemon reports one."""
        value = self.data.get("errno")
        return value if isinstance(value, int) else None


class StorageNotReadyError(StorageError):
    """-32001: the cache folder could not be created or used."""


class CannotWriteError(StorageError):
    """-32002: the value could not be stored (disk full, permissions)."""


class CannotReadError(StorageError):
    """-32003: a stored file could not be read back."""


class CannotEncodeError(StorageError):
    """-32004: the stored bytes cannot be shown in the requested encoding."""


class OverloadedError(HalcyonError):
    """-32005: a configured limit (in-flight requests, connections) was hit; retry later."""


class UpstreamError(HalcyonError):
    """-32006: a shared key's Redis or Valkey (the daemon's ``--upstream``) could not be
    reached or refused the command; nothing was stored on the daemon's host."""


class UpstreamUnavailableError(UpstreamError):
    """``upstreamUnavailable``: unreachable; a write may or may not have reached it."""


class UpstreamAuthenticationFailedError(UpstreamUnavailableError):
    """``upstreamAuthenticationFailed``: unreachable because the upstream refused the
    daemon's credentials (``WRONGPASS``/``NOAUTH``: a changed password or ACL user)."""


class UpstreamRefusedError(UpstreamError):
    """``upstreamRefused``: the upstream refused the command."""


class HalcyonConnectionError(HalcyonError, ConnectionError):
    """The daemon could not be reached, or the connection broke mid-call."""


class HalcyonTimeoutError(HalcyonError, TimeoutError):
    """No reply within the call's timeout. The request is cancelled on the daemon."""


# Reason-keyed classes the protocol and the storage engine already name.
class LineTooLongError(InvalidRequestError):
    """``lineTooLong``: the request line exceeded ``--max-line-bytes``."""


class BatchTooLargeError(InvalidRequestError):
    """``batchTooLarge``: the batch held more than ``--max-batch`` elements."""


class KeyTooLongError(InvalidParamsError):
    """``keyTooLong``: the key is longer than 4096 UTF-8 bytes."""


class ValueTooLargeError(InvalidParamsError):
    """``valueTooLarge``: no tier could keep the value: it is larger than the whole size
    limit of the tier it would live in. ``tier`` (``"disk"`` or ``"memory"``) and
    ``limit`` (bytes) say which; a disk entry counts its file: header, key and value."""

    @property
    def tier(self) -> Optional[str]:
        return cast(Optional[str], self.data.get("tier"))

    @property
    def limit(self) -> Optional[int]:
        return cast(Optional[int], self.data.get("limit"))


class InvalidKeyError(InvalidParamsError):
    """``invalidKey``: the key cannot be used (e.g. empty, or not a file name)."""


class UnknownParamError(InvalidParamsError):
    """``unknownParam``: the params object held a member the method does not take."""


class MissingParamError(InvalidParamsError):
    """``missingParam``: a required member (``data.param``) is absent."""


class WrongTypeError(InvalidParamsError):
    """``wrongType``: a member has the wrong JSON type (``data.expected``)."""


class EmptyKeyError(InvalidParamsError):
    """``emptyKey``: the key is the empty string."""


class NotAnIntegerError(InvalidParamsError):
    """``incr``/``decr`` met a value that is not a JSON integer (``notAnInteger``)."""


class IntegerOverflowError(InvalidParamsError):
    """``incr``/``decr`` would leave the 64-bit signed range (``integerOverflow``)."""


class InvalidCursorError(InvalidParamsError):
    """A ``keys`` cursor that did not come from this daemon's last replies (``invalidCursor``)."""


class TooManyKeysError(InvalidParamsError):
    """A ``get_many``/``set_many`` over the daemon's ``--max-batch`` (``tooManyKeys``)."""


class EmptyPrefixError(InvalidParamsError):
    """``remove_prefix("")``: removing everything is ``clear`` (``emptyPrefix``)."""


class NoUpstreamError(InvalidParamsError):
    """``clear(shared=True)`` on a daemon that shares no keys: it runs without
    ``--upstream`` (``noUpstream``)."""


class TooManyLeaseWaitersForKeyError(OverloadedError):
    """Too many callers already wait for this key's lease (``tooManyLeaseWaitersForKey``)."""


class TooManyLeaseWaitersError(OverloadedError):
    """Too many callers already wait for leases (``tooManyLeaseWaiters``)."""


class TooManyConnectionsError(OverloadedError):
    """``tooManyConnections``: the daemon is at ``--max-connections``."""


class PeerNotAllowedError(OverloadedError):
    """``peerNotAllowed``: the daemon's peer check refused this user (``data.uid``); it
    admits its own user, root, ``--allow-uid`` and ``--allow-gid``. Retrying will not help."""


class TooManyInFlightError(OverloadedError):
    """``tooManyInFlight``: the daemon is at ``--max-in-flight`` requests."""


class ShuttingDownError(OverloadedError):
    """``shuttingDown``: the daemon is draining after SIGTERM; reconnect later."""


class DebugMethodsDisabledError(MethodNotFoundError):
    """``debugMethodsDisabled``: ``debug.*`` needs ``halcyond --enable-debug-methods``."""


class DiskStorageIsNotReadyError(StorageNotReadyError):
    """``diskStorageIsNotReady``: the cache folder is unusable."""


class CannotCreateCacheFileError(CannotWriteError):
    """``cannotCreateCacheFile``: the value's file could not be written."""


class CannotSetCacheFileAttributeError(CannotWriteError):
    """``cannotSetCacheFileAttribute``: the file's expiration could not be set."""


class CannotLoadDataFromDiskError(CannotReadError):
    """``cannotLoadDataFromDisk``: a stored file could not be read."""


class CannotRemoveCacheFileError(CannotWriteError):
    """``cannotRemoveCacheFile``: a stored file could not be removed."""


class RequestCancelledError(CancelledError):
    """``requestCancelled``: cancelled by ``$/cancelRequest`` or a disconnect."""


_CODE_FAMILIES: Dict[int, Type[HalcyonError]] = {
    -32700: ParseError,
    -32600: InvalidRequestError,
    -32601: MethodNotFoundError,
    -32602: InvalidParamsError,
    -32603: InternalError,
    -32800: CancelledError,
    -32001: StorageNotReadyError,
    -32002: CannotWriteError,
    -32003: CannotReadError,
    -32004: CannotEncodeError,
    -32005: OverloadedError,
    -32006: UpstreamError,
}

# Guarded by _registry_lock: classes for unknown reasons are made on first use, and
# two threads meeting the same new reason must get the same class.
_registry_lock = threading.Lock()
_BY_REASON: Dict[Tuple[str, Optional[int]], Type[HalcyonError]] = {
    ("lineTooLong", -32600): LineTooLongError,
    ("batchTooLarge", -32600): BatchTooLargeError,
    ("keyTooLong", -32602): KeyTooLongError,
    ("valueTooLarge", -32602): ValueTooLargeError,
    ("invalidKey", -32602): InvalidKeyError,
    ("unknownParam", -32602): UnknownParamError,
    ("diskStorageIsNotReady", -32001): DiskStorageIsNotReadyError,
    ("cannotCreateCacheFile", -32002): CannotCreateCacheFileError,
    ("cannotSetCacheFileAttribute", -32002): CannotSetCacheFileAttributeError,
    ("cannotLoadDataFromDisk", -32003): CannotLoadDataFromDiskError,
    ("cannotRemoveCacheFile", -32002): CannotRemoveCacheFileError,
    ("requestCancelled", -32800): RequestCancelledError,
    ("emptyKey", -32602): EmptyKeyError,
    ("missingParam", -32602): MissingParamError,
    ("wrongType", -32602): WrongTypeError,
    ("notAnInteger", -32602): NotAnIntegerError,
    ("integerOverflow", -32602): IntegerOverflowError,
    ("invalidCursor", -32602): InvalidCursorError,
    ("tooManyKeys", -32602): TooManyKeysError,
    ("upstreamUnavailable", -32006): UpstreamUnavailableError,
    ("upstreamAuthenticationFailed", -32006): UpstreamAuthenticationFailedError,
    ("upstreamRefused", -32006): UpstreamRefusedError,
    ("emptyPrefix", -32602): EmptyPrefixError,
    ("noUpstream", -32602): NoUpstreamError,
    ("tooManyLeaseWaitersForKey", -32005): TooManyLeaseWaitersForKeyError,
    ("tooManyLeaseWaiters", -32005): TooManyLeaseWaitersError,
    ("tooManyConnections", -32005): TooManyConnectionsError,
    ("peerNotAllowed", -32005): PeerNotAllowedError,
    ("tooManyInFlight", -32005): TooManyInFlightError,
    ("shuttingDown", -32005): ShuttingDownError,
    ("debugMethodsDisabled", -32601): DebugMethodsDisabledError,
    # Reasons that name their whole code family map to the family's class itself.
    ("methodNotFound", -32601): MethodNotFoundError,
    ("internalError", -32603): InternalError,
    ("cannotEncode", -32004): CannotEncodeError,
}
# A known reason keeps its class whatever code it arrives with.
_KNOWN_REASONS: Dict[str, Type[HalcyonError]] = {r: c for (r, _), c in _BY_REASON.items()}


def _class_name(reason: str) -> str:
    cleaned = "".join(ch for ch in reason if ch.isalnum() or ch == "_")
    if not cleaned or not cleaned[0].isalpha():
        cleaned = "Reason" + cleaned
    return cleaned[0].upper() + cleaned[1:] + "Error"


def for_reason(reason: Optional[str], code: Optional[int] = None) -> Type[HalcyonError]:
    """Return the exception class for a ``data.reason`` (and code family).

    Known reasons map to the classes above. An unknown reason gets a new subclass of
    its code family, made once and reused. Without a reason the code family is used;
    with neither, :class:`HalcyonError`.
    """
    family = _CODE_FAMILIES.get(code, HalcyonError) if code is not None else HalcyonError
    if not reason:
        return family
    known = _KNOWN_REASONS.get(reason)
    if known is not None:
        return known
    with _registry_lock:
        cls = _BY_REASON.get((reason, code))
        if cls is None:
            cls = type(_class_name(reason), (family,), {
                "__doc__": f"``{reason}`` (made at run time for code {code}).",
                "__module__": __name__,
            })
            _BY_REASON[(reason, code)] = cls
        return cls


def from_reply(error: Any) -> HalcyonError:
    """Build the exception for a JSON-RPC ``error`` member (tolerates malformed ones)."""
    if not isinstance(error, dict):
        return ProtocolError(f"malformed error reply: {error!r}")
    code = error.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    message = error.get("message")
    message = message if isinstance(message, str) else "error"
    data = error.get("data")
    data = data if isinstance(data, dict) else {}
    reason = data.get("reason")
    reason = reason if isinstance(reason, str) else None
    return for_reason(reason, code)(message, code, reason, data)
