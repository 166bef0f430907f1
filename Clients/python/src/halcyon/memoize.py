"""``memoize``: cache keys (a function's identity plus its arguments) and the
decorated callables :class:`Memoized` and :class:`AsyncMemoized`, typed so that
``f.invalidate(...)`` and ``f.cache_key(...)`` check under ``mypy --strict`` with the
decorated function's own parameters.

A key must be the same in every process that calls the same function with equal
arguments, so it is built from the function's module and qualified name and a SHA-256
of a canonical JSON form of the arguments (``repr`` for values JSON cannot hold, which
is stable for numbers, strings and most value types, but not for objects whose repr
shows an address: pass ``key=`` for those).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import sys
from typing import (
    Any, Awaitable, Callable, Dict, FrozenSet, Generic, Iterable, Optional, Tuple, TypeVar, Union,
)

if sys.version_info >= (3, 10):
    from typing import ParamSpec
else:  # pragma: no cover - Python 3.9: a plain TypeVar parametrises Generic at run time
    from typing import TypeVar as ParamSpec

__all__ = ["Memoized", "AsyncMemoized", "KeyMaker", "make_key", "function_prefix"]

P = ParamSpec("P")
R = TypeVar("R")


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


class KeyMaker:
    """Builds one memoized function's keys, leaving out the arguments named in
    ``ignore`` (positions as ints, parameter names as strs: ``ignore={"self"}`` or
    ``ignore={0}`` for a method, so every instance shares results)."""

    def __init__(self, func: Callable[..., Any], prefix: Optional[str], typed: bool,
                 ignore: Iterable[Union[int, str]] = ()) -> None:
        self.head = function_prefix(func, prefix)
        self.typed = typed
        wanted = set(ignore)
        positions = {i for i in wanted if isinstance(i, int)}
        names = {n for n in wanted if isinstance(n, str)}
        if names:
            # A named parameter may also arrive positionally: find its position.
            try:
                params = list(inspect.signature(func).parameters.values())
            except (TypeError, ValueError):
                params = []
            for index, param in enumerate(params):
                if param.name in names and param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
                    positions.add(index)
        self.positions: FrozenSet[int] = frozenset(positions)
        self.names: FrozenSet[str] = frozenset(names)

    def key(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> str:
        if self.positions:
            args = tuple(a for i, a in enumerate(args) if i not in self.positions)
        if self.names:
            kwargs = {k: v for k, v in kwargs.items() if k not in self.names}
        return make_key(self.head, args, kwargs, self.typed)


class Memoized(Generic[P, R]):
    """What :meth:`halcyon.Client.memoize` returns: call it like the function.

    Attributes and methods (checked against the function's parameters by type checkers):
        cache_key(*args, **kwargs): the key a call with these arguments uses.
        invalidate(*args, **kwargs): forget that call's result; whether one was cached.
        __wrapped__: the function itself, bypassing the cache.

    On a method it binds like a function (``obj.method.invalidate(x)``).
    """

    def __init__(self, func: Callable[P, R], keys: KeyMaker,
                 run: Callable[[str, Callable[[], R]], R], forget: Callable[[str], bool]) -> None:
        functools.update_wrapper(self, func)
        self.__wrapped__: Callable[P, R] = func
        self._keys = keys
        self._run = run
        self._forget = forget

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._run(self._keys.key(args, kwargs), lambda: self.__wrapped__(*args, **kwargs))

    def cache_key(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """The key a call with these arguments reads and writes."""
        return self._keys.key(args, kwargs)

    def invalidate(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        """Forget the cached result of this call; returns whether there was one."""
        return self._forget(self._keys.key(args, kwargs))

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return _Bound(self, obj)


class AsyncMemoized(Generic[P, R]):
    """What :meth:`halcyon.aio.AsyncClient.memoize` returns: ``await f(...)``; as
    :class:`Memoized`, but ``invalidate`` is a coroutine."""

    def __init__(self, func: Callable[P, Awaitable[R]], keys: KeyMaker,
                 run: Callable[[str, Callable[[], Awaitable[R]]], Awaitable[R]],
                 forget: Callable[[str], Awaitable[bool]]) -> None:
        functools.update_wrapper(self, func)
        self.__wrapped__: Callable[P, Awaitable[R]] = func
        self._keys = keys
        self._run = run
        self._forget = forget

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run(self._keys.key(args, kwargs), lambda: self.__wrapped__(*args, **kwargs))

    def cache_key(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """The key a call with these arguments reads and writes."""
        return self._keys.key(args, kwargs)

    async def invalidate(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        """Forget the cached result of this call; returns whether there was one."""
        return await self._forget(self._keys.key(args, kwargs))

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return _Bound(self, obj)


class _Bound:
    """A memoized function bound to an instance, as a method is."""

    def __init__(self, memoized: Any, obj: Any) -> None:
        self._memoized = memoized
        self._obj = obj
        self.__wrapped__ = functools.partial(memoized.__wrapped__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._memoized(self._obj, *args, **kwargs)

    def cache_key(self, *args: Any, **kwargs: Any) -> str:
        return str(self._memoized.cache_key(self._obj, *args, **kwargs))

    def invalidate(self, *args: Any, **kwargs: Any) -> Any:
        return self._memoized.invalidate(self._obj, *args, **kwargs)
