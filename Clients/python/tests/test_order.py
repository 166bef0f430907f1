"""Order is law: on one connection a request sees exactly the requests before it.

Random sequences of set, get, add, cas, incr, remove (from both tiers, or from memory
only, which sends the next read of the key to the disk tier), touch, getMany, setMany,
describe and batches of them are sent pipelined, in ONE write on one raw socket, and
every reply is checked against a sequential model of the cache. The model knows values
and which write produced them; versions it cannot predict, so a read's version must be
the one the reply of the write it sees reported. Runs under every callback policy, with
and without ``loadDiskFileSynchronously``, against a real ``halcyond`` with its journal
on (so the direct write path is taken whenever the daemon may take it).

Also the plain reproduction: 200 pipelined ``set ryw=<i>; get ryw`` pairs, over several
rounds, where every get must answer its own ``<i>``.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

POLICIES: List[Tuple[str, Any]] = [
    ("mainAsync", "mainAsync"),
    ("mainCurrentOrAsync", "mainCurrentOrAsync"),
    ("untouch", "untouch"),
    ("dispatch", {"dispatch": {"concurrent": False}}),
    ("operationQueue", {"operationQueue": {"maxConcurrentOperationCount": 1}}),
]
CONFIGS = [pytest.param(policy, sync, id=f"{name}-{'syncDisk' if sync else 'queuedDisk'}")
           for name, policy in POLICIES for sync in (False, True)]

KEY_SLOTS = 3
REPLY_TIMEOUT = 20.0


# ------------------------------------------------------------------ raw socket

class Pipe:
    """One raw connection: whole pipelines out in one ``sendall``, reply lines in."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(REPLY_TIMEOUT)
        self.sock.connect(path)
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, messages: List[Any]) -> None:
        data = b"".join(json.dumps(m, separators=(",", ":")).encode() + b"\n" for m in messages)
        self.sock.sendall(data)

    def replies(self, ids: List[int]) -> Dict[int, Any]:
        """Reads reply lines until every id in ``ids`` is answered (batch replies are
        spread out by id); fails after ``REPLY_TIMEOUT`` seconds."""
        wanted = set(ids)
        got: Dict[int, Any] = {}
        deadline = time.monotonic() + REPLY_TIMEOUT
        while not wanted <= got.keys():
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                assert left > 0, f"no reply for ids {sorted(wanted - got.keys())} within {REPLY_TIMEOUT} s"
                self.sock.settimeout(left)
                chunk = self.sock.recv(1 << 20)
                assert chunk, "the daemon closed the connection"
                self.buffer += chunk
            line, self.buffer = self.buffer.split(b"\n", 1)
            reply = json.loads(line)
            for element in reply if isinstance(reply, list) else [reply]:
                assert element.get("id") not in got, f"two replies for id {element.get('id')}"
                got[element["id"]] = element
        return got

    def call(self, method: str, params: Dict[str, Any]) -> Any:
        self.send([{"jsonrpc": "2.0", "id": 0, "method": method, "params": params}])
        reply = self.replies([0])[0]
        assert "error" not in reply, reply
        return reply["result"]


# ------------------------------------------------------------------ the model

@dataclass
class Entry:
    value: Any          # str (utf8) or int (json, from incr)
    writer: int         # the id of the request whose write produced it (0: setup)

    @property
    def encoding(self) -> str:
        return "json" if isinstance(self.value, int) else "utf8"

    @property
    def size(self) -> int:
        return len(str(self.value).encode())


class Model:
    """The cache as a sequential machine: what each request must answer."""

    def __init__(self, keys: List[str], setup_versions: Dict[str, int]) -> None:
        self.keys = keys
        self.state: Dict[str, Optional[Entry]] = {k: None for k in keys}
        # The version each write reported, by the id of its request (and by key for the
        # setup writes, whose "writer" is the key's setup id).
        self.versions: Dict[Tuple[int, Optional[str]], int] = {}
        self.setup_writer: Dict[str, int] = {}
        for i, (key, version) in enumerate(setup_versions.items()):
            writer = -(i + 1)
            self.state[key] = Entry(f"setup-{i}", writer)
            self.setup_writer[key] = writer
            self.versions[(writer, None)] = version

    def check_version(self, entry: Entry, version: int, where: str, slot: Optional[str] = None) -> None:
        reported = self.versions.get((entry.writer, slot))
        assert reported == version, (
            f"{where}: version {version}, but the write it must see (request {entry.writer}) "
            f"reported {reported}")

    def check_found(self, key: str, result: Dict[str, Any], where: str, slot_of: Dict[Tuple[str, int], str]) -> None:
        entry = self.state[key]
        if entry is None:
            assert result == {"found": False}, f"{where}: expected a miss, got {result}"
            return
        assert result.get("found") is True, f"{where}: expected {entry.value!r}, got {result}"
        assert result["value"] == entry.value, f"{where}: expected {entry.value!r}, got {result['value']!r}"
        assert result["encoding"] == entry.encoding, f"{where}: {result}"
        self.check_version(entry, result["version"], where, slot_of.get((key, entry.writer)))


