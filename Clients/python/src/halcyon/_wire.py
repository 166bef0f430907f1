"""What every Halcyon client shares: socket discovery, value and expiration encoding,
request framing, and one :class:`Command` per protocol method.

A :class:`Command` is a method name, its params and how to turn the result into the
Python value the caller gets. The sync client, its pipeline and batch, and the asyncio
client all build the same commands here, so the wire rules live in one place and the
clients only differ in how they move bytes.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import json
import json.scanner
import os
import stat
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast

from . import errors
from .duration import parse_duration

__all__ = [
    "default_socket_path",
    "socket_candidates",
    "resolve_socket_path",
    "encode_value",
    "decode_value",
    "to_expiration",
    "to_extending",
    "Entry",
    "Description",
    "Lease",
    "LeaseStatus",
    "Many",
    "Command",
    "Expire",
]

#: What ``expire`` may be: seconds (int/float), a timedelta, an aware or naive
#: datetime (naive = local time), ``"never"``, ``"expired"``, a duration string of
#: Docs/DURATIONS.md (``"1h30m"``, ``"5min"``), or a protocol object
#: such as ``{"days": 7}``. ``None`` means "the daemon's default".
Expire = Union[None, int, float, _dt.timedelta, _dt.datetime, str, Mapping[str, Any]]

#: Sentinel for "argument not given" where ``None`` is meaningful.
_MISSING: Any = object()


def default_socket_path() -> str:
    """Where the daemon binds by default: ``$XDG_RUNTIME_DIR/halcyon/halcyon.sock``,
    else ``/tmp/halcyon-<uid>/halcyon.sock`` (PROTOCOL.md section 1)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "halcyon", "halcyon.sock")
    return f"/tmp/halcyon-{os.getuid()}/halcyon.sock"


def socket_candidates(environ: Optional[Mapping[str, str]] = None, uid: Optional[int] = None) -> "list[str]":
    """The documented places a daemon listens, in the order clients try them:
    ``$XDG_RUNTIME_DIR/halcyon/halcyon.sock`` (when set), ``/run/user/<uid>/halcyon/halcyon.sock``
    (a user daemon seen from cron, which sets no ``XDG_RUNTIME_DIR``),
    ``/tmp/halcyon-<uid>/halcyon.sock``, then the system-wide ``/run/halcyon/halcyon.sock``."""
    env = os.environ if environ is None else environ
    user = os.getuid() if uid is None else uid
    found: "list[str]" = []
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        found.append(os.path.join(runtime, "halcyon", "halcyon.sock"))
    for path in (f"/run/user/{user}/halcyon/halcyon.sock", f"/tmp/halcyon-{user}/halcyon.sock",
                 "/run/halcyon/halcyon.sock"):
        if path not in found:
            found.append(path)
    return found


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def resolve_socket_path(path: Optional[Union[str, "os.PathLike[str]"]] = None) -> str:
    """Find the socket the way the ``halcyon`` command does: the explicit ``path``, then
    ``$HALCYON_SOCKET``, then the first of :func:`socket_candidates` that is a socket,
    else :func:`default_socket_path` (so an error names where the daemon would be)."""
    if path is not None:
        return os.fspath(path)
    env = os.environ.get("HALCYON_SOCKET")
    if env:
        return env
    for candidate in socket_candidates():
        if _is_socket(candidate):
            return candidate
    return default_socket_path()


# ---------------------------------------------------------------- values

