"""Durability of acknowledged writes across kill -9 of a real ``halcyond``.

Several rounds: pipelined multi-connection set load (each connection owns its keys, so
per-key order is the connection's order), pipelined increments of counters, plus removes
and a clear; SIGKILL at a random moment; restart on the same folder; then every
acknowledged key must read back whole, with its acknowledged value or one sent later on
its connection, every counter must hold at least its highest acknowledged value (and no
more than was sent), and every acknowledged remove or clear must still hold. Every wait
is bounded.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import threading
import time
from typing import Dict, List, Optional, Tuple, cast

import pytest

from conftest import Daemon, _start_daemon

import halcyon

WINDOW = 16
KEYS_PER_CONNECTION = 150


class Pipelined(threading.Thread):
    """One connection keeping WINDOW requests in flight until the daemon dies. A subclass
    says what to send next (`request`) and what an acknowledgement means (`acknowledged`)."""

    def __init__(self, path: str, prefix: str, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.prefix = prefix
        self.rng = rng
        self.error: Optional[str] = None
        # Set by the first acknowledgement: the kill waits for it, so every round tests
        # acknowledged work however slow the machine is.
        self.started = threading.Event()

    def request(self, seq: int) -> Tuple[str, Dict[str, object], object]:
        """The method, the params and what `acknowledged` is given back for request `seq`."""
        raise NotImplementedError

    def acknowledged(self, tag: object, result: Dict[str, object]) -> None:
        raise NotImplementedError

    def run(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(20)
        try:
            sock.connect(self.path)
            reader = sock.makefile("rb")
            inflight: Dict[int, object] = {}
            seq = 0
            while True:
                while len(inflight) < WINDOW:
                    seq += 1
                    method, params, tag = self.request(seq)
                    sent = json.dumps({"jsonrpc": "2.0", "id": seq, "method": method, "params": params})
                    sock.sendall(sent.encode() + b"\n")
                    inflight[seq] = tag
                received = reader.readline()
                if not received:
                    return
                reply = json.loads(received)
                tag = inflight.pop(reply["id"])
                if "result" in reply:
                    self.acknowledged(tag, reply["result"])
                    self.started.set()
                else:
                    self.error = json.dumps(reply)
                    return
        except (OSError, ValueError):
            return  # the kill
        finally:
            sock.close()


class Loader(Pipelined):
    """Pipelined sets of the connection's own keys."""

    def __init__(self, path: str, prefix: str, rng: random.Random) -> None:
        super().__init__(path, prefix, rng)
        self.sent: Dict[Tuple[str, int], str] = {}
        self.acked: Dict[str, int] = {}  # key -> highest acknowledged sequence

    def request(self, seq: int) -> Tuple[str, Dict[str, object], object]:
        key = f"{self.prefix}-{self.rng.randrange(KEYS_PER_CONNECTION)}"
        value = f"{self.prefix}:{seq}:" + "x" * self.rng.randrange(0, 400)
        self.sent[(key, seq)] = value
        return "cache.set", {"key": key, "value": value}, (key, seq)

    def acknowledged(self, tag: object, result: Dict[str, object]) -> None:
        key, seq = cast(Tuple[str, int], tag)
        self.acked[key] = max(self.acked.get(key, 0), seq)


class Remover(threading.Thread):
    """Sets then removes its own keys, one at a time, recording acknowledged removes."""

    def __init__(self, path: str, prefix: str) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.prefix = prefix
        self.removed: List[str] = []
        self.started = threading.Event()  # set by the first acknowledged remove

    def run(self) -> None:
        try:
            with halcyon.Client(self.path, timeout=20, retry=False) as c:
                for i in range(100000):
                    key = f"{self.prefix}-{i}"
                    c.set(key, "doomed")
                    c.delete(key)
                    self.removed.append(key)
                    self.started.set()
        except (halcyon.HalcyonError, OSError):
            return


class Incrementer(Pipelined):
    """Pipelined increments of the connection's own counters (the event loop commits them
    itself: the direct path)."""

    COUNTERS = 8

    def __init__(self, path: str, prefix: str, rng: random.Random) -> None:
        super().__init__(path, prefix, rng)
        self.sent: Dict[str, int] = {}  # counter -> increments sent
        self.acked: Dict[str, int] = {}  # counter -> highest acknowledged value

    def request(self, seq: int) -> Tuple[str, Dict[str, object], object]:
        key = f"{self.prefix}-{self.rng.randrange(self.COUNTERS)}"
        self.sent[key] = self.sent.get(key, 0) + 1
        return "cache.incr", {"key": key}, key

    def acknowledged(self, tag: object, result: Dict[str, object]) -> None:
        key = str(tag)
        self.acked[key] = max(self.acked.get(key, 0), cast(int, result["value"]))


def _kill(d: Daemon) -> None:
    assert d.proc is not None
    d.proc.kill()
    d.proc.wait(timeout=10)
    d.proc = None