# ------------------------------------------------------------------ operations

# One operation: ("set", slot, value), ("get", slot), ("add", slot, value),
# ("cas", slot, value), ("incr", slot, by), ("remove", slot), ("evict", slot),
# ("touch", slot), ("describe", slot), ("getMany", [slots]), ("setMany", [(slot, value)]),
# ("batch", [single operations]).
slot = st.integers(0, KEY_SLOTS - 1)
value = st.integers(0, 99).map(lambda n: f"v{n}")
single = st.one_of(
    st.tuples(st.just("set"), slot, value),
    st.tuples(st.just("get"), slot),
    st.tuples(st.just("get"), slot),
    st.tuples(st.just("add"), slot, value),
    st.tuples(st.just("cas"), slot, value),
    st.tuples(st.just("incr"), slot, st.integers(-3, 3)),
    st.tuples(st.just("remove"), slot),
    st.tuples(st.just("evict"), slot),
    st.tuples(st.just("touch"), slot),
    st.tuples(st.just("describe"), slot),
    st.tuples(st.just("getMany"), st.lists(slot, min_size=1, max_size=4)),
    st.tuples(st.just("setMany"), st.lists(st.tuples(slot, value), min_size=1, max_size=3)),
)
operation = st.one_of(single, single, single, single,
                      st.tuples(st.just("batch"), st.lists(single, min_size=1, max_size=4)))
sequences = st.tuples(st.lists(slot, unique=True, max_size=KEY_SLOTS),
                      st.lists(operation, min_size=1, max_size=30))


def request(op: Tuple[Any, ...], rid: int, keys: List[str], setup: Dict[str, int]) -> Dict[str, Any]:
    kind = op[0]
    if kind == "set":
        method, params = "cache.set", {"key": keys[op[1]], "value": op[2]}
    elif kind == "get":
        method, params = "cache.get", {"key": keys[op[1]]}
    elif kind == "add":
        method, params = "cache.add", {"key": keys[op[1]], "value": op[2]}
    elif kind == "cas":
        # The version the key had before the sequence: stores only if nothing wrote it since.
        version = setup.get(keys[op[1]], 1 << 52)
        method, params = "cache.cas", {"key": keys[op[1]], "value": op[2], "version": version}
    elif kind == "incr":
        method, params = "cache.incr", {"key": keys[op[1]], "by": op[2]}
    elif kind == "remove":
        method, params = "cache.remove", {"key": keys[op[1]]}
    elif kind == "evict":
        method, params = "cache.remove", {"key": keys[op[1]], "fromMemory": True, "fromDisk": False}
    elif kind == "touch":
        method, params = "cache.touch", {"key": keys[op[1]], "expiration": {"seconds": 3600}}
    elif kind == "describe":
        method, params = "cache.describe", {"key": keys[op[1]]}
    elif kind == "getMany":
        method, params = "cache.getMany", {"keys": [keys[s] for s in op[1]]}
    elif kind == "setMany":
        method, params = "cache.setMany", {"entries": [{"key": keys[s], "value": v} for s, v in op[1]]}
    else:
        raise AssertionError(kind)
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def check(op: Tuple[Any, ...], reply: Dict[str, Any], model: Model, keys: List[str],
          setup: Dict[str, int], slot_of: Dict[Tuple[str, int], str]) -> None:
    """Checks one reply against the model, then applies the operation to it."""
    kind, rid = op[0], reply["id"]
    where = f"request {rid} {op}"
    if kind == "incr":
        key = keys[op[1]]
        entry = model.state[key]
        if entry is not None and not isinstance(entry.value, int):
            assert reply.get("error", {}).get("data", {}).get("reason") == "notAnInteger", f"{where}: {reply}"
            return
        assert "error" not in reply, f"{where}: {reply}"
        result = reply["result"]
        expected = (entry.value if entry is not None else 0) + op[2]
        assert result["value"] == expected, f"{where}: expected {expected}, got {result}"
        model.versions[(rid, None)] = result["version"]
        model.state[key] = Entry(expected, rid)
        return
    assert "error" not in reply, f"{where}: {reply}"
    result = reply["result"]
    if kind == "set":
        assert result["stored"] is True, f"{where}: {result}"
        model.versions[(rid, None)] = result["version"]
        model.state[keys[op[1]]] = Entry(op[2], rid)
    elif kind == "get":
        model.check_found(keys[op[1]], result, where, slot_of)
    elif kind in ("add", "cas"):
        key = keys[op[1]]
        entry = model.state[key]
        if kind == "add":
            should = entry is None
        else:
            should = entry is not None and key in setup and entry.writer == model.setup_writer[key]
        assert result["stored"] is should, f"{where}: expected stored={should} (entry {entry}), got {result}"
        if should:
            model.versions[(rid, None)] = result["version"]
            model.state[key] = Entry(op[2], rid)
    elif kind == "remove":
        key = keys[op[1]]
        assert result["removed"] is (model.state[key] is not None), f"{where}: {result} (entry {model.state[key]})"
        model.state[key] = None
    elif kind == "evict":
        pass    # the entry stays on disk; what "removed" says of a memory-only removal is not ordered
    elif kind == "touch":
        key = keys[op[1]]
        assert result["touched"] is (model.state[key] is not None), f"{where}: {result} (entry {model.state[key]})"
    elif kind == "describe":
        key = keys[op[1]]
        entry = model.state[key]
        assert result["found"] is (entry is not None), f"{where}: {result} (entry {entry})"
        if entry is not None:
            assert result["size"] == entry.size, f"{where}: {result} (entry {entry})"
            model.check_version(entry, result["version"], where, slot_of.get((key, entry.writer)))
    elif kind == "getMany":
        assert len(result["entries"]) == len(op[1]), f"{where}: {result}"
        for s, found in zip(op[1], result["entries"]):
            model.check_found(keys[s], found, f"{where} key {keys[s]}", slot_of)
    elif kind == "setMany":
        assert result["stored"] == len(op[1]), f"{where}: {result}"
        assert len(result["versions"]) == len(op[1]), f"{where}: {result}"
        for i, ((s, v), version) in enumerate(zip(op[1], result["versions"])):
            # Each entry of a setMany is its own write: named by (request id, position).
            slot_name = f"#{i}"
            slot_of[(keys[s], rid)] = slot_name
            model.versions[(rid, slot_name)] = version
            model.state[keys[s]] = Entry(v, rid)
    else:
        raise AssertionError(kind)