def encode_value(value: Any) -> Tuple[Any, str]:
    """Return ``(wire_value, encoding)`` for a Python value.

    ``bytes``/``bytearray``/``memoryview`` go as ``"base64"``, ``str`` as ``"utf8"``,
    anything else JSON can hold (None, bool, int, float, list, tuple, dict with str
    keys) as ``"json"``. NaN and infinities are refused (they are not JSON).

    Raises:
        TypeError: the value is not one of those.
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = value if type(value) is bytes else bytes(value)
        return _Base64Text(binascii.b2a_base64(raw, newline=False), "ascii"), "base64"
    if isinstance(value, str):
        return value, "utf8"
    try:
        # Checks JSON-ability now, so the error names the value, not the request.
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"halcyon can store bytes, str or JSON-able values, not {type(value).__name__}: {exc}"
        ) from None
    _check_json_value(value)
    return value, "json"


class _Base64Text(str):
    """The base64 text of a value, as :func:`encode_value` made it: only ``A-Z``,
    ``a-z``, ``0-9``, ``+``, ``/`` and ``=``, none of which JSON escapes. A request line
    takes it between quotes as it is, where the JSON encoder would copy it one character
    at a time looking for escapes (about 4 ns a character of the text: 5 µs for a 1 KiB
    value, 90 µs for 16 KiB)."""

    __slots__ = ()


if sys.version_info >= (3, 11):
    def _b64decode(text: str) -> bytes:
        # Strict mode refuses what ``b64decode(validate=True)`` refuses (and data after
        # the padding) without its regex pass over the value.
        return binascii.a2b_base64(text, strict_mode=True)
else:  # pragma: no cover - older Pythons
    def _b64decode(text: str) -> bytes:
        return base64.b64decode(text, validate=True)


_INT64 = range(-(2**63), 2**63)


def _check_json_value(value: Any) -> None:
    # What json.dumps lets through but would not read back as stored: integers beyond
    # 64 bits (the daemon's JSON parser holds 64-bit integers; a larger one would fail
    # the whole request line as a parse error) and dict keys that are not str (json.dumps
    # turns 1, 2.5, True and None into the strings "1", "2.5", "true", "null", so the
    # value would come back different).
    if isinstance(value, int) and not isinstance(value, bool):
        if value not in _INT64:
            raise TypeError(f"integer {value} does not fit in 64 bits; store it as a str")
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_json_value(item)
    elif isinstance(value, dict):
        for name, item in value.items():
            if not isinstance(name, str):
                raise TypeError(
                    f"dict keys must be str to round-trip through JSON, not {type(name).__name__} ({name!r})")
            _check_json_value(item)


def decode_value(wire: Any, encoding: Optional[str]) -> Any:
    """Turn a reply's ``value`` back into Python: base64 -> bytes, utf8 -> str, json -> the
    JSON value (lists stay lists: a stored tuple comes back as a list)."""
    if encoding == "base64":
        if not isinstance(wire, str):
            raise errors.ProtocolError(f"base64 value is not a string: {wire!r}")
        return _b64decode(wire)
    if encoding == "utf8":
        if not isinstance(wire, str):
            raise errors.ProtocolError(f"utf8 value is not a string: {wire!r}")
        return wire
    return wire


# ----------------------------------------------------------- expirations

def to_expiration(expire: Expire) -> Any:
    """Convert an ``expire`` argument to the protocol's ``StorageExpiration``.

    Seconds (int/float/timedelta) that are 0 or less become ``"expired"`` (the daemon
    then stores nothing). ``None`` returns ``None`` (leave the member out).

    Raises:
        TypeError: for any other type; ValueError for an unknown string.
    """
    if expire is None:
        return None
    if isinstance(expire, bool):
        raise TypeError("expire must be seconds, a timedelta, a datetime or a protocol form, not bool")
    if isinstance(expire, str):
        if expire.strip(" \t").lower() == "never":
            return "never"
        if expire == "expired":
            return expire
        # Any other string is a duration of the one grammar (Docs/DURATIONS.md); as
        # for the halcyon command, a zero-length lifetime is refused, not "expired".
        seconds = parse_duration(expire)
        if seconds <= 0:
            raise ValueError(f"expiration {expire!r} must be greater than zero")
        return {"seconds": seconds}
    if isinstance(expire, _dt.timedelta):
        expire = expire.total_seconds()
    if isinstance(expire, (int, float)):
        if expire != expire or expire in (float("inf"), float("-inf")):
            raise ValueError("expire must be finite")
        return {"seconds": expire} if expire > 0 else "expired"
    if isinstance(expire, _dt.datetime):
        return {"date": expire.timestamp()}
    if isinstance(expire, Mapping):
        return dict(expire)
    raise TypeError(f"unsupported expire type {type(expire).__name__}")


def to_extending(extend: Any) -> Any:
    """Convert an ``extend`` argument to the protocol's ``ExpirationExtending``.

    ``None`` leaves it out (daemon default ``"cacheTime"``: sliding expiration);
    ``False`` or ``"none"`` never extends; ``"cacheTime"`` is passed through; anything
    :func:`to_expiration` accepts resets the expiration to that, counted from now.
    """
    if extend is None:
        return None
    if extend is False or extend == "none":
        return "none"
    if extend is True or extend == "cacheTime":
        return "cacheTime"
    if isinstance(extend, Mapping) and "expirationTime" in extend:
        return dict(extend)
    return {"expirationTime": to_expiration(extend)}


# --------------------------------------------------------------- results

@dataclass(frozen=True)
class Entry:
    """A hit from :meth:`halcyon.Client.get_entry`.

    Attributes:
        value: the value, decoded by its encoding (bytes, str or a JSON value).
        encoding: ``"base64"``, ``"utf8"`` or ``"json"``.
        cache_type: the tier that answered, ``"memory"`` or ``"disk"``.
        expires_at: the entry's lifetime after this read's extension, whichever tier
            answered: Unix time in seconds, or ``None`` for never.
        version: changes on every write of the key and survives restarts; pass it to
            :meth:`halcyon.Client.cas` to store only if nobody wrote in between
            (``None`` only from a daemon older than protocol revision 2).
    """

    value: Any
    encoding: str
    cache_type: str
    expires_at: Optional[float]
    version: Optional[int] = None


@dataclass(frozen=True)
class Description:
    """What :meth:`halcyon.Client.describe` knows about a stored entry (never loads it).

    Attributes:
        cache_type: ``"memory"`` or ``"disk"``.
        size: the value's size in bytes.
        encoding: the encoding it was written with.
        expires_at: the entry's lifetime, whichever tier answered: Unix seconds after
            which no read returns it, or ``None`` for never.
        last_access_at: Unix seconds of the last read or write.
        memory_expires_at: when the memory copy leaves RAM unless read again (its
            residency; it never shortens the lifetime), or ``None`` when the entry has
            no memory copy. For an entry stored with ``to_disk=False`` it equals
            ``expires_at``.
        version: the entry's version (see :class:`Entry`).
    """

    cache_type: str
    size: int
    encoding: Optional[str]
    expires_at: Optional[float]
    last_access_at: Optional[float]
    memory_expires_at: Optional[float] = None
    version: Optional[int] = None


@dataclass(frozen=True)
class Lease:
    """What :meth:`halcyon.Client.lease` got: exactly one of these holds.

    Attributes:
        entry: the value was cached (a hit, possibly stored by another caller while
            this one waited).
        token: a miss, and this caller now holds the key's lease: compute the value
            and store it with ``set(..., lease=token)`` (or ``add``), or give the lease
            back with :meth:`halcyon.Client.release_lease`. The lease also ends at its
            ``ttl`` and when this client's connection closes.
        leased: a miss while another caller still held the lease after ``wait``.
    """

    entry: Optional[Entry] = None
    token: Optional[str] = None
    leased: bool = False


def _int_or_none(value: Any) -> Optional[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _number_or_none(value: Any) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _as_dict(result: Any) -> Dict[str, Any]:
    if not isinstance(result, dict):
        raise errors.ProtocolError(f"expected a result object, got {result!r}")
    return result


class Command:
    """One request to send and how to read its result.

    Attributes:
        method: the JSON-RPC method.
        params: the params object (``None``: no ``params`` member).
        decode: turns the reply's ``result`` into the caller's value.
        idempotent: running it twice has the effect of running it once, so the sync
            and async clients may resend it once after the connection broke between
            sending it and reading its reply.

    A plain class with slots rather than a frozen dataclass: a client builds one per
    call, and a frozen dataclass's ``__init__`` costs several times as much. Treat it
    as immutable.
    """

    __slots__ = ("method", "params", "decode", "idempotent", "_head")

    def __init__(self, method: str, params: Optional[Dict[str, Any]], decode: Callable[[Any], Any],
                 idempotent: bool) -> None:
        self.method = method
        self.params = params
        self.decode = decode
        self.idempotent = idempotent
        self._head: Optional[bytes] = None

    def __repr__(self) -> str:
        return f"Command({self.method!r}, {self.params!r})"

    def request(self, request_id: Optional[int]) -> Dict[str, Any]:
        """The request object (a notification when ``request_id`` is None)."""
        obj: Dict[str, Any] = {"jsonrpc": "2.0", "method": self.method}
        if self.params is not None:
            obj["params"] = self.params
        if request_id is not None:
            obj["id"] = request_id
        return obj

    def line(self, request_id: int) -> bytes:
        """The request line for ``request_id``, newline included. Everything but the id
        is encoded once per command (the id goes last), so a resend or a pipeline only
        joins bytes."""
        head = self._head
        if head is None:
            text = '{"jsonrpc":"2.0","method":' + _encode_string(self.method)
            params = self.params
            if params is not None:
                if len(params) == 1 and type(params.get("key")) is str:
                    # A plain single-key call (get, exists, describe): no encoder pass.
                    text += ',"params":{"key":' + _encode_string(params["key"]) + "}"
                elif type(params.get("value")) is _Base64Text:
                    # A write of bytes: the encoder passes over every member but the
                    # value, which goes last, as it is (JSON members have no order).
                    rest = dict(params)
                    value = rest.pop("value")
                    members = _encode(rest)[1:-1]
                    text += ',"params":{' + members + ("," if members else "") + '"value":"' + value + '"}'
                else:
                    text += ',"params":' + _encode(params)
            head = self._head = (text + ',"id":').encode("utf-8")
        return head + b"%d}\n" % request_id


#: Compact, UTF-8-preserving, NaN-refusing: the one encoder every request goes through
#: (``json.dumps`` with these options builds a new encoder on every call).
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
#: A JSON string literal for a str, escaping only what JSON requires (as ensure_ascii=False).
# Looked up by name: typeshed does not list it in every version mypy ships with.
_encode_string: Callable[[str], str] = getattr(json.encoder, "encode_basestring")
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
if _c_make_encoder is not None:
    # CPython's C encoder, built once: JSONEncoder.encode builds a new one on every call.
    # Arguments: markers (no cycle check), default, string encoder, indent, key and item
    # separators, sort_keys, skipkeys, allow_nan.
    def _no_default(o: Any) -> Any:
        raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")

    _c_encoder = _c_make_encoder(None, _no_default, _encode_string, None, ":", ",", False, False, False)

    def _encode(obj: Any) -> str:
        return "".join(_c_encoder(obj, 0))
else:  # pragma: no cover - other Pythons
    def _encode(obj: Any) -> str:
        return _ENCODE(obj)
_loads = json.loads
#: The decoder's scanner, called directly: ``json.loads`` wraps it in two Python-level
#: calls and two whitespace regex matches, which cost as much as the parse of a short
#: reply. Same settings as ``json.loads`` (strict strings, float, int, NaN allowed).
# Looked up by name, as _encode_string below: typeshed types its argument oddly.
_scan_once: Callable[[str, int], Tuple[Any, int]] = getattr(json.scanner, "make_scanner")(json.JSONDecoder())
_JSON_SPACE = " \t\n\r"


def _DECODE(data: bytes) -> Any:
    # Bytes are decoded as UTF-8 here: json.loads on bytes first sniffs the encoding,
    # and the daemon only sends UTF-8.
    text = data.decode("utf-8")
    if not text or text[0] in _JSON_SPACE:
        return _loads(text)  # leading space: the full parser, with its error messages
    try:
        obj, end = _scan_once(text, 0)
    except StopIteration:
        return _loads(text)  # not a JSON value: let json.loads raise its error
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        return _loads(text)  # extra data after the value: json.loads raises
    return obj


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON with the trailing newline that frames it."""
    return (_ENCODE(obj) + "\n").encode("utf-8")


