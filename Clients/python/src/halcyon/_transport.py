"""The blocking transport: one Unix-socket connection that writes request lines and
reads reply lines, matching replies to requests by id.

It writes and reads at the same time (non-blocking socket + ``selectors``) because the
daemon applies back-pressure: a client that wrote 10,000 requests before reading any
reply would fill both socket buffers and wait forever on a daemon that has stopped
reading. Not thread-safe: :class:`halcyon.Client` calls it under its lock only.
"""

from __future__ import annotations

import selectors
import socket
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from . import _wire, errors

_CHUNK = 1 << 20


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
        sock.setblocking(False)
        self.sock: Optional[socket.socket] = sock
        self._buffer = bytearray()
        # poll keeps no kernel state, so a forked child closing its copy cannot
        # disturb the parent (an epoll set would be shared between them).
        self._selector = selectors.PollSelector()
        self._selector.register(sock, selectors.EVENT_READ)

    @property
    def closed(self) -> bool:
        return self.sock is None

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            self._selector.close()
            sock.close()

    def exchange(
        self, payload: bytes, want: Iterable[int], timeout: Optional[float], *, batch: bool = False
    ) -> Tuple[Dict[int, Dict[str, Any]], List[Dict[str, Any]]]:
        """Write ``payload`` and read until every id in ``want`` is answered.

        Returns the replies by id and the error replies with ``id: null`` (a line the
        daemon could not take: too long, a batch too large). Reading stops early once
        replies plus null-id errors account for every wanted id, or, for a ``batch``
        (one line holding every request), at the first null-id error.

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
        wanted = set(want)
        got: Dict[int, Dict[str, Any]] = {}
        nulls: List[Dict[str, Any]] = []
        view = memoryview(payload)
        sent = 0
        self._drain_buffer(wanted, got, nulls)
        # Most requests fit the socket buffer: write at once and skip the selector.
        try:
            sent = sock.send(view[:_CHUNK])
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self.close()
            raise Broken(f"write failed: {exc}", delivered=False) from exc
        deadline = None if timeout is None else time.monotonic() + timeout
        writing = False
        try:
            while sent < len(view) or (len(got) + len(nulls) < len(wanted) and not (batch and nulls)):
                need_write = sent < len(view)
                if need_write != writing:
                    events = selectors.EVENT_READ | (selectors.EVENT_WRITE if need_write else 0)
                    self._selector.modify(sock, events)
                    writing = need_write
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    self._on_timeout(sent < len(view), [i for i in wanted if i not in got])
                    raise Timeout([i for i in wanted if i not in got])
                ready = self._selector.select(wait)
                progress = False
                for _, mask in ready:
                    if mask & selectors.EVENT_WRITE and sent < len(view):
                        try:
                            n = sock.send(view[sent:sent + _CHUNK])
                        except (BlockingIOError, InterruptedError):
                            n = 0
                        except OSError as exc:
                            self.close()
                            raise Broken(f"write failed: {exc}", delivered=sent > 0) from exc
                        sent += n
                        progress = progress or n > 0
                    if mask & selectors.EVENT_READ:
                        try:
                            data = sock.recv(_CHUNK)
                        except (BlockingIOError, InterruptedError):
                            continue
                        except OSError as exc:
                            self.close()
                            raise Broken(f"read failed: {exc}", delivered=sent > 0) from exc
                        if not data:
                            self.close()
                            raise Broken("halcyond closed the connection", delivered=sent > 0)
                        self._buffer += data
                        # Only a chunk that ends a line can complete a reply; a large
                        # value arrives in many chunks that need no scan.
                        if b"\n" in data:
                            self._drain_buffer(wanted, got, nulls)
                        progress = True
                if progress and timeout is not None:
                    deadline = time.monotonic() + timeout
        finally:
            if 0 < sent < len(view):
                # Interrupted (KeyboardInterrupt, a signal handler's exception) with
                # half a line written: the next request would be glued to it.
                self.close()
            if writing and self.sock is not None:
                self._selector.modify(self.sock, selectors.EVENT_READ)
        return got, nulls

    def _drain_buffer(
        self, wanted: "set[int]", got: Dict[int, Dict[str, Any]], nulls: List[Dict[str, Any]]
    ) -> None:
        buf = self._buffer
        end = buf.rfind(b"\n")
        if end < 0:
            return
        chunk = bytes(buf[:end])
        del buf[:end + 1]
        for line in chunk.split(b"\n"):
            line = line.strip()
            if not line:
                continue
            for reply in _wire.parse_line(line):
                rid = reply.get("id")
                if isinstance(rid, int) and rid in wanted:
                    got[rid] = reply
                elif rid is None and "error" in reply:
                    nulls.append(reply)
                # Anything else answers a request we gave up on: drop it.

    def _on_timeout(self, partial_write: bool, missing: List[int]) -> None:
        sock = self.sock
        if sock is None:
            return
        if partial_write:
            # Half a line is on the wire; the next request would be glued to it.
            self.close()
            return
        # Tell the daemon to drop the work we no longer wait for, so a waiting write
        # does not run late and its reply is withdrawn (PROTOCOL.md section 6).
        cancels = b"".join(_wire.cancel_line(i) for i in missing)
        try:
            n = sock.send(cancels)
        except OSError:
            n = -1
        if n != len(cancels):
            self.close()