def run_sequence(path: str, policy: Any, sync_disk: bool, setup_slots: List[int],
                 ops: List[Tuple[Any, ...]]) -> None:
    tag = uuid.uuid4().hex[:10]
    keys = [f"order-{tag}-{i}" for i in range(KEY_SLOTS)]
    pipe = Pipe(path)
    try:
        pipe.call("connection.configure", {"callbackQueue": policy, "loadDiskFileSynchronously": sync_disk})
        setup: Dict[str, int] = {}
        for s in setup_slots:
            setup[keys[s]] = pipe.call("cache.set", {"key": keys[s], "value": f"setup-{len(setup)}"})["version"]
        model = Model(keys, setup)

        messages: List[Any] = []
        plan: List[Tuple[Tuple[Any, ...], int]] = []
        rid = 1
        for op in ops:
            if op[0] == "batch":
                batch = []
                for inner in op[1]:
                    batch.append(request(inner, rid, keys, setup))
                    plan.append((inner, rid))
                    rid += 1
                messages.append(batch)
            else:
                messages.append(request(op, rid, keys, setup))
                plan.append((op, rid))
                rid += 1
        pipe.send(messages)
        replies = pipe.replies([r for _, r in plan])
        slot_of: Dict[Tuple[str, int], str] = {}
        for op, r in plan:
            check(op, replies[r], model, keys, setup, slot_of)
    finally:
        pipe.close()


@pytest.mark.parametrize("policy, sync_disk", CONFIGS)
def test_pipelined_sequences_match_the_sequential_model(rev2_daemon: Any, policy: Any, sync_disk: bool) -> None:
    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(sequences)
    def pipelined(sequence: Tuple[List[int], List[Tuple[Any, ...]]]) -> None:
        setup_slots, ops = sequence
        run_sequence(rev2_daemon.socket, policy, sync_disk, setup_slots, ops)

    pipelined()


@pytest.mark.parametrize("policy, sync_disk", CONFIGS)
def test_pipelined_set_get_pairs_answer_their_own_value(rev2_daemon: Any, policy: Any, sync_disk: bool) -> None:
    """200 pairs ``set ryw=<i>; get ryw`` in one write, five rounds on one connection:
    every get answers the set just before it, with that set's version."""
    key = f"ryw-{uuid.uuid4().hex[:10]}"
    pipe = Pipe(rev2_daemon.socket)
    try:
        pipe.call("connection.configure", {"callbackQueue": policy, "loadDiskFileSynchronously": sync_disk})
        for round_ in range(5):
            messages = []
            for i in range(200):
                messages.append({"jsonrpc": "2.0", "id": 2 * i + 1, "method": "cache.set",
                                 "params": {"key": key, "value": str(i)}})
                messages.append({"jsonrpc": "2.0", "id": 2 * i + 2, "method": "cache.get",
                                 "params": {"key": key}})
            pipe.send(messages)
            replies = pipe.replies(list(range(1, 401)))
            wrong = []
            for i in range(200):
                got = replies[2 * i + 2]["result"]
                version = replies[2 * i + 1]["result"]["version"]
                if got.get("value") != str(i) or got.get("version") != version:
                    wrong.append((i, got.get("value"), got.get("version"), version))
            assert not wrong, (f"round {round_}: {len(wrong)} of 200 gets did not answer their own set "
                               f"(i, value, version, set's version): {wrong[:5]}")
    finally:
        pipe.close()