def cancel_line(request_id: int) -> bytes:
    """The ``$/cancelRequest`` notification for a request we stopped waiting for."""
    return b'{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":%d}}\n' % request_id


def parse_line(line: bytes) -> List[Dict[str, Any]]:
    """Parse one reply line into its reply objects (a batch reply holds several)."""
    try:
        obj = _DECODE(line)
    except ValueError as exc:
        raise errors.ProtocolError(f"daemon sent a line that is not JSON: {exc}") from None
    items = obj if isinstance(obj, list) else [obj]
    for item in items:
        if not isinstance(item, dict):
            raise errors.ProtocolError(f"daemon sent a reply that is not an object: {item!r}")
    return items


def parse_lines(chunk: bytes) -> List[Dict[str, Any]]:
    """Parse complete reply lines (``\\n``-separated, no trailing newline) into their
    reply objects, in order, with one ``json.loads`` for all of them: the daemon never
    puts a raw newline inside a line, so the lines joined by commas form one array."""
    if b"\n" not in chunk:
        return parse_line(chunk) if chunk.strip() else []
    try:
        values = _DECODE(b"[" + chunk.replace(b"\n", b",") + b"]")
    except ValueError:
        # Not the daemon's usual framing (blank lines, CRs): line by line.
        out: List[Dict[str, Any]] = []
        for line in chunk.split(b"\n"):
            line = line.strip()
            if line:
                out.extend(parse_line(line))
        return out
    out = []
    for value in values:
        if type(value) is dict:
            out.append(value)
        elif isinstance(value, list):
            for item in value:
                if not isinstance(item, dict):
                    raise errors.ProtocolError(f"daemon sent a reply that is not an object: {item!r}")
            out.extend(value)
        else:
            raise errors.ProtocolError(f"daemon sent a reply that is not an object: {value!r}")
    return out


