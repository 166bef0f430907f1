"""A TCP proxy on 127.0.0.1 for fault tests: it forwards every connection to one target
port until it is switched to blackhole mode, where it keeps every connection open and
accepts new ones but forwards nothing, in either direction, and closes nothing: what a
host sees when its path to a server stops forwarding without a FIN or an RST (a silent
partition). Switched back, it forwards again (bytes read meanwhile stay dropped, as a
partition loses them).

It runs an asyncio loop on a thread of its own, so a test drives it synchronously.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import List, Optional


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BlackholeProxy:
    """Forwards ``127.0.0.1:port`` to ``127.0.0.1:target``; ``blackhole(True)`` stops it."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = _free_port()
        self._blackholed = False
        self._loop = asyncio.new_event_loop()
        self._server: Optional[asyncio.AbstractServer] = None
        self._writers: List[asyncio.StreamWriter] = []
        self._thread = threading.Thread(target=self._loop.run_forever, name="blackhole-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> "BlackholeProxy":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(timeout=10)
        return self

    def blackhole(self, on: bool) -> None:
        """From now on, forward nothing (on) or everything (off)."""
        self._blackholed = on

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for writer in self._writers:
                writer.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", self.port)

    async def _accepted(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            client_writer.close()
            return
        self._writers += [client_writer, server_writer]
        await asyncio.gather(self._pipe(client_reader, server_writer), self._pipe(server_reader, client_writer),
                             return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if self._blackholed:
                    continue   # dropped: nothing reaches the other side, nothing is closed
                writer.write(data)
                await writer.drain()
        finally:
            if not self._blackholed:
                writer.close()
