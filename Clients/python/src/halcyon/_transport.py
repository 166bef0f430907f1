"""The blocking transport: one Unix-socket connection that writes request lines and
reads reply lines, matching replies to requests by id.

The common case costs two system calls: one ``send`` and one blocking ``recv``. The
socket stays in blocking mode and the timeout is the kernel's (``SO_RCVTIMEO`` /
``SO_SNDTIMEO``), so waiting needs no ``poll`` of its own; sends use ``MSG_DONTWAIT``.
Only when a send cannot go through (a large pipeline meeting the daemon's
back-pressure: a client that wrote 10,000 requests before reading any reply would fill
both socket buffers and wait forever on a daemon that has stopped reading) does it
wait on ``poll`` for either direction, reading replies while it writes.

Replies are decoded in bulk: every complete line that one ``recv`` brought in is parsed
by a single ``json.loads``. Not thread-safe: :class:`halcyon.Client` calls it under its
lock only.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _wire, errors

_CHUNK = 1 << 20
# Reads land in one buffer kept per connection. ``sock.recv(n)`` allocates n bytes for
# every call, and an allocation that large is an mmap, an mremap and an munmap around
# each read: three system calls more than the read itself.
_READ_BUFFER = 1 << 18
_DONTWAIT = socket.MSG_DONTWAIT


class Broken(Exception):
    """The connection broke. ``delivered`` says whether any byte of the request had
    been handed to the kernel: when False, the daemon cannot have seen it, so any
    request may be resent; when True only idempotent ones may."""

    def __init__(self, message: str, delivered: bool) -> None:
        super().__init__(message)
        self.delivered = delivered


class Timeout(Exception):
    """No progress for ``timeout`` seconds; ``missing`` lists the unanswered ids."""

    def __init__(self, missing: List[int]) -> None:
        super().__init__(f"no reply for {len(missing)} request(s)")
        self.missing = missing


class Connection:
    """One connected socket and its unread bytes.

    Replies that arrive for ids nobody waits for any more (requests that timed out and
    were cancelled) are dropped when read.
    """

    def __init__(self, path: str, connect_timeout: float) -> None:
        self.path = path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(connect_timeout)
        try:
            sock.connect(path)
        except OSError as exc:
            sock.close()
            reason = exc.strerror or str(exc)
            raise errors.HalcyonConnectionError(
                f"cannot connect to halcyond at {path}: {reason}", reason="cannotConnect"
            ) from exc
        # Blocking for good: time limits are the kernel's (see _set_timeout), so a recv
        # is one system call where Python's own timeout would poll before each one.
        sock.settimeout(None)
        self.sock: Optional[socket.socket] = sock
        self._buffer = bytearray()
        self._read_buffer = bytearray(_READ_BUFFER)
        self._read_view = memoryview(self._read_buffer)
        self._timeout: Any = _UNSET

    @property
    def closed(self) -> bool:
        return self.sock is None

    def __del__(self) -> None:
        # A client dropped without close() (a framework's backend object going out of
        # scope) gives its socket back here instead of leaving it to the garbage
        # collector's ResourceWarning.
        sock = getattr(self, "sock", None)
        if sock is not None:
            sock.close()

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()

    def _set_timeout(self, sock: socket.socket, timeout: Optional[float]) -> None:
        if timeout == self._timeout:
            return
        if timeout is None:
            tv = struct.pack("ll", 0, 0)  # 0: wait forever
        else:
            # 0 would mean "forever" to the kernel; a zero timeout means "at once".
            micros = max(1, int(timeout * 1e6))
            tv = struct.pack("ll", micros // 1_000_000, micros % 1_000_000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
        self._timeout = timeout

    def call(self, payload: bytes, rid: int, timeout: Optional[float]) -> Dict[str, Any]:
        """Write one request line and return its reply, or the error reply with
        ``id: null`` that stands for it (a line the daemon could not take).

        Raises:
            Broken, Timeout: as :meth:`exchange`.
        """
        sock = self.sock
        if sock is None:
            raise Broken("connection is closed", delivered=False)
        if timeout != self._timeout:
            self._set_timeout(sock, timeout)
        try:
            sent = sock.send(payload, _DONTWAIT)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self.close()
            raise Broken(f"write failed: {exc}", delivered=False) from exc
        if sent < len(payload):
            replies, nulls = self.exchange(payload, rid, 1, timeout, sent=sent)
            return replies[0] if replies[0] is not None else nulls[0]
        buf = self._buffer
        while True:
            data = self._recv(sock, True, [rid])
            if not buf and data.find(b"\n") == len(data) - 1:
                # The usual case: exactly our one line, nothing left over. One parse
                # of the line as it came (JSON allows the trailing newline).
                arrived = _wire.parse_line(data)
            else:
                taken = _take_lines(buf, data)
                if taken is None:
                    continue
                arrived = _wire.parse_lines(taken)
            for reply in arrived:
                got = reply.get("id")
                if got == rid and type(got) is int:
                    return reply
                if got is None and "error" in reply:
                    return reply
                # Anything else answers a request we gave up on: drop it.

    def exchange(
        self, payload: bytes, first_id: int, count: int, timeout: Optional[float], *,
        batch: bool = False, sent: int = 0,
    ) -> Tuple[List[Optional[Dict[str, Any]]], List[Dict[str, Any]]]:
        """Write ``payload`` (``sent`` bytes of it already written) and read until the
        ``count`` requests with ids ``first_id ..< first_id + count`` are answered.

        Returns the replies in id order (``None`` for one not answered) and the error
        replies with ``id: null`` (a line the daemon could not take: too long, a batch
        too large). Reading stops early once replies plus null-id errors account for
        every request, or, for a ``batch`` (one line holding every request), at the
        first null-id error.

        ``timeout`` bounds the time without progress (no byte written or read), so a
        large pipeline that keeps moving is not cut off; ``None`` waits forever.

        Raises:
            Broken: the daemon closed the connection or it failed.
            Timeout: nothing moved for ``timeout`` seconds (the connection is closed
                if the request was only partly written, else kept usable).
        """
        sock = self.sock
        if sock is None:
            raise Broken("connection is closed", delivered=False)
        self._set_timeout(sock, timeout)
        replies: List[Optional[Dict[str, Any]]] = [None] * count
        nulls: List[Dict[str, Any]] = []
        state = [count]  # replies still missing
        view = memoryview(payload)
        total = len(view)

        def missing() -> List[int]:
            return [first_id + i for i, r in enumerate(replies) if r is None]

        def take(data: bytes) -> None:
            chunk = _take_lines(self._buffer, data)
            if chunk is None:
                return
            for reply in _wire.parse_lines(chunk):
                got = reply.get("id")
                if type(got) is int:
                    i = got - first_id
                    if 0 <= i < count and replies[i] is None:
                        replies[i] = reply
                        state[0] -= 1
                elif got is None and "error" in reply:
                    nulls.append(reply)
                # Anything else answers a request we gave up on: drop it.

        try:
            # Writing: send what the socket takes, read what has arrived, and wait for
            # either direction only when neither moved.
            while sent < total:
                try:
                    n = sock.send(view[sent:sent + _CHUNK], _DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    n = 0
                except OSError as exc:
                    self.close()
                    raise Broken(f"write failed: {exc}", delivered=sent > 0) from exc
                sent += n
                data = self._recv_nowait(sock, sent > 0)
                if data:
                    take(data)
                if n == 0 and not data:
                    poller = select.poll()
                    poller.register(sock, select.POLLIN | select.POLLOUT)
                    if not poller.poll(None if timeout is None else max(1, int(timeout * 1000))):
                        self._on_timeout(sent < total, missing())
                        raise Timeout(missing())
            # Reading: one blocking recv at a time, the kernel keeping the time limit.
            while state[0] > 0 and not (batch and nulls) and state[0] > len(nulls):
                take(self._recv(sock, True, None, missing))
        finally:
            if 0 < sent < total:
                # Interrupted (KeyboardInterrupt, a signal handler's exception) with
                # half a line written: the next request would be glued to it.
                self.close()
        return replies, nulls

    def _recv(self, sock: socket.socket, delivered: bool, ids: Optional[List[int]],
              missing: Any = None) -> bytes:
        """One blocking read; raises Timeout (after cancelling the unanswered ids) when
        nothing came within the socket's time limit."""
        try:
            count = sock.recv_into(self._read_buffer)
        except BlockingIOError:
            unanswered = ids if ids is not None else missing()
            self._on_timeout(False, unanswered)
            raise Timeout(unanswered) from None
        except OSError as exc:
            self.close()
            raise Broken(f"read failed: {exc}", delivered=delivered) from exc
        if not count:
            self.close()
            raise Broken("halcyond closed the connection", delivered=delivered)
        return self._read_view[:count].tobytes()

    def _recv_nowait(self, sock: socket.socket, delivered: bool) -> bytes:
        try:
            count = sock.recv_into(self._read_buffer, 0, _DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return b""
        except OSError as exc:
            self.close()
            raise Broken(f"read failed: {exc}", delivered=delivered) from exc
        if not count:
            self.close()
            raise Broken("halcyond closed the connection", delivered=delivered)
        return self._read_view[:count].tobytes()

    def _on_timeout(self, partial_write: bool, missing: List[int]) -> None:
        sock = self.sock
        if sock is None:
            return
        if partial_write:
            # Half a line is on the wire; the next request would be glued to it.
            self.close()
            return
        if not missing:
            return
        # Tell the daemon to drop the work we no longer wait for, so a waiting write
        # does not run late and its reply is withdrawn (PROTOCOL.md section 6).
        cancels = b"".join(_wire.cancel_line(i) for i in missing)
        try:
            n = sock.send(cancels, _DONTWAIT)
        except OSError:
            n = -1
        if n != len(cancels):
            self.close()


_UNSET: Any = object()


def _take_lines(buf: bytearray, data: bytes) -> Optional[bytes]:
    """Appends ``data`` to ``buf`` and takes out every complete line: their bytes (without
    the last newline), or None while no line is complete. A partial line stays in ``buf``."""
    buf += data
    if b"\n" not in data:
        return None
    end = buf.rfind(b"\n")
    chunk = bytes(buf[:end])
    del buf[:end + 1]
    return chunk