def outcome(reply: Dict[str, Any], command: Command) -> Any:
    """The decoded result of a reply, or the exception it carries (returned, not raised)."""
    if "error" in reply:
        return errors.from_reply(reply["error"])
    try:
        return command.decode(reply.get("result"))
    except errors.HalcyonError as exc:
        return exc
    except (ValueError, KeyError, TypeError) as exc:
        return errors.ProtocolError(f"unexpected result for {command.method}: {exc}")


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"keys are str, not {type(key).__name__}")
    return key


def _put(params: Dict[str, Any], name: str, value: Any) -> None:
    # The daemon rejects unknown or null members it does not expect, so a member the
    # caller left at its default is not sent at all.
    if value is not None:
        params[name] = value


# -------------------------------------------------------------- commands
# One builder per protocol method. Names follow the Python API, params the spec.

def _write_params(key: str, value: Any, expire: Expire, memory_expire: Expire,
                  to_disk: Optional[bool], lease: Optional[str]) -> Dict[str, Any]:
    wire, encoding = encode_value(value)
    params: Dict[str, Any] = {"key": _key(key), "value": wire, "encoding": encoding}
    _put(params, "expiration", to_expiration(expire))
    _put(params, "memoryExpiration", to_expiration(memory_expire))
    _put(params, "toDisk", to_disk)
    _put(params, "lease", lease)
    return params


def _stored(result: Any) -> bool:
    return bool(_as_dict(result)["stored"])


def cmd_set(key: str, value: Any, expire: Expire = None, *, memory_expire: Expire = None,
            to_disk: Optional[bool] = None, lease: Optional[str] = None) -> Command:
    params = _write_params(key, value, expire, memory_expire, to_disk, lease)
    return Command("cache.set", params, _stored, True)


def cmd_add(key: str, value: Any, expire: Expire = None, *, memory_expire: Expire = None,
            to_disk: Optional[bool] = None, lease: Optional[str] = None) -> Command:
    # Not resent after a broken connection: a resent add that had stored would say
    # "not stored" about its own write.
    params = _write_params(key, value, expire, memory_expire, to_disk, lease)
    return Command("cache.add", params, _stored, False)


