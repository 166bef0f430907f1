"""A small stand-in for halcyond on a real Unix socket, for tests of the client's own
machinery (framing, id matching, timeouts, reconnects) that must not depend on the
daemon's behaviour. It follows PROTOCOL.md loosely: values are kept as (wire value,
encoding), and there is no disk tier or expiry.

Test-only methods: ``fake.reverse`` (answer each read's worth of lines in reverse
order, to prove replies are matched by id) and ``fake.hangup`` (close the connection
without replying). ``debug.sleep`` holds one global lock that every write takes, like
the daemon's ioQueue.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

KNOWN_PARAMS = {
    "cache.set": {"key", "value", "encoding", "expiration", "memoryExpiration", "toDisk", "forcedExtension", "options"},
    "cache.get": {"key", "encoding", "extendingExpiration", "forcedExtension", "fromMemoryOnly", "referenceDate", "options"},
    "cache.isCached": {"key", "forcedExtension", "referenceDate", "options"},
    "cache.describe": {"key", "forcedExtension", "referenceDate", "options"},
    "cache.touch": {"key", "expiration", "memoryExpiration", "forcedExtension", "options"},
    "cache.remove": {"key", "fromMemory", "fromDisk", "forcedExtension", "options"},
    "cache.clear": {"memory", "disk", "options"},
    "cache.removeExpired": {"memory", "disk", "referenceDate", "options"},
    "cache.trim": {"options"},
    "cache.totalSize": {"options"},
    "cache.stats": {"options"},
    "connection.configure": {"callbackQueue", "loadDiskFileSynchronously", "extendingExpiration"},
    "server.ping": set(),
    "server.info": set(),
    "debug.sleep": {"seconds"},
    "fake.reverse": set(),
    "fake.hangup": set(),
}
WRITES = {"cache.set", "cache.touch", "cache.remove", "cache.clear", "cache.removeExpired", "cache.trim", "debug.sleep"}


class RPCError(Exception):
    def __init__(self, code: int, reason: str, message: str = "error") -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


class FakeServer:
    """Serves the fake protocol on ``path`` from background threads until :meth:`stop`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.store: Dict[str, Tuple[Any, str]] = {}
        self.io = threading.Lock()
        self.received: List[Dict[str, Any]] = []
        self.connections = 0
        #: When set, the next request read closes its connection without a reply.
        self.hangup_next = False
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._sock.listen(64)
        self._clients: List[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        with self._lock:
            for c in self._clients:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                c.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._clients.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        reverse = False
        try:
            while True:
                data = conn.recv(1 << 16)
                if not data:
                    return
                buf += data
                *lines, buf = buf.split(b"\n")
                out: List[bytes] = []
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        out.append(self._error(None, -32700, "parseError"))
                        continue
                    if isinstance(msg, dict) and msg.get("method") == "fake.reverse":
                        reverse = True
                    if self.hangup_next:
                        self.hangup_next = False
                        conn.shutdown(socket.SHUT_RDWR)
                        return
                    if isinstance(msg, dict) and msg.get("method") == "fake.hangup":
                        conn.shutdown(socket.SHUT_RDWR)
                        return
                    reply = self._message(msg)
                    if reply is not None:
                        out.append(reply)
                if reverse:
                    out.reverse()
                if out:
                    conn.sendall(b"".join(out))
        except OSError:
            return
        finally:
            conn.close()

    @staticmethod
    def _error(rid: Any, code: int, reason: str) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": rid, "error": {
            "code": code, "message": reason, "data": {"reason": reason}}}).encode() + b"\n"

    def _message(self, msg: Any) -> Optional[bytes]:
        if isinstance(msg, list):
            if not msg:
                return self._error(None, -32600, "emptyBatch")
            if len(msg) > 1000:
                return self._error(None, -32600, "batchTooLarge")
            parts = [self._one(m) for m in msg]
            items = [p for p in parts if p is not None]
            return (json.dumps(items).encode() + b"\n") if items else None
        reply = self._one(msg)
        return None if reply is None else json.dumps(reply).encode() + b"\n"

    def _one(self, msg: Any) -> Optional[Dict[str, Any]]:
        with self._lock:
            self.received.append(msg if isinstance(msg, dict) else {"invalid": msg})
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or not isinstance(msg.get("method"), str):
            return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "invalid", "data": {"reason": "invalidRequest"}}}
        method = msg["method"]
        notification = "id" not in msg
        rid = msg.get("id")
        if method == "$/cancelRequest":
            return None
        try:
            params = msg.get("params", {})
            if not isinstance(params, dict):
                raise RPCError(-32602, "positionalParams")
            if method not in KNOWN_PARAMS:
                raise RPCError(-32601, "methodNotFound")
            extra = set(params) - KNOWN_PARAMS[method]
            if extra:
                raise RPCError(-32602, "unknownParam", f"unknown param {sorted(extra)[0]}")
            if method in WRITES:
                with self.io:
                    result = self._run(method, params)
            else:
                result = self._run(method, params)
        except RPCError as exc:
            if notification:
                return None
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": exc.code, "message": exc.message, "data": {"reason": exc.reason}}}
        if notification:
            return None
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    @staticmethod
    def _convert(value: Any, have: str, want: str) -> Any:
        import base64
        raw = (base64.b64decode(value) if have == "base64" else
               value.encode() if have == "utf8" else json.dumps(value, separators=(",", ":")).encode())
        try:
            if want == "base64":
                return base64.b64encode(raw).decode()
            if want == "utf8":
                return raw.decode()
            return json.loads(raw)
        except ValueError:
            raise RPCError(-32004, "cannotEncode") from None

    def _key(self, params: Dict[str, Any]) -> str:
        key = params.get("key")
        if not isinstance(key, str):
            raise RPCError(-32602, "missingParam")
        if not key:
            raise RPCError(-32602, "emptyKey")
        if len(key.encode()) > 4096:
            raise RPCError(-32602, "keyTooLong")
        return key

    def _run(self, method: str, p: Dict[str, Any]) -> Any:
        if method == "fake.reverse":
            return {}
        if method == "server.ping":
            return {"pong": True}
        if method == "server.info":
            return {"name": "fake", "protocol": 1, "pid": os.getpid(), "socket": self.path}
        if method == "debug.sleep":
            time.sleep(float(p.get("seconds", 0)))
            return {"slept": p.get("seconds")}
        if method == "connection.configure":
            return {"callbackQueue": p.get("callbackQueue", "untouch"),
                    "loadDiskFileSynchronously": p.get("loadDiskFileSynchronously", False)}
        if method == "cache.set":
            key = self._key(p)
            encoding = p.get("encoding", "utf8")
            if encoding not in ("utf8", "base64", "json"):
                raise RPCError(-32602, "invalidEncoding")
            if p.get("expiration") == "expired":
                return {"stored": False, "size": 0, "expiresAt": None}
            self.store[key] = (p.get("value"), encoding)
            return {"stored": True, "size": len(json.dumps(p.get("value"))), "expiresAt": None}
        if method == "cache.get":
            key = self._key(p)
            if key not in self.store:
                return {"found": False}
            value, encoding = self.store[key]
            wanted = p.get("encoding")
            if wanted is not None and wanted != encoding:
                value, encoding = self._convert(value, encoding, wanted), wanted
            return {"found": True, "value": value, "encoding": encoding, "cacheType": "memory", "expiresAt": None}
        if method == "cache.isCached":
            key = self._key(p)
            return {"cached": key in self.store, "cacheType": "memory" if key in self.store else "none"}
        if method == "cache.describe":
            key = self._key(p)
            if key not in self.store:
                return {"found": False, "cacheType": "none"}
            value, encoding = self.store[key]
            return {"found": True, "cacheType": "memory", "size": len(json.dumps(value)), "encoding": encoding,
                    "expiresAt": None, "lastAccessAt": time.time()}
        if method == "cache.touch":
            key = self._key(p)
            return {"touched": key in self.store, "expiresAt": None}
        if method == "cache.remove":
            key = self._key(p)
            return {"removed": self.store.pop(key, None) is not None}
        if method == "cache.clear":
            n = len(self.store)
            self.store.clear()
            return {"removed": n}
        if method == "cache.removeExpired":
            return {"removed": 0}
        if method == "cache.trim":
            return {"removed": 0, "totalSize": 0}
        if method == "cache.totalSize":
            return {"bytes": 0, "count": len(self.store)}
        if method == "cache.stats":
            return {"sets": 0}
        raise RPCError(-32601, "methodNotFound")
