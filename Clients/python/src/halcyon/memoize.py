"""Cache keys for ``memoize``: a function's identity plus its arguments.

A key must be the same in every process that calls the same function with equal
arguments, so it is built from the function's module and qualified name and a SHA-256
of a canonical JSON form of the arguments (``repr`` for values JSON cannot hold, which
is stable for numbers, strings and most value types, but not for objects whose repr
shows an address: pass ``key=`` for those).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Dict, Optional, Tuple


def _canonical(value: Any) -> Any:
    # Equal arguments must give equal keys, as in functools.lru_cache: 1 == 1.0.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": bytes(value).hex()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {"$dict": sorted(([_canonical(k), _canonical(v)] for k, v in value.items()), key=repr)}
    return {"$repr": f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"}


def function_prefix(func: Callable[..., Any], prefix: Optional[str]) -> str:
    """The key prefix of a memoized function: ``prefix`` or ``memoize:<module>.<qualname>``."""
    if prefix is not None:
        return prefix
    module = getattr(func, "__module__", None) or "?"
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", "?")
    return f"memoize:{module}.{name}"


def make_key(prefix: str, args: Tuple[Any, ...], kwargs: Dict[str, Any], typed: bool) -> str:
    """The cache key for one call: ``<prefix>:<sha256 of the arguments>``.

    With ``typed`` the argument types are part of the key (``f(1)`` and ``f(1.0)``
    differ), as in :func:`functools.lru_cache`.
    """
    parts: Any = [_canonical(list(args)), _canonical(dict(sorted(kwargs.items())))]
    if typed:
        parts.append([type(a).__qualname__ for a in args])
        parts.append(sorted((k, type(v).__qualname__) for k, v in kwargs.items()))
    digest = hashlib.sha256(
        json.dumps(parts, separators=(",", ":"), sort_keys=True, ensure_ascii=True).encode("ascii")
    ).hexdigest()
    return f"{prefix}:{digest}"