def cmd_cas(key: str, value: Any, version: int, expire: Expire = None, *, memory_expire: Expire = None,
            to_disk: Optional[bool] = None) -> Command:
    if not isinstance(version, int) or isinstance(version, bool):
        raise TypeError(f"version must be an int (Entry.version), not {type(version).__name__}")
    params = _write_params(key, value, expire, memory_expire, to_disk, None)
    params["version"] = version
    return Command("cache.cas", params, _stored, False)


def cmd_incr(key: str, by: int = 1, *, initial: Optional[int] = None, expire: Expire = None,
             memory_expire: Expire = None, to_disk: Optional[bool] = None, create: bool = True) -> Command:
    """Decodes to the new value, or ``None`` when ``create`` is false and the key held
    no live entry (decided atomically on the daemon)."""
    for name, number in (("by", by), ("initial", initial)):
        if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
            raise TypeError(f"{name} must be an int, not {type(number).__name__}")
        if number is not None and number not in _INT64:
            raise ValueError(f"{name}={number} does not fit in 64 bits")
    params: Dict[str, Any] = {"key": _key(key), "by": by}
    _put(params, "initial", initial)
    _put(params, "expiration", to_expiration(expire))
    _put(params, "memoryExpiration", to_expiration(memory_expire))
    _put(params, "toDisk", to_disk)
    if not create:
        params["create"] = False

    def decode(result: Any) -> Optional[int]:
        value = _as_dict(result)["value"]
        return None if value is None else int(value)

    return Command("cache.incr", params, decode, False)


def cmd_get_many(keys: Sequence[str], default: Any = _MISSING, *, extend: Any = None,
                 memory_only: Optional[bool] = None, encoding: Optional[str] = None) -> Command:
    """Decodes to ``{key: value}`` in request order: hits only, unless ``default`` is
    given, which then stands for every miss."""
    _check_encoding(encoding)
    names = [_key(k) for k in keys]
    params: Dict[str, Any] = {"keys": names}
    _put(params, "encoding", encoding)
    _put(params, "extendingExpiration", to_extending(extend))
    _put(params, "fromMemoryOnly", memory_only or None)

    def decode(result: Any) -> Dict[str, Any]:
        entries = _as_dict(result)["entries"]
        if not isinstance(entries, list) or len(entries) != len(names):
            raise errors.ProtocolError(f"cache.getMany answered {len(entries)} entries for {len(names)} keys")
        out: Dict[str, Any] = {}
        for name, item in zip(names, entries):
            entry = _entry(item)
            if entry is not None:
                out[name] = entry.value
            elif default is not _MISSING:
                out[name] = default
        return out

    return Command("cache.getMany", params, decode, True)


def cmd_set_many(mapping: Mapping[str, Any], expire: Expire = None, *, memory_expire: Expire = None,
                 to_disk: Optional[bool] = None) -> Command:
    """Decodes to ``{key: version or None}`` in the mapping's order (None: not stored)."""
    expiration = to_expiration(expire)
    memory_expiration = to_expiration(memory_expire)
    names: List[str] = []
    items: List[Dict[str, Any]] = []
    for key, value in mapping.items():
        wire, encoding = encode_value(value)
        item: Dict[str, Any] = {"key": _key(key), "value": wire, "encoding": encoding}
        _put(item, "expiration", expiration)
        _put(item, "memoryExpiration", memory_expiration)
        names.append(key)
        items.append(item)
    params: Dict[str, Any] = {"entries": items}
    _put(params, "toDisk", to_disk)

    def decode(result: Any) -> Dict[str, Optional[int]]:
        versions = _as_dict(result)["versions"]
        if not isinstance(versions, list) or len(versions) != len(names):
            raise errors.ProtocolError("cache.setMany answered a versions list of the wrong length")
        return {name: _int_or_none(v) for name, v in zip(names, versions)}

    return Command("cache.setMany", params, decode, True)


def cmd_remove_many(keys: Sequence[str], *, memory: Optional[bool] = None,
                    disk: Optional[bool] = None) -> Command:
    """Decodes to ``[bool]``: per key, in order, whether it held an entry."""
    names = [_key(k) for k in keys]
    params: Dict[str, Any] = {"keys": names}
    _put(params, "fromMemory", memory)
    _put(params, "fromDisk", disk)

    def decode(result: Any) -> List[bool]:
        found = _as_dict(result)["found"]
        if not isinstance(found, list) or len(found) != len(names):
            raise errors.ProtocolError("cache.removeMany answered a found list of the wrong length")
        return [bool(f) for f in found]

    return Command("cache.removeMany", params, decode, True)


#: How many keys a multi-key request carries until the daemon says otherwise: the
#: daemon's default ``--max-batch``. A daemon with a lower limit answers
#: ``tooManyKeys`` with its ``limit``, and the client splits again at that size.
DEFAULT_MAX_KEYS = 1000