@pytest.mark.parametrize("flags", [
    ["--fsync", "everysec"],
    ["--fsync", "never"],
    # A journal this small fills within a round: its oldest live records are copied
    # forward so checkpoints can pass them (recordsCopiedForward), under the kills.
    ["--fsync", "everysec", "--journal-limit", "2MiB"],
], ids=["everysec", "never", "copy-forward"])
def test_acknowledged_writes_survive_kill_9(flags: List[str]) -> None:
    d = _start_daemon(flags)
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    copied = 0
    try:
        for round_ in range(3):
            # A clear acknowledged before the load: its keys must stay gone.
            with halcyon.Client(d.socket, timeout=20) as c:
                for i in range(30):
                    c.set(f"c{round_}-{i}", "before clear")
                c.clear()
            loaders = [Loader(d.socket, f"r{round_}c{n}", random.Random(rng.random())) for n in range(4)]
            remover = Remover(d.socket, f"r{round_}rm")
            incrementer = Incrementer(d.socket, f"r{round_}n", random.Random(rng.random()))
            for t in loaders:
                t.start()
            remover.start()
            incrementer.start()
            # The kill comes at a random moment after every worker's first acknowledgement.
            for worker in [*loaders, remover, incrementer]:
                assert worker.started.wait(timeout=60), "a worker had no acknowledgement within 60 s"
            time.sleep(rng.uniform(0.0, 1.2))
            if "--journal-limit" in flags:
                # The first round's kill waits until the small journal has copied records
                # forward (polled: the daemon has no event for it), so the case always
                # kills a journal that did.
                deadline = time.monotonic() + (60 if round_ == 0 else 0)
                with halcyon.Client(d.socket, timeout=20) as c:
                    while True:
                        copied = max(copied, int(c.call("cache.stats")["journal"]["recordsCopiedForward"]))
                        if copied > 0 or time.monotonic() >= deadline:
                            break
                        time.sleep(0.05)
            _kill(d)
            for thread in [*loaders, remover, incrementer]:
                thread.join(timeout=30)
                assert not thread.is_alive()
            d.start()
            checked = 0
            with halcyon.Client(d.socket, timeout=20) as c:
                for t in loaders:
                    assert t.error is None, t.error
                    for key, acked in t.acked.items():
                        got = c.get(key)
                        assert got is not None, f"round {round_}: acknowledged {key} (seq {acked}) is gone"
                        prefix, seq, _ = got.split(":", 2)
                        assert prefix == t.prefix
                        assert int(seq) >= acked, f"{key}: read seq {seq}, acknowledged {acked}"
                        assert t.sent[(key, int(seq))] == got, f"{key}: value not whole"
                        checked += 1
                for key in remover.removed:
                    assert c.get(key) is None, f"removed {key} came back"
                # A counter holds at least its highest acknowledged value, and never more
                # than the increments sent to it.
                assert incrementer.error is None, incrementer.error
                assert incrementer.acked, "no increment was acknowledged: the case tests nothing"
                for key, sent in incrementer.sent.items():
                    value = int(c.get(key) or 0)
                    acked = incrementer.acked.get(key, 0)
                    assert acked <= value <= sent, f"{key}: {value} after restart, acknowledged {acked}, sent {sent}"
                for i in range(30):
                    assert c.get(f"c{round_}-{i}") is None, "a cleared key came back"
            assert checked > 0
        if "--journal-limit" in flags:
            assert copied > 0, "no record was copied forward: the case tests nothing new"
    finally:
        d.stop()
        shutil.rmtree(d.folder, ignore_errors=True)


def _delete_under_daemon(path: str) -> None:
    """Deletes `path` and everything in it while the daemon runs. The daemon may make a
    file or a folder in it meanwhile (the materializer's next file, a journal segment after
    it noticed the loss), and `rmtree`'s last `rmdir` then fails: delete again, within a
    bound."""
    deadline = time.monotonic() + 10
    while os.path.lexists(path):
        try:
            shutil.rmtree(path)
        except OSError:
            if time.monotonic() > deadline:
                raise


def test_writes_after_the_cache_folder_is_deleted_survive_kill_9() -> None:
    """Someone deletes the cache folder, journal and all, under a running daemon: the
    writes it acknowledges afterwards come back after kill -9, through the loop's direct
    writes and the pipelined group commit, and so does a value it still held unwritten
    when the folder went (its table is journaled again). A value whose file was written
    before the deletion went with the folder, like any file someone deletes: the daemon
    answers it from memory while the copy stays there, and a restart finds none."""
    d = _start_daemon()
    try:
        with halcyon.Client(d.socket, timeout=20) as c:
            c.set("before", "answered when the folder went")
        _delete_under_daemon(d.cache_dir)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(20)
        sock.connect(d.socket)
        lines = [json.dumps({"jsonrpc": "2.0", "id": i, "method": "cache.set",
                             "params": {"key": f"after-{i}", "value": f"v{i}"}}) for i in range(50)]
        sock.sendall(("\n".join(lines) + "\n").encode())
        reader = sock.makefile("rb")
        replies = [json.loads(reader.readline()) for _ in lines]
        sock.close()
        assert all("result" in r and r["result"]["stored"] for r in replies), replies[:3]
        with halcyon.Client(d.socket, timeout=20) as c:
            stats = c.call("cache.stats")
            assert c.get("before") == "answered when the folder went"
        assert stats["journal"]["journalRebuilds"] >= 1
        # The materializer writes "before"'s file after a pause in the writes (a rest of
        # about 25 ms); a loaded machine can take longer than that between the set and the
        # deletion, and the file then went with the folder. No file written by the time of
        # the replies (a file write in progress on the daemon's queue finishes before the
        # writes queued behind it are answered) means it was still unwritten when the
        # folder went, so it must come back.
        before_was_unwritten = stats["journal"]["filesWritten"] == 0
        _kill(d)
        d.start()
        with halcyon.Client(d.socket, timeout=20) as c:
            gone = [f"after-{i}" for i in range(50) if c.get(f"after-{i}") != f"v{i}"]
            assert not gone, f"acknowledged after the deletion, missing after restart: {gone}"
            if before_was_unwritten:
                assert c.get("before") == "answered when the folder went", \
                    "unwritten when the folder went, missing after restart: before"
    finally:
        d.stop()
        shutil.rmtree(d.folder, ignore_errors=True)
