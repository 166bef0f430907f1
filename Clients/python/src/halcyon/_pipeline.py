"""What the sync and async pipelines share: the queue of commands and the queueing
methods, which only build :class:`~halcyon._wire.Command` values and never touch the
connection. Sending stays in each pipeline, since only that part is sync or async.

Threading: a pipeline is built by one thread (or one event loop's tasks); nothing here
locks.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, TypeVar

from . import _wire, errors
from ._wire import Command, Expire

P = TypeVar("P", bound="PipelineQueue")


def raise_first_error(results: List[Any]) -> None:
    """Raise the first :class:`~halcyon.errors.HalcyonError` among ``results``, if any."""
    for result in results:
        if isinstance(result, errors.HalcyonError):
            raise result


class PipelineQueue:
    """Queued calls and the queueing methods common to :class:`halcyon.Pipeline` and
    :class:`halcyon.aio.AsyncPipeline`. Each takes the same arguments as the client's
    method of that name and returns the pipeline, so calls can chain."""

    def __init__(self, *, batch: bool, raise_on_error: bool, timeout: Any) -> None:
        self._batch = batch
        self._raise = raise_on_error
        self._timeout = timeout
        self._commands: List[Command] = []
        #: Every outcome of the last ``execute``, in call order.
        self.results: List[Any] = []

    def __len__(self) -> int:
        return len(self._commands)

    def _take(self) -> List[Command]:
        """The queued commands; the queue is left empty."""
        commands, self._commands = self._commands, []
        return commands

    def _add(self: P, command: Command) -> P:
        self._commands.append(command)
        return self

    def get(self: P, key: str, default: Any = None, *, extend: Any = None, memory_only: bool = False) -> P:
        """Queue the client's ``get``."""
        return self._add(_wire.cmd_get(key, default, extend=extend, memory_only=memory_only))

    def get_entry(self: P, key: str, *, extend: Any = None, memory_only: bool = False,
                  encoding: Optional[str] = None) -> P:
        """Queue the client's ``get_entry``."""
        return self._add(_wire.cmd_get_entry(key, extend=extend, memory_only=memory_only, encoding=encoding))

    def set(self: P, key: str, value: Any, expire: Expire = None, *, memory_expire: Expire = None,
            to_disk: Optional[bool] = None, lease: Optional[str] = None) -> P:
        """Queue the client's ``set``."""
        return self._add(_wire.cmd_set(key, value, expire, memory_expire=memory_expire, to_disk=to_disk,
                                       lease=lease))

    def add(self: P, key: str, value: Any, expire: Expire = None, *, memory_expire: Expire = None,
            to_disk: Optional[bool] = None, lease: Optional[str] = None) -> P:
        """Queue the client's ``add``."""
        return self._add(_wire.cmd_add(key, value, expire, memory_expire=memory_expire, to_disk=to_disk,
                                       lease=lease))

    def cas(self: P, key: str, value: Any, version: int, expire: Expire = None, *,
            memory_expire: Expire = None, to_disk: Optional[bool] = None) -> P:
        """Queue the client's ``cas``."""
        return self._add(_wire.cmd_cas(key, value, version, expire, memory_expire=memory_expire,
                                       to_disk=to_disk))

    def incr(self: P, key: str, by: int = 1, *, initial: Optional[int] = None, expire: Expire = None,
             memory_expire: Expire = None, to_disk: Optional[bool] = None) -> P:
        """Queue the client's ``incr``."""
        return self._add(_wire.cmd_incr(key, by, initial=initial, expire=expire,
                                        memory_expire=memory_expire, to_disk=to_disk))

    def decr(self: P, key: str, by: int = 1, *, initial: Optional[int] = None, expire: Expire = None,
             memory_expire: Expire = None, to_disk: Optional[bool] = None) -> P:
        """Queue the client's ``decr``."""
        return self._add(_wire.cmd_incr(key, -by, initial=initial, expire=expire,
                                        memory_expire=memory_expire, to_disk=to_disk))

    def get_many(self: P, keys: Sequence[str], default: Any = _wire._MISSING, *, extend: Any = None,
                 memory_only: bool = False) -> P:
        """Queue the client's ``get_many``."""
        return self._add(_wire.cmd_get_many(keys, default, extend=extend, memory_only=memory_only))

    def set_many(self: P, mapping: Mapping[str, Any], expire: Expire = None, *,
                 memory_expire: Expire = None, to_disk: Optional[bool] = None) -> P:
        """Queue the client's ``set_many``."""
        return self._add(_wire.cmd_set_many(mapping, expire, memory_expire=memory_expire, to_disk=to_disk))

    def remove_prefix(self: P, prefix: str) -> P:
        """Queue the client's ``remove_prefix``."""
        return self._add(_wire.cmd_remove_prefix(prefix))

    def delete(self: P, key: str, *, memory: Optional[bool] = None, disk: Optional[bool] = None) -> P:
        """Queue the client's ``delete``."""
        return self._add(_wire.cmd_delete(key, memory=memory, disk=disk))

    def exists(self: P, key: str) -> P:
        """Queue the client's ``exists``."""
        return self._add(_wire.cmd_exists(key))

    def describe(self: P, key: str) -> P:
        """Queue the client's ``describe``."""
        return self._add(_wire.cmd_describe(key))

    def touch(self: P, key: str, expire: Expire = None, *, memory_expire: Expire = None) -> P:
        """Queue the client's ``touch``."""
        return self._add(_wire.cmd_touch(key, expire, memory_expire=memory_expire))

    def call(self: P, method: str, params: Optional[Mapping[str, Any]] = None) -> P:
        """Queue the client's ``call``."""
        return self._add(_wire.cmd_call(method, params))