class Many:
    """A multi-key call of any size, split into requests of at most ``size`` keys that
    are sent together (one write, pipelined) and merged back in the caller's order.

    Each request is atomic on its own (one ioQueue step for ``setMany`` and
    ``removeMany``); a call split into several requests is not: another client's write
    may land between two of them.

    Attributes:
        build: makes the command for one slice of ``items``.
        items: the keys, or the ``(key, value)`` pairs.
        merge: folds the slices' results (in order) into the caller's value.
    """

    __slots__ = ("build", "items", "merge")

    def __init__(self, build: Callable[[Sequence[Any]], Command], items: Sequence[Any],
                 merge: Callable[[List[Any]], Any]) -> None:
        self.build = build
        self.items = items
        self.merge = merge

    def commands(self, size: int) -> List[Command]:
        """One command per slice of at most ``size`` items (one, even for no items)."""
        items = self.items
        if len(items) <= size:
            return [self.build(items)]
        return [self.build(items[i:i + size]) for i in range(0, len(items), size)]

    @staticmethod
    def smaller_limit(results: List[Any], size: int) -> Optional[int]:
        """The daemon's own limit when it refused a slice as too large (then the call
        is split again and resent: every slice is idempotent), else None."""
        for r in results:
            if isinstance(r, errors.TooManyKeysError):
                limit = r.data.get("limit")
                if isinstance(limit, int) and 0 < limit < size:
                    return limit
        return None

    def finish(self, results: List[Any]) -> Any:
        """The merged value, or the first slice's error raised."""
        for r in results:
            if isinstance(r, errors.HalcyonError):
                raise r
        return self.merge(results)


def _merge_dicts(parts: List[Any]) -> Dict[str, Any]:
    if len(parts) == 1:
        return cast(Dict[str, Any], parts[0])
    out: Dict[str, Any] = {}
    for part in parts:
        out.update(part)
    return out


def _merge_lists(parts: List[Any]) -> List[Any]:
    out: List[Any] = []
    for part in parts:
        out.extend(part)
    return out


def many_get(keys: Sequence[str], default: Any = _MISSING, *, extend: Any = None,
             memory_only: Optional[bool] = None, encoding: Optional[str] = None) -> Many:
    """``get_many`` of any size: decodes to ``{key: value}`` as :func:`cmd_get_many`."""
    return Many(lambda part: cmd_get_many(part, default, extend=extend, memory_only=memory_only, encoding=encoding),
                list(keys), _merge_dicts)


def many_set(mapping: Mapping[str, Any], expire: Expire = None, *, memory_expire: Expire = None,
             to_disk: Optional[bool] = None) -> Many:
    """``set_many`` of any size: decodes to ``{key: version or None}``."""
    return Many(lambda part: cmd_set_many(dict(part), expire, memory_expire=memory_expire, to_disk=to_disk),
                list(mapping.items()), _merge_dicts)


def many_remove(keys: Sequence[str], *, memory: Optional[bool] = None, disk: Optional[bool] = None) -> Many:
    """``delete_many`` of any size: decodes to ``[bool]`` per key, in order."""
    return Many(lambda part: cmd_remove_many(part, memory=memory, disk=disk), list(keys), _merge_lists)


def cmd_keys_page(prefix: str = "", cursor: Optional[str] = None, limit: Optional[int] = None) -> Command:
    """Decodes to ``(keys, next_cursor)``; ``next_cursor`` is None after the last page."""
    if not isinstance(prefix, str):
        raise TypeError(f"prefix is a str, not {type(prefix).__name__}")
    params: Dict[str, Any] = {}
    _put(params, "prefix", prefix or None)
    _put(params, "cursor", cursor)
    _put(params, "limit", limit)

    def decode(result: Any) -> Tuple[List[str], Optional[str]]:
        r = _as_dict(result)
        keys = r["keys"]
        if not isinstance(keys, list):
            raise errors.ProtocolError(f"cache.keys answered keys that are not a list: {keys!r}")
        nxt = r.get("cursor")
        return [str(k) for k in keys], nxt if isinstance(nxt, str) else None

    return Command("cache.keys", params or None, decode, True)


def cmd_remove_prefix(prefix: str) -> Command:
    if not isinstance(prefix, str):
        raise TypeError(f"prefix is a str, not {type(prefix).__name__}")
    return Command("cache.removePrefix", {"prefix": prefix}, _removed, True)


def cmd_lease(key: str, ttl: Expire, *, wait: Optional[float] = None, encoding: Optional[str] = None) -> Command:
    expiration = to_expiration(ttl)
    if expiration is None or expiration == "expired":
        raise ValueError("a lease needs a ttl greater than zero")
    params: Dict[str, Any] = {"key": _key(key), "ttl": expiration}
    if wait is not None:
        if wait < 0 or wait != wait:
            raise ValueError("wait must be 0 or more seconds")
        params["wait"] = wait
    _put(params, "encoding", encoding)

    def decode(result: Any) -> Lease:
        r = _as_dict(result)
        if r.get("found"):
            return Lease(entry=_entry(r))
        token = r.get("lease")
        if isinstance(token, str):
            return Lease(token=token)
        return Lease(leased=bool(r.get("leased")))

    # Never resent: a resent lease request could be told "leased" by its own lease.
    return Command("cache.lease", params, decode, False)


@dataclass(frozen=True)
class LeaseStatus:
    """A held lease, as :meth:`halcyon.Client.lease_status` sees it (without taking it).

    Attributes:
        expires_at: when the lease ends at the latest (its ``ttl``), Unix seconds, or
            ``None`` when it holds until written, released or its holder disconnects.
        waiters: callers waiting for it now.
    """

    expires_at: Optional[float]
    waiters: int


def cmd_lease_status(key: str) -> Command:
    def decode(result: Any) -> Optional[LeaseStatus]:
        r = _as_dict(result)
        if not r.get("leased"):
            return None
        return LeaseStatus(expires_at=_number_or_none(r.get("expiresAt")), waiters=int(r.get("waiters") or 0))

    return Command("cache.leaseStatus", {"key": _key(key)}, decode, True)


def cmd_release_lease(key: str, token: str) -> Command:
    return Command("cache.releaseLease", {"key": _key(key), "lease": token},
                   lambda r: bool(_as_dict(r)["released"]), True)


def ttl_from_description(description: Optional[Description], now: float) -> Optional[float]:
    """Seconds ``description``'s entry has left: ``None`` on a miss, ``math.inf`` when
    it never expires, never below 0."""
    if description is None:
        return None
    if description.expires_at is None:
        return float("inf")
    return max(0.0, description.expires_at - now)


def _get_params(key: str, extend: Any, memory_only: Optional[bool], encoding: Optional[str] = None) -> Dict[str, Any]:
    params: Dict[str, Any] = {"key": _key(key)}
    _put(params, "encoding", encoding)
    _put(params, "extendingExpiration", to_extending(extend))
    _put(params, "fromMemoryOnly", memory_only or None)
    return params


def _entry(result: Any) -> Optional[Entry]:
    r = _as_dict(result)
    if not r.get("found"):
        return None
    encoding = r.get("encoding")
    return Entry(
        value=decode_value(r.get("value"), encoding if isinstance(encoding, str) else None),
        encoding=str(encoding),
        cache_type=str(r.get("cacheType")),
        expires_at=_number_or_none(r.get("expiresAt")),
        version=_int_or_none(r.get("version")),
    )


def _check_encoding(encoding: Optional[str]) -> None:
    if encoding not in (None, "utf8", "base64", "json"):
        raise ValueError(f"encoding must be 'utf8', 'base64' or 'json', not {encoding!r}")


def _get_decoder(default: Any) -> Callable[[Any], Any]:
    def decode(result: Any) -> Any:
        # What _entry does, without building an Entry the caller never sees.
        if type(result) is not dict:
            result = _as_dict(result)
        if not result.get("found"):
            return default
        value = result.get("value")
        encoding = result.get("encoding")
        if encoding == "utf8" and type(value) is str:
            return value
        return decode_value(value, encoding if isinstance(encoding, str) else None)
    return decode


_decode_get = _get_decoder(None)
#: The commands of plain gets (no options, default None) by key: a hot key's request line
#: is then encoded once, not per call. Commands are immutable, so sharing one between
#: threads and clients is safe; the table is emptied when it reaches its bound.
_plain_gets: Dict[str, Command] = {}
_PLAIN_GETS_BOUND = 1024


def cmd_get(key: str, default: Any = None, *, extend: Any = None, memory_only: Optional[bool] = None,
            encoding: Optional[str] = None) -> Command:
    if type(key) is str and extend is None and not memory_only and encoding is None:
        if default is None:
            command = _plain_gets.get(key)
            if command is None:
                if len(_plain_gets) >= _PLAIN_GETS_BOUND:
                    _plain_gets.clear()
                command = _plain_gets[key] = Command("cache.get", {"key": key}, _decode_get, True)
            return command
        return Command("cache.get", {"key": key}, _get_decoder(default), True)
    _check_encoding(encoding)
    return Command("cache.get", _get_params(key, extend, memory_only, encoding), _get_decoder(default), True)


def cmd_get_entry(key: str, *, extend: Any = None, memory_only: Optional[bool] = None,
                  encoding: Optional[str] = None) -> Command:
    _check_encoding(encoding)
    return Command("cache.get", _get_params(key, extend, memory_only, encoding), _entry, True)


def cmd_exists(key: str) -> Command:
    return Command("cache.isCached", {"key": _key(key)}, lambda r: bool(_as_dict(r)["cached"]), True)


def cmd_cached_type(key: str) -> Command:
    return Command("cache.isCached", {"key": _key(key)}, lambda r: str(_as_dict(r)["cacheType"]), True)


def _description(result: Any) -> Optional[Description]:
    r = _as_dict(result)
    if not r.get("found"):
        return None
    encoding = r.get("encoding")
    size = r.get("size")
    return Description(
        cache_type=str(r.get("cacheType")),
        size=int(size) if isinstance(size, (int, float)) else 0,
        encoding=encoding if isinstance(encoding, str) else None,
        expires_at=_number_or_none(r.get("expiresAt")),
        last_access_at=_number_or_none(r.get("lastAccessAt")),
        memory_expires_at=_number_or_none(r.get("memoryExpiresAt")),
        version=_int_or_none(r.get("version")),
    )


def cmd_describe(key: str) -> Command:
    return Command("cache.describe", {"key": _key(key)}, _description, True)


def cmd_touch(key: str, expire: Expire = None, *, memory_expire: Expire = None) -> Command:
    params: Dict[str, Any] = {"key": _key(key)}
    _put(params, "expiration", to_expiration(expire))
    _put(params, "memoryExpiration", to_expiration(memory_expire))
    return Command("cache.touch", params, lambda r: bool(_as_dict(r)["touched"]), True)


def cmd_delete(key: str, *, memory: Optional[bool] = None, disk: Optional[bool] = None) -> Command:
    params: Dict[str, Any] = {"key": _key(key)}
    _put(params, "fromMemory", memory)
    _put(params, "fromDisk", disk)
    return Command("cache.remove", params, lambda r: bool(_as_dict(r)["removed"]), True)


def _tiers(memory: Optional[bool], disk: Optional[bool]) -> Optional[Dict[str, Any]]:
    params: Dict[str, Any] = {}
    _put(params, "memory", memory)
    _put(params, "disk", disk)
    return params or None


class Removed(int):
    """What ``clear`` and ``remove_expired`` did: the ``int`` itself is how many of the
    daemon's own entries went (``removed``, as before); with an upstream (``--upstream``),
    ``dropped_shared`` counts this host's copies of shared keys dropped (the keys stay in
    Redis) and ``removed_shared`` the shared keys removed from Redis for every host
    (``clear(shared=True)``; ``None`` otherwise)."""

    dropped_shared: int
    removed_shared: Optional[int]

    def __new__(cls, removed: int, dropped_shared: int = 0, removed_shared: Optional[int] = None) -> "Removed":
        value = super().__new__(cls, removed)
        value.dropped_shared = dropped_shared
        value.removed_shared = removed_shared
        return value

    def __repr__(self) -> str:
        return f"Removed({int(self)}, dropped_shared={self.dropped_shared}, removed_shared={self.removed_shared})"

    def __str__(self) -> str:
        return str(int(self))


def _removed(result: Any) -> Removed:
    r = _as_dict(result)
    shared = r.get("removedShared")
    return Removed(int(r["removed"]), int(r.get("droppedShared", 0)), None if shared is None else int(shared))


def cmd_clear(*, memory: Optional[bool] = None, disk: Optional[bool] = None,
              shared: Optional[bool] = None) -> Command:
    params = _tiers(memory, disk) or {}
    _put(params, "shared", shared)
    return Command("cache.clear", params or None, _removed, False)


def cmd_remove_expired(*, memory: Optional[bool] = None, disk: Optional[bool] = None) -> Command:
    return Command("cache.removeExpired", _tiers(memory, disk), _removed, False)


def cmd_trim() -> Command:
    return Command("cache.trim", None, _as_dict, False)


def cmd_total_size() -> Command:
    return Command("cache.totalSize", None, _as_dict, True)


def cmd_stats() -> Command:
    return Command("cache.stats", None, _as_dict, True)


def cmd_ping() -> Command:
    return Command("server.ping", None, lambda r: bool(_as_dict(r).get("pong")), True)


def cmd_info() -> Command:
    return Command("server.info", None, _as_dict, True)


def _identity(result: Any) -> Dict[str, Any]:
    info = _as_dict(result)
    if "rights" not in info:  # no --access: one keyspace, every right
        return {"namespace": None, "rights": ["read", "write", "admin"], "access": False}
    return {"namespace": info.get("namespace"), "rights": list(info["rights"]), "access": True}


def cmd_identity() -> Command:
    """``server.info`` read for the connection's namespace and rights."""
    return Command("server.info", None, _identity, True)


def cmd_configure(*, callback_queue: Any = None, load_disk_file_synchronously: Optional[bool] = None,
                  extend: Any = None, previous: Optional[Command] = None) -> Command:
    """``connection.configure``; ``previous`` (the last one sent) supplies the settings
    this one leaves out, so the command re-sent after a reconnect restores them all."""
    params: Dict[str, Any] = dict(previous.params or {}) if previous is not None else {}
    _put(params, "callbackQueue", callback_queue)
    _put(params, "loadDiskFileSynchronously", load_disk_file_synchronously)
    _put(params, "extendingExpiration", to_extending(extend))
    return Command("connection.configure", params, _as_dict, True)


def cmd_call(method: str, params: Optional[Mapping[str, Any]] = None) -> Command:
    # Arbitrary methods may have any effect, so they are never resent.
    return Command(method, dict(params) if params is not None else None, lambda r: r, False)
