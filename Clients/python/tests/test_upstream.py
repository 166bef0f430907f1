"""halcyond as each host's near-cache in front of Redis: two daemons (two "hosts", each
with its own socket and cache folder) sharing keys through a real ``redis-server`` that
these tests start on a free loopback port.

Covered: coherence after writes through either daemon and through ``redis-cli``;
invalidation delay; ``CLIENT KILL`` of a daemon's connection, then no stale hit;
``-32006 upstreamUnavailable`` while Redis is stopped and recovery after it restarts;
only the configured prefixes are shared; the visibility in ``server.info`` and
``cache.stats``; and the order model of ``test_order.py`` with every key shared.
Every wait has a deadline; where there is no event to wait for, the tests poll.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import time
import unicodedata
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional, Tuple

import pytest

import halcyon
from conftest import Daemon, _start_daemon, short_tmpdir

REDIS_SERVER = shutil.which("valkey-server") or shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli") or shutil.which("valkey-cli")
pytestmark = pytest.mark.skipif(REDIS_SERVER is None or REDIS_CLI is None,
                                reason="redis-server is not installed (scripts/bootstrap installs it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(what: str, check: Callable[[], Any], seconds: float = 10.0, every: float = 0.005) -> Any:
    """Polls ``check`` until it returns something true; fails after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(every)


class Redis:
    """One redis-server on a loopback port, no persistence, in its own folder."""

    def __init__(self, port: Optional[int] = None) -> None:
        self.port = port or free_port()
        self.folder = short_tmpdir()
        self.proc: Optional[subprocess.Popen[bytes]] = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.folder],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until("redis-server answers PING", lambda: self.cli("PING") == "PONG", every=0.02)

    def cli(self, *args: str) -> str:
        assert REDIS_CLI is not None
        done = subprocess.run([REDIS_CLI, "-p", str(self.port), *args], capture_output=True, timeout=10)
        return done.stdout.decode().strip()

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def started(server: Any) -> Iterator[Any]:
    """Starts a Redis or a Cluster for a fixture to yield; removes it after."""
    server.start()
    yield server
    server.remove()


@pytest.fixture(scope="module")
def redis_server() -> Iterator[Redis]:
    yield from started(Redis())


def start_host(redis: Redis, *extra: str) -> Daemon:
    return _start_daemon(["--upstream", redis.url, *extra])


@pytest.fixture(scope="module")
def hosts(redis_server: Redis) -> Iterator[List[Daemon]]:
    """Two daemons sharing every key through the module's Redis."""
    daemons = [start_host(redis_server), start_host(redis_server)]
    yield daemons
    for d in daemons:
        d.stop()
        shutil.rmtree(d.folder, ignore_errors=True)


def client(d: Daemon) -> halcyon.Client:
    return halcyon.Client(d.socket, timeout=10)


def get(c: halcyon.Client, key: str) -> Any:
    return c.call("cache.get", {"key": key})


def unique(prefix: str = "k") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# ------------------------------------------------------------------ coherence

def test_a_write_through_one_host_is_read_by_the_other(hosts: List[Daemon], redis_server: Redis) -> None:
    key = unique()
    with client(hosts[0]) as a, client(hosts[1]) as b:
        written = a.call("cache.set", {"key": key, "value": "one"})
        first = get(b, key)
        assert first["value"] == "one" and first["cacheType"] == "upstream"
        assert first["version"] == written["version"]
        second = get(b, key)
        assert second["value"] == "one" and second["cacheType"] == "memory"
        # The writer keeps what it wrote.
        assert get(a, key)["cacheType"] == "memory"
        # The bytes are the value, for any Redis client.
        assert redis_server.cli("GET", key) == "one"
        # B changes it: A's copy goes, and A reads the new value from Redis.
        b.call("cache.set", {"key": key, "value": "two"})
        seen = wait_until("A sees B's write", lambda: (lambda r: r if r["value"] == "two" else None)(get(a, key)), 2)
        assert seen["cacheType"] == "upstream"


def test_a_write_through_redis_cli_reaches_both_hosts(hosts: List[Daemon], redis_server: Redis) -> None:
    key = unique()
    with client(hosts[0]) as a, client(hosts[1]) as b:
        a.call("cache.set", {"key": key, "value": "from-halcyon"})
        assert get(b, key)["value"] == "from-halcyon"
        assert get(b, key)["cacheType"] == "memory"
        assert redis_server.cli("SET", key, "from-cli") == "OK"
        for c in (a, b):
            # Foreign bytes read through as bytes (base64 shows them whatever they are).
            r = wait_until("the cli's write is seen", lambda: (lambda r: r if r.get("found") and r["cacheType"] == "upstream" else None)(
                c.call("cache.get", {"key": key, "encoding": "base64"})), 2)
            assert r["value"] == "ZnJvbS1jbGk="   # base64 of from-cli
        assert redis_server.cli("DEL", key) == "1"
        wait_until("the removal is seen", lambda: get(a, key) == {"found": False}, 2)
        wait_until("the removal is seen", lambda: get(b, key) == {"found": False}, 2)


def test_conditional_writes_agree_across_hosts(hosts: List[Daemon]) -> None:
    key, counter = unique(), unique("n")
    with client(hosts[0]) as a, client(hosts[1]) as b:
        assert a.call("cache.add", {"key": key, "value": "first"})["stored"] is True
        assert b.call("cache.add", {"key": key, "value": "second"})["stored"] is False
        version = get(b, key)["version"]
        assert a.call("cache.cas", {"key": key, "value": "a", "version": version})["stored"] is True
        assert b.call("cache.cas", {"key": key, "value": "b", "version": version})["stored"] is False
        assert get(b, key)["value"] == "a"
        for i in range(5):
            a.call("cache.incr", {"key": counter, "by": 1})
            b.call("cache.incr", {"key": counter, "by": 10})
        assert get(a, counter)["value"] == 55
        assert get(b, counter)["value"] == 55
        # create: false refuses a missing key in the same step as the sum, on any host.
        absent = unique("absent")
        assert b.call("cache.incr", {"key": absent, "by": 5, "create": False}) == \
            {"value": None, "version": None, "expiresAt": None}
        assert get(a, absent) == {"found": False}
        assert a.call("cache.incr", {"key": counter, "by": 1, "create": False})["value"] == 56
        assert b.call("cache.touch", {"key": key, "expiration": {"seconds": 100}})["touched"] is True

        # A's copy goes on the touch's invalidation, which reaches A on its own connection to
        # Redis, apart from B's reply: until then A may still answer with the old lifetime.
        def a_sees_the_touch() -> bool:
            expires = get(a, key)["expiresAt"]
            return expires is not None and 90 <= expires - time.time() <= 101

        wait_until("A sees the touched lifetime", a_sees_the_touch, 2)
        assert a.call("cache.remove", {"key": key})["removed"] is True
        wait_until("B sees the removal", lambda: get(b, key) == {"found": False}, 2)


def test_the_lifetime_is_the_upstream_keys(hosts: List[Daemon], redis_server: Redis) -> None:
    key = unique()
    with client(hosts[0]) as a:
        a.call("cache.set", {"key": key, "value": "v", "expiration": {"seconds": 60}})
        pttl = int(redis_server.cli("PTTL", key))
        assert 50_000 < pttl <= 60_000
        redis_server.cli("PEXPIRE", key, "120")
        # Expiry in Redis invalidates the copy too.
        wait_until("the expired key is gone", lambda: get(a, key) == {"found": False}, 3)


def test_reads_through_another_host_keep_a_sliding_key_alive_in_redis(hosts: List[Daemon], redis_server: Redis) -> None:
    key = unique("slide")
    with client(hosts[0]) as a, client(hosts[1]) as b:
        a.call("cache.set", {"key": key, "value": "v", "expiration": {"seconds": 2}})
        assert 0 < int(redis_server.cli("PTTL", key)) <= 2000
        assert redis_server.cli("HGET", "{" + key + "}halcyon.meta:" + key, "s") == "2000"
        slides_before = b.call("cache.stats")["upstream"]["slides"]
        began = time.monotonic()
        while time.monotonic() - began < 4.5:   # more than twice the lifetime
            assert get(b, key)["value"] == "v"
            time.sleep(0.05)
        # Alive in Redis long past its first lifetime, renewed by B's reads of its copy:
        # about once per half lifetime, not once per read (some 80 reads).
        assert int(redis_server.cli("PTTL", key)) > 0
        slides = b.call("cache.stats")["upstream"]["slides"] - slides_before
        assert 2 <= slides <= 6, slides
        wait_until("the renewals in the metrics",
                   lambda: "halcyon_upstream_slides_total" in b.call("server.metrics")["text"], 3, every=0.05)
        # Nobody reads: it ends in Redis at its sliding lifetime, and on both hosts.
        wait_until("the key expires in Redis", lambda: redis_server.cli("EXISTS", key) == "0", 5, every=0.05)
        assert get(a, key) == {"found": False} and get(b, key) == {"found": False}


def test_a_read_asking_a_lifetime_gives_it_to_the_key_in_redis(hosts: List[Daemon], redis_server: Redis) -> None:
    key = unique("renew")
    meta = "{" + key + "}halcyon.meta:" + key

    def read(expiration: Any) -> Any:
        return b.call("cache.get", {"key": key, "extendingExpiration": {"expirationTime": expiration}})

    with client(hosts[0]) as a, client(hosts[1]) as b:
        a.call("cache.set", {"key": key, "value": "v", "expiration": {"seconds": 30}})
        assert get(b, key)["value"] == "v"
        before = b.call("cache.stats")["upstream"]
        # B's read asking 60 s answers with that end and gives it to the key in Redis,
        # sliding by 60 s from then on.
        got = read({"seconds": 60})
        assert got["value"] == "v" and 55 < got["expiresAt"] - time.time() <= 61
        wait_until("Redis has the asked lifetime", lambda: int(redis_server.cli("PTTL", key)) > 50_000, 3)
        assert redis_server.cli("HGET", meta, "s") == "60000"
        # More reads asking the same renew nothing while more than half of it is left.
        for _ in range(20):
            assert read({"seconds": 60})["value"] == "v"
        after = b.call("cache.stats")["upstream"]
        assert after["slides"] - before["slides"] == 1
        # An instant: Redis ends the key then, and no read slides it any more.
        until = int(time.time()) + 30
        assert read({"date": until})["value"] == "v"
        wait_until("Redis has the instant", lambda: 0 < int(redis_server.cli("PTTL", key)) <= 31_000, 3)
        wait_until("no sliding span", lambda: redis_server.cli("HEXISTS", meta, "s") == "0", 3)
        assert b.call("cache.stats")["upstream"]["slidesRefused"] == before["slidesRefused"]


def test_remove_prefix_and_many_keys(hosts: List[Daemon], redis_server: Redis) -> None:
    prefix = unique("p") + ":"
    with client(hosts[0]) as a, client(hosts[1]) as b:
        stored = a.call("cache.setMany", {"entries": [{"key": f"{prefix}{i}", "value": str(i)} for i in range(5)]})
        assert stored["stored"] == 5
        got = b.call("cache.getMany", {"keys": [f"{prefix}{i}" for i in range(6)]})["entries"]
        assert [e.get("value") for e in got] == ["0", "1", "2", "3", "4", None]
        assert b.call("cache.removePrefix", {"prefix": prefix})["removed"] == 5
        assert redis_server.cli("EXISTS", f"{prefix}0") == "0"
        wait_until("A's copies are gone", lambda: get(a, f"{prefix}1") == {"found": False}, 2)


#: Canonically equal, different UTF-8: NFC and NFD "café", the Ångström sign and Å,
#: precomposed and conjoining Hangul. The client sends a str's UTF-8 as it is.
CANONICAL_PAIRS = [("caf\u00e9", "cafe\u0301"), ("\u212b", "\u00c5"), ("\ud55c", "\u1112\u1161\u11ab")]


def all_keys(c: halcyon.Client, prefix: str) -> set:
    """Every key under ``prefix``, page by page (a page may be empty before the end)."""
    listed: set = set()
    cursor = None
    for _ in range(1000):
        page = c.call("cache.keys", {"prefix": prefix, "limit": 100, **({"cursor": cursor} if cursor else {})})
        listed.update(page["keys"])
        cursor = page["cursor"]
        if cursor is None:
            return listed
    raise AssertionError("the listing did not end")


@pytest.mark.parametrize("pair", CANONICAL_PAIRS, ids=["e-acute", "angstrom", "hangul"])
def test_canonically_equal_keys_are_two_keys_on_every_host_and_in_redis(
        hosts: List[Daemon], redis_server: Redis, pair: Any) -> None:
    first, second = pair
    assert unicodedata.normalize("NFC", first) == unicodedata.normalize("NFC", second)
    assert first.encode() != second.encode()
    base = unique("bytes") + ":"
    k1, k2 = base + first, base + second
    n1, n2 = base + "n:" + first, base + "n:" + second
    l1, l2 = base + "l:" + first, base + "l:" + second
    with client(hosts[0]) as a, client(hosts[1]) as b:
        a.call("cache.set", {"key": k1, "value": "one"})
        b.call("cache.set", {"key": k2, "value": "two"})
        # Redis holds both, each under its own bytes.
        assert redis_server.cli("GET", k1) == "one"
        assert redis_server.cli("GET", k2) == "two"
        for c in (a, b):
            assert get(c, k1)["value"] == "one"
            assert get(c, k2)["value"] == "two"
            # Twice: the second read answers from the host's memory.
            assert get(c, k1)["value"] == "one"
            assert [e["value"] for e in c.call("cache.getMany", {"keys": [k2, k1]})["entries"]] == ["two", "one"]
        # Two counters; add and cas each see their own key.
        assert a.call("cache.incr", {"key": n1, "by": 1})["value"] == 1
        assert b.call("cache.incr", {"key": n2, "by": 5})["value"] == 5
        assert a.call("cache.add", {"key": base + "add:" + first, "value": "x"})["stored"] is True
        assert b.call("cache.add", {"key": base + "add:" + second, "value": "y"})["stored"] is True
        assert a.call("cache.cas", {"key": k1, "value": "no", "version": get(a, k2)["version"]})["stored"] is False
        assert b.call("cache.setMany", {"entries": [{"key": k1, "value": "1"}, {"key": k2, "value": "2"}]})["stored"] == 2
        for c in (a, b):
            wait_until("both writes are seen", lambda: get(c, k1).get("value") == "1" and get(c, k2).get("value") == "2", 2)
        assert {k1, k2, n1, n2} <= all_keys(a, base)
        # A lease on each key, taken through different hosts.
        assert "lease" in a.call("cache.lease", {"key": l1, "ttl": {"seconds": 30}})
        assert "lease" in b.call("cache.lease", {"key": l2, "ttl": {"seconds": 30}})
        # Removing one leaves the other, on both hosts and in Redis.
        assert a.call("cache.remove", {"key": k1})["removed"] is True
        assert redis_server.cli("EXISTS", k2) == "1"
        for c in (a, b):
            wait_until("the removal is seen", lambda: get(c, k1) == {"found": False}, 2)
            assert get(c, k2)["value"] == "2"
        assert b.call("cache.removeMany", {"keys": [n2]})["removed"] == 1
        assert get(a, n1)["value"] == 1
        # A prefix is bytes: the whole of one key is no prefix of the other.
        assert b.call("cache.removePrefix", {"prefix": k2})["removed"] == 1
        assert redis_server.cli("EXISTS", base + "add:" + first) == "1"


def test_remove_prefix_keeps_its_place_among_pipelined_writes(hosts: List[Daemon], redis_server: Redis) -> None:
    """set k (three times: the later ones wait behind the first on this host);
    removePrefix p; set k2 — on one connection, in one write: removePrefix removes k
    (written before it) and leaves k2 (written after it), each time."""
    from test_order import Pipe

    for _ in range(20):
        prefix = unique("o") + ":"
        before, after, other = f"{prefix}before", f"{prefix}after", unique("other")
        pipe = Pipe(hosts[0].socket)
        try:
            requests = [
                ("cache.set", {"key": before, "value": "1"}),
                ("cache.set", {"key": before, "value": "2"}),
                ("cache.set", {"key": before, "value": "3"}),
                ("cache.set", {"key": other, "value": "x"}),
                ("cache.removePrefix", {"prefix": prefix}),
                ("cache.set", {"key": after, "value": "2"}),
                ("cache.get", {"key": before}),
                ("cache.get", {"key": after}),
            ]
            pipe.send([{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in enumerate(requests)])
            replies = pipe.replies(list(range(len(requests))))
        finally:
            pipe.close()
        assert all("result" in replies[i] for i in range(len(requests))), replies
        assert replies[4]["result"]["removed"] == 1
        assert replies[6]["result"] == {"found": False}
        assert replies[7]["result"]["value"] == "2"
        assert redis_server.cli("EXISTS", before) == "0"
        assert redis_server.cli("GET", after) == "2"
        assert redis_server.cli("GET", other) == "x"


def test_set_many_and_remove_many_of_shared_keys_go_as_one_batch(hosts: List[Daemon], redis_server: Redis) -> None:
    prefix = unique("m") + ":"
    keys = [f"{prefix}{i}" for i in range(50)]
    with client(hosts[0]) as a, client(hosts[1]) as b:
        a.call("cache.get", {"key": keys[0]})   # B holds no copy; A learns the key is missing
        entries = [{"key": k, "value": f"v{i}"} for i, k in enumerate(keys)]
        entries.append({"key": keys[7], "value": "last"})   # named twice: the later wins
        entries.append({"key": f"{prefix}gone", "value": "x", "expiration": "expired"})
        stored = a.call("cache.setMany", {"entries": entries})
        assert stored["stored"] == 51, stored   # 50 keys, one of them twice; the expired one stores nothing
        assert redis_server.cli("GET", keys[7]) == "last"
        assert redis_server.cli("GET", keys[49]) == "v49"
        assert redis_server.cli("EXISTS", f"{prefix}gone") == "0"
        # The writer keeps what it wrote; the other host reads it from Redis.
        mine = get(a, keys[3])
        assert mine["value"] == "v3" and mine["cacheType"] == "memory"
        got = b.call("cache.getMany", {"keys": keys})["entries"]
        assert [e.get("value") for e in got] == [("last" if i == 7 else f"v{i}") for i in range(50)]
        removed = b.call("cache.removeMany", {"keys": keys[:10] + [f"{prefix}none"]})
        assert removed["removed"] == 10, removed
        assert redis_server.cli("EXISTS", keys[0]) == "0" and redis_server.cli("EXISTS", keys[10]) == "1"
        wait_until("A's copies of the removed keys are gone", lambda: get(a, keys[2]) == {"found": False}, 2)
        assert get(a, keys[12])["value"] == "v12"


def test_a_set_many_of_shared_keys_is_a_few_writes_not_one_per_key(redis_server: Redis) -> None:
    fresh = start_host(redis_server)   # its own counters
    try:
        with client(fresh) as c:
            prefix = unique("w") + ":"
            c.call("cache.setMany", {"entries": [{"key": f"{prefix}{i}", "value": "v"} for i in range(60)]})
            upstream = wait_until("the batch sampled", lambda: (lambda u: u if u["batchedCommands"] >= 60 else None)(
                c.call("cache.stats")["upstream"]), 3, every=0.05)
            # One write to the one node, and at most one more for scripts a fresh server lacks.
            assert 1 <= upstream["writes"] <= 2, upstream
            assert upstream["batchedCommands"] in (60, 120), upstream
    finally:
        fresh.stop()
        shutil.rmtree(fresh.folder, ignore_errors=True)


def test_only_the_configured_prefixes_are_shared(redis_server: Redis) -> None:
    host = start_host(redis_server, "--upstream-prefix", "shared:")
    try:
        with client(host) as c:
            shared, local = unique("shared:"), unique("local:")
            c.call("cache.set", {"key": shared, "value": "s"})
            c.call("cache.set", {"key": local, "value": "l"})
            assert redis_server.cli("GET", shared) == "s"
            assert redis_server.cli("EXISTS", local) == "0"
            info = c.info()["upstream"]
            assert info["prefixes"] == ["shared:"]
    finally:
        host.stop()
        shutil.rmtree(host.folder, ignore_errors=True)


# ------------------------------------------------------------------ clear, removeExpired, trim

@pytest.fixture
def prefixed_hosts() -> Iterator[Tuple[Redis, List[Daemon]]]:
    """A Redis of its own (so counts of what is in it are exact) and two daemons that
    share the keys starting with ``s:`` and keep every other key to themselves."""
    redis = Redis()
    redis.start()
    daemons = [start_host(redis, "--upstream-prefix", "s:") for _ in range(2)]
    yield redis, daemons
    for d in daemons:
        d.stop()
        shutil.rmtree(d.folder, ignore_errors=True)
    redis.remove()


def test_clear_drops_this_hosts_shared_copies_and_leaves_the_keys(prefixed_hosts: Tuple[Redis, List[Daemon]]) -> None:
    redis, hosts = prefixed_hosts
    with client(hosts[0]) as a, client(hosts[1]) as b:
        a.call("cache.set", {"key": "local:1", "value": "l1"})
        a.call("cache.set", {"key": "local:2", "value": "l2", "toDisk": False})
        a.call("cache.set", {"key": "s:1", "value": "one"})           # A keeps what it wrote
        b.call("cache.set", {"key": "s:2", "value": "two"})
        assert get(a, "s:2")["cacheType"] == "upstream"                # now A holds a copy of it too
        assert get(b, "s:1")["cacheType"] == "upstream"
        # Two of A's own keys, two copies of shared keys: counted apart.
        assert a.call("cache.clear") == {"removed": 2, "droppedShared": 2}
        assert get(a, "local:1") == {"found": False} and get(a, "local:2") == {"found": False}
        # The shared keys are still in Redis and on B; A reads them from Redis again.
        assert redis.cli("GET", "s:1") == "one" and redis.cli("GET", "s:2") == "two"
        assert get(b, "s:1")["cacheType"] == "memory"
        again = get(a, "s:1")
        assert again["value"] == "one" and again["cacheType"] == "upstream"
        # Clearing the disk tier alone leaves memory, copies included.
        assert a.call("cache.clear", {"memory": False}) == {"removed": 0, "droppedShared": 0}
        assert get(a, "s:1")["cacheType"] == "memory"


def test_clear_shared_removes_the_shared_keys_for_every_host(prefixed_hosts: Tuple[Redis, List[Daemon]]) -> None:
    redis, hosts = prefixed_hosts
    with client(hosts[0]) as a, client(hosts[1]) as b:
        a.call("cache.set", {"key": "local:1", "value": "l1"})
        b.call("cache.set", {"key": "local:b", "value": "lb"})
        a.call("cache.set", {"key": "s:1", "value": "one"})
        b.call("cache.set", {"key": "s:2", "value": "two"})
        b.call("cache.set", {"key": "s:3", "value": "three"})
        assert get(b, "s:1")["cacheType"] == "upstream"
        assert redis.cli("SET", "foreign", "x") == "OK"                  # not under a shared prefix
        cleared = halcyon.Client(hosts[0].socket, timeout=10).clear(shared=True)
        assert (int(cleared), cleared.dropped_shared, cleared.removed_shared) == (1, 1, 3)
        # Gone from Redis, values and metadata alike; what is not shared stays.
        assert redis.cli("KEYS", "*s:*") == ""
        assert redis.cli("GET", "foreign") == "x"
        # Gone on this host and, by Redis's invalidation, on the other.
        assert get(a, "s:1") == {"found": False}
        wait_until("B's copy is gone", lambda: get(b, "s:1") == {"found": False}, 2)
        assert get(b, "s:2") == {"found": False}
        # B's own keys are B's: another host's clear leaves them.
        assert get(b, "local:b")["value"] == "lb"


def test_clear_shared_waits_for_the_shared_writes_before_it(prefixed_hosts: Tuple[Redis, List[Daemon]]) -> None:
    """set s:k; clear shared; set s:after — on one connection, in one write: the clear
    removes what was written before it and nothing written after it."""
    from test_order import Pipe

    redis, hosts = prefixed_hosts
    for round in range(10):
        pipe = Pipe(hosts[0].socket)
        try:
            requests = [
                ("cache.set", {"key": "s:before", "value": str(round)}),
                ("cache.clear", {"shared": True}),
                ("cache.set", {"key": "s:after", "value": str(round)}),
                ("cache.get", {"key": "s:before"}),
                ("cache.get", {"key": "s:after"}),
            ]
            pipe.send([{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in enumerate(requests)])
            replies = pipe.replies(list(range(len(requests))))
        finally:
            pipe.close()
        assert all("result" in replies[i] for i in range(len(requests))), replies
        # s:after of the round before, and s:before of this one.
        assert replies[1]["result"]["removedShared"] == (1 if round == 0 else 2), replies[1]
        assert replies[3]["result"] == {"found": False}
        assert replies[4]["result"]["value"] == str(round)
        assert redis.cli("EXISTS", "s:before") == "0" and redis.cli("GET", "s:after") == str(round)


def test_remove_expired_and_trim_say_what_they_did_with_shared_keys(prefixed_hosts: Tuple[Redis, List[Daemon]]) -> None:
    redis, hosts = prefixed_hosts
    with client(hosts[0]) as a:
        a.call("cache.set", {"key": "local:e", "value": "l", "expiration": {"seconds": 60}})
        a.call("cache.set", {"key": "local:n", "value": "l", "expiration": "never", "memoryExpiration": "never"})
        a.call("cache.set", {"key": "s:e", "value": "s", "expiration": {"seconds": 60}})
        a.call("cache.set", {"key": "s:n", "value": "s", "expiration": "never"})
        later = int(time.time()) + 3600
        # An hour on, the local key with a lifetime and the copy of the shared one are over.
        assert a.call("cache.removeExpired", {"referenceDate": later}) == {"removed": 1, "droppedShared": 1}
        # The shared key itself is Redis's to expire: it is still there, and read from there.
        assert 0 < int(redis.cli("PTTL", "s:e")) <= 60_000
        assert get(a, "s:e")["cacheType"] == "upstream"
        assert get(a, "s:n")["cacheType"] == "memory"
        # A trim works on the disk tier, where shared keys never are.
        trimmed = a.call("cache.trim")
        assert trimmed["removed"] == 0 and trimmed["droppedShared"] == 0, trimmed


def test_clear_shared_needs_an_upstream(daemon: Daemon) -> None:
    with client(daemon) as c:
        with pytest.raises(halcyon.errors.NoUpstreamError) as raised:
            c.clear(shared=True)
        assert raised.value.reason == "noUpstream"
        # Without an upstream the replies are as they were.
        assert c.call("cache.trim").keys() == {"removed", "totalSize"}


def test_the_cli_clears_shared_keys_and_says_so(prefixed_hosts: Tuple[Redis, List[Daemon]], cli_bin: str) -> None:
    redis, hosts = prefixed_hosts
    with client(hosts[0]) as a:
        a.call("cache.set", {"key": "local:1", "value": "l"})
        a.call("cache.set", {"key": "s:1", "value": "one"})
        a.call("cache.set", {"key": "s:2", "value": "two"})

    def run(*args: str) -> str:
        done = subprocess.run([cli_bin, "--socket", hosts[0].socket, *args], capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout.decode().strip()

    assert run("clear", "--memory-only") == "removed 1; dropped 2 shared copies"
    assert run("clear", "--shared") == "removed 1; dropped 0 shared copies; removed 2 shared keys upstream"
    assert redis.cli("EXISTS", "s:1") == "0"
    assert run("trim").startswith("removed 0; dropped 0 shared copies; disk tier now ")


# ------------------------------------------------------------------ invalidation timing

def test_invalidation_reaches_the_other_host_within_50_ms(hosts: List[Daemon]) -> None:
    """Twenty rounds: B holds a copy in memory, A writes, B polls until it reads the new
    value. Each delay is bounded by 1 s; the median, measured from A's reply, by 50 ms."""
    key = unique()
    delays = []
    with client(hosts[0]) as a, client(hosts[1]) as b:
        for i in range(20):
            a.call("cache.set", {"key": key, "value": f"v{i}"})
            wait_until("B reads the write", lambda: get(b, key).get("value") == f"v{i}", 2)
            assert get(b, key)["cacheType"] == "memory"
            a.call("cache.set", {"key": key, "value": f"w{i}"})
            written = time.monotonic()
            wait_until("B sees the change", lambda: get(b, key).get("value") == f"w{i}", 1, every=0.0005)
            delays.append(time.monotonic() - written)
    median = statistics.median(delays)
    assert median < 0.050, f"median invalidation delay {median * 1000:.1f} ms; all: {[round(d * 1000, 1) for d in delays]}"


# ------------------------------------------------------------------ failures

def kill_clients_of(redis: Redis, d: Daemon) -> int:
    """CLIENT KILL of every connection the daemon holds (named halcyond-<pid>)."""
    assert d.proc is not None
    name = f"halcyond-{d.proc.pid}"
    ids = [line.split(" ")[0].split("=")[1] for line in redis.cli("CLIENT", "LIST").splitlines()
           if f" name={name} " in line]
    for client_id in ids:
        redis.cli("CLIENT", "KILL", "ID", client_id)
    return len(ids)


def test_a_killed_tracking_connection_leaves_no_stale_hit(hosts: List[Daemon], redis_server: Redis) -> None:
    key = unique()
    with client(hosts[0]) as a, client(hosts[1]) as b:
        a.call("cache.set", {"key": key, "value": "before"})
        assert get(b, key)["value"] == "before"
        assert get(b, key)["cacheType"] == "memory"
        flushes = b.stats()["upstream"]["flushes"]
        assert kill_clients_of(redis_server, hosts[1]) >= 1
        # Changed while B had no connection, so no invalidation can ever reach B for it.
        assert redis_server.cli("SET", key, "after") == "OK"
        assert get(b, key).get("value") != "before"
        assert b.stats()["upstream"]["flushes"] > flushes
        # Written by a client that knows nothing of Halcyon: bytes, shown here as text.
        wait_until("B reads the new value",
                   lambda: b.call("cache.get", {"key": key, "encoding": "utf8"}).get("value") == "after", 5, every=0.02)
        wait_until("B reconnected", lambda: b.info()["upstream"]["state"] == "connected", 5, every=0.05)
        # The connection counters are sampled every 250 ms.
        wait_until("the reconnect is counted", lambda: b.stats()["upstream"]["reconnects"] >= 1, 3, every=0.05)


def test_upstream_unavailable_while_redis_is_stopped_then_recovery() -> None:
    redis = Redis()
    redis.start()
    host = start_host(redis)
    try:
        with client(host) as c:
            key = unique()
            c.call("cache.set", {"key": key, "value": "v"})
            redis.stop()
            with pytest.raises(halcyon.HalcyonError) as refused:
                # The first write may meet the connection before its loss is noticed.
                wait_until("writes are refused", lambda: c.call("cache.set", {"key": key, "value": "w"}) and False, 5)
            assert refused.value.code == -32006
            assert refused.value.reason == "upstreamUnavailable"
            assert isinstance(refused.value, halcyon.errors.UpstreamUnavailableError)
            for method, params in (("cache.add", {"key": key, "value": "x"}), ("cache.incr", {"key": unique(), "by": 1}),
                                   ("cache.remove", {"key": key}), ("cache.touch", {"key": key})):
                with pytest.raises(halcyon.HalcyonError) as failed:
                    c.call(method, params)
                assert failed.value.code == -32006, method
            # A read answers from a still-valid copy or misses: the copy went with the
            # connection, so it misses; never the unacknowledged "w".
            assert get(c, key) == {"found": False}
            assert c.info()["upstream"]["state"] == "unavailable" or wait_until(
                "state unavailable", lambda: c.info()["upstream"]["state"] == "unavailable", 2)
            assert c.stats()["upstream"]["unavailable"] >= 1
            redis.start()   # same port, empty (no persistence)
            wait_until("writes work again", lambda: _stores(c, key, "back"), 10, every=0.05)
            assert get(c, key)["value"] == "back"
            assert redis.cli("GET", key) == "back"
    finally:
        host.stop()
        shutil.rmtree(host.folder, ignore_errors=True)
        redis.remove()


def _stores(c: halcyon.Client, key: str, value: str) -> bool:
    try:
        return bool(c.call("cache.set", {"key": key, "value": value})["stored"])
    except halcyon.HalcyonError as e:
        assert e.code == -32006, e
        return False


# ------------------------------------------------------------------ leases

def test_two_hosts_by_eight_callers_compute_one_key_once(hosts: List[Daemon], redis_server: Redis) -> None:
    """16 callers miss the same key at once, 8 through each daemon: one gets the lease
    (held in Redis), computes, and writes with it; the other 15 wait (woken by the lease
    key's invalidation, or on the holder's host by the release itself) and read the value."""
    import threading

    key = unique("lease")
    computed: List[str] = []
    answers: List[Any] = []
    errors: List[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(16)

    def caller(d: Daemon, n: int) -> None:
        try:
            with client(d) as c:
                start.wait(timeout=10)
                r = c.call("cache.lease", {"key": key, "ttl": {"seconds": 20}, "wait": 20})
                if "lease" in r:
                    with lock:
                        computed.append(f"{d.socket}#{n}")
                    time.sleep(0.3)   # the expensive computation
                    c.call("cache.set", {"key": key, "value": "computed", "lease": r["lease"]})
                    r = get(c, key)
                with lock:
                    answers.append(r)
        except BaseException as e:  # noqa: BLE001 - reported below
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=caller, args=(hosts[i % 2], i)) for i in range(16)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a caller is still waiting after 30 s"
    assert not errors, errors
    assert len(computed) == 1, f"computed {len(computed)} times: {computed}"
    assert [a.get("value") for a in answers] == ["computed"] * 16, answers
    # Nobody waited for the lease's 20 s lifetime: the release woke them.
    assert time.monotonic() - began < 15
    assert redis_server.cli("EXISTS", "{" + key + "}halcyon.lease:" + key) == "0"


def test_a_released_lease_passes_to_a_waiter_on_the_other_host(hosts: List[Daemon]) -> None:
    key = unique("lease")
    with client(hosts[0]) as a, client(hosts[1]) as b:
        first = a.call("cache.lease", {"key": key, "ttl": {"seconds": 30}})
        assert "lease" in first
        assert b.call("cache.lease", {"key": key, "ttl": {"seconds": 30}}) == {"found": False, "leased": True}
        result: List[Any] = []
        import threading

        def wait_for_lease() -> None:
            with client(hosts[1]) as c:
                result.append(c.call("cache.lease", {"key": key, "ttl": {"seconds": 30}, "wait": 10}))

        waiter = threading.Thread(target=wait_for_lease)
        waiter.start()
        wait_until("B's caller waits", lambda: b.stats()["upstream"]["leaseWaiters"] == 1, 5)
        assert a.call("cache.releaseLease", {"key": key, "lease": first["lease"]}) == {"released": True}
        waiter.join(timeout=10)
        assert result and "lease" in result[0], result


def test_a_holder_that_disconnects_gives_the_lease_back_to_every_host(hosts: List[Daemon], redis_server: Redis) -> None:
    key = unique("lease")
    lease_key = "{" + key + "}halcyon.lease:" + key
    holder = client(hosts[0])
    assert "lease" in holder.call("cache.lease", {"key": key, "ttl": {"seconds": 60}})
    assert redis_server.cli("EXISTS", lease_key) == "1"
    result: List[Any] = []
    import threading

    def wait_for_lease() -> None:
        with client(hosts[1]) as c:
            result.append(c.call("cache.lease", {"key": key, "ttl": {"seconds": 30}, "wait": 30}))

    with client(hosts[1]) as b:
        waiter = threading.Thread(target=wait_for_lease)
        waiter.start()
        wait_until("B's caller waits", lambda: b.stats()["upstream"]["leaseWaiters"] == 1, 5)
        began = time.monotonic()
        holder.close()   # the socket closes; nothing is released
        waiter.join(timeout=20)
        assert not waiter.is_alive()
        # Woken by the release at disconnect, not by the lease's 60 s end.
        assert time.monotonic() - began < 10
    assert result and "lease" in result[0], result
    # The waiter's connection has closed too: its lease went with it.
    wait_until("the second holder's lease is given back", lambda: redis_server.cli("EXISTS", lease_key) == "0", 5)


# ------------------------------------------------------------------ visibility

def test_info_and_stats_show_the_upstream(hosts: List[Daemon], redis_server: Redis) -> None:
    with client(hosts[0]) as a:
        key = unique()
        a.call("cache.set", {"key": key, "value": "v"})
        a.call("cache.get", {"key": unique()})   # an upstream miss
        info = wait_until("connected", lambda: (lambda u: u if u["state"] == "connected" else None)(a.info()["upstream"]), 3)
        assert info["cluster"] is False
        assert info["nodes"] == [f"127.0.0.1:{redis_server.port}"]
        assert info["prefixes"] == []
        stats = wait_until("commands sampled", lambda: (lambda u: u if u["commands"] > 0 else None)(a.stats()["upstream"]), 3)
        for field in ("hits", "misses", "invalidations", "reconnects", "redirects", "roundTripMeanMicros", "roundTripMaxMicros"):
            assert field in stats, field
        assert stats["misses"] >= 1
        # Each of them is described in Docs/PROTOCOL.md's cache.stats section.
        protocol = (Path(__file__).resolve().parents[3] / "Docs" / "PROTOCOL.md").read_text()
        prose = protocol.split("\n### cache.stats\n")[1].split("```wire")[0]
        assert [f for f in stats if f"`{f}`" not in prose] == []
        text = a.call("server.metrics")["text"]
        assert "halcyon_upstream_misses_total" in text and "halcyon_upstream_round_trip_mean_seconds" in text
    cli = os.environ.get("HALCYON_BIN") or str(Path(__file__).resolve().parents[3] / ".build" / "debug" / "halcyon")
    if os.access(cli, os.X_OK):
        shown = subprocess.run([cli, "--socket", hosts[0].socket, "stats"], capture_output=True, text=True, timeout=30).stdout
        for line in ("upstream.hits", "upstream.invalidations", "upstream.reconnects", "upstream.redirects",
                     "upstream.roundTripMeanMicros"):
            assert line in shown, shown


# ------------------------------------------------------------------ order

@pytest.mark.parametrize("policy, sync_disk", [("untouch", False), ({"dispatch": {"concurrent": False}}, True)])
def test_order_model_holds_with_every_key_shared(hosts: List[Daemon], policy: Any, sync_disk: bool) -> None:
    """test_order.py's model-based check against a daemon whose every key lives in Redis."""
    from hypothesis import HealthCheck, given, settings
    from test_order import run_sequence, sequences

    @settings(max_examples=25, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(sequences)
    def pipelined(sequence: Any) -> None:
        setup_slots, ops = sequence
        run_sequence(hosts[0].socket, policy, sync_disk, setup_slots, ops)

    pipelined()


# ------------------------------------------------------------------ cluster

class Cluster:
    """Three primaries, no replicas, on loopback ports (``redis-cli --cluster create``);
    each node keeps its nodes.conf in its folder, so a killed node restarts as itself."""

    def __init__(self) -> None:
        self.nodes: List[Redis] = []
        for _ in range(3):
            while True:
                port = free_port()
                if port + 10000 < 65536 and _can_bind(port + 10000):
                    break
            self.nodes.append(Redis(port))

    def start(self) -> None:
        for node in self.nodes:
            self.start_node(node)
        assert REDIS_CLI is not None
        subprocess.run([REDIS_CLI, "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in self.nodes],
                        "--cluster-replicas", "0", "--cluster-yes"], capture_output=True, timeout=60, check=True)
        self.wait_ok()

    def start_node(self, node: Redis) -> None:
        assert REDIS_SERVER is not None
        node.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(node.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", node.folder, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-node-timeout", "1000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until("node answers PING", lambda: node.cli("PING") == "PONG", every=0.02)

    def wait_ok(self) -> None:
        wait_until("cluster_state:ok on every node",
                   lambda: all("cluster_state:ok" in n.cli("CLUSTER", "INFO") for n in self.nodes), 30, every=0.1)

    def node_serving(self, key: str) -> Redis:
        slot = int(self.nodes[0].cli("CLUSTER", "KEYSLOT", key))
        for node in self.nodes:
            for line in node.cli("CLUSTER", "NODES").splitlines():
                parts = line.split()
                if "myself" not in parts[2]:
                    continue
                for r in parts[8:]:
                    lo, _, hi = r.partition("-")
                    if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                        return node
        raise AssertionError(f"no node serves slot {slot}")

    def remove(self) -> None:
        for node in self.nodes:
            node.remove()


def _can_bind(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    yield from started(Cluster())


@pytest.fixture(scope="module")
def cluster_hosts(cluster: Cluster) -> Iterator[List[Daemon]]:
    """Two daemons, each given two of the three nodes as seeds."""
    seeds = [f"redis://127.0.0.1:{n.port}" for n in cluster.nodes]
    daemons = [_start_daemon(["--upstream", seeds[0], "--upstream", seeds[1]]),
               _start_daemon(["--upstream", seeds[2], "--upstream", seeds[0]])]
    yield daemons
    for d in daemons:
        d.stop()
        shutil.rmtree(d.folder, ignore_errors=True)


def test_cluster_coherence_across_hosts_and_slots(cluster: Cluster, cluster_hosts: List[Daemon]) -> None:
    keys = [unique(f"c{i}") for i in range(30)]   # spread over the three primaries
    assert len({cluster.node_serving(k).port for k in keys}) == 3
    with client(cluster_hosts[0]) as a, client(cluster_hosts[1]) as b:
        info = wait_until("cluster recognised", lambda: (lambda u: u if u["cluster"] and len(u["nodes"]) == 3 else None)(
            b.info()["upstream"]), 5, every=0.05)
        assert sorted(info["nodes"]) == sorted(f"127.0.0.1:{n.port}" for n in cluster.nodes)
        for k in keys:
            a.call("cache.set", {"key": k, "value": f"a-{k}"})
        for k in keys:
            assert get(b, k)["value"] == f"a-{k}"
            assert get(b, k)["cacheType"] == "memory"
        # Changes through the other host and through the node itself invalidate, on every node.
        for k in keys[:10]:
            b.call("cache.set", {"key": k, "value": "b"})
        for k in keys[10:20]:
            assert cluster.node_serving(k).cli("SET", k, "cli") == "OK"
        for k in keys[:10]:
            wait_until("A sees B's write", lambda: get(a, k).get("value") == "b", 2)
        for k in keys[10:20]:
            wait_until("A sees the cli's write",
                       lambda: a.call("cache.get", {"key": k, "encoding": "utf8"}).get("value") == "cli", 2)
        assert a.call("cache.removePrefix", {"prefix": "c2"})["removed"] >= 1


def test_cluster_set_many_across_slots(cluster: Cluster, cluster_hosts: List[Daemon]) -> None:
    keys = [unique(f"sm{i}") for i in range(30)]
    assert len({cluster.node_serving(k).port for k in keys}) == 3
    with client(cluster_hosts[0]) as a, client(cluster_hosts[1]) as b:
        wait_until("cluster recognised", lambda: a.info()["upstream"]["cluster"], 5, every=0.05)
        a.call("cache.setMany", {"entries": [{"key": k, "value": k} for k in keys]})
        for k in keys:
            assert cluster.node_serving(k).cli("GET", k) == k
        assert [e.get("value") for e in b.call("cache.getMany", {"keys": keys})["entries"]] == keys
        assert b.call("cache.removeMany", {"keys": keys})["removed"] == 30
        for k in keys:
            assert cluster.node_serving(k).cli("EXISTS", k) == "0"
        wait_until("A's copies are gone", lambda: all(get(a, k) == {"found": False} for k in keys[:5]), 2)


def test_cluster_keys_and_lease_status_span_every_host_and_node(cluster: Cluster, cluster_hosts: List[Daemon]) -> None:
    prefix = unique("ck") + ":"
    keys = [f"{prefix}{i}" for i in range(40)]
    assert len({cluster.node_serving(k).port for k in keys}) == 3
    with client(cluster_hosts[0]) as a, client(cluster_hosts[1]) as b:
        wait_until("cluster recognised", lambda: b.info()["upstream"]["cluster"], 5, every=0.05)
        a.call("cache.setMany", {"entries": [{"key": k, "value": "v"} for k in keys]})
        get(b, keys[0])   # B holds one copy: listed once, not twice
        leased = f"{prefix}leased"   # no value, and its lease key is not listed
        lease = a.call("cache.lease", {"key": leased, "ttl": {"seconds": 30}})
        assert "lease" in lease
        # B lists every key, though A wrote them, in pages of at most 7.
        listed: List[str] = []
        cursor = None
        for _ in range(200):
            page = b.call("cache.keys", {"prefix": prefix, "limit": 7, **({"cursor": cursor} if cursor else {})})
            assert len(page["keys"]) <= 7
            listed += page["keys"]
            cursor = page["cursor"]
            if cursor is None:
                break
        assert sorted(listed) == sorted(keys)
        # The lease A holds, seen from B; then released.
        status = b.call("cache.leaseStatus", {"key": leased})
        assert status["leased"] is True and status["waiters"] == 0 and status["expiresAt"] is not None
        assert b.call("cache.leaseStatus", {"key": f"{prefix}1"}) == {"leased": False}
        assert a.call("cache.releaseLease", {"key": leased, "lease": lease["lease"]}) == {"released": True}
        assert b.call("cache.leaseStatus", {"key": leased}) == {"leased": False}


def test_a_killed_and_restarted_cluster_node(cluster: Cluster, cluster_hosts: List[Daemon]) -> None:
    keys = [unique(f"r{i}") for i in range(30)]
    victim = cluster.node_serving(keys[0])
    lost = [k for k in keys if cluster.node_serving(k) is victim]
    kept = [k for k in keys if cluster.node_serving(k) is not victim]
    assert lost and kept
    with client(cluster_hosts[0]) as a, client(cluster_hosts[1]) as b:
        for k in keys:
            a.call("cache.set", {"key": k, "value": "v1"})
            assert get(b, k)["value"] == "v1"
        victim.stop()
        # Writes to the dead node's slots are refused, the others go on.
        with pytest.raises(halcyon.HalcyonError) as refused:
            wait_until("the dead node's slots are refused",
                       lambda: a.call("cache.set", {"key": lost[0], "value": "v2"}) and False, 10, every=0.05)
        assert refused.value.code == -32006
        for k in kept:
            a.call("cache.set", {"key": k, "value": "v2"})
            wait_until("B sees it", lambda: get(b, k).get("value") == "v2", 2)
        # No stale hit for the dead node's keys on either host (their copies went with the
        # connection): a miss, never "v1".
        for k in lost:
            assert get(b, k).get("value") != "v1"
        cluster.start_node(victim)   # same port, same nodes.conf: the same node, empty
        cluster.wait_ok()
        wait_until("the restarted node takes writes",
                   lambda: _stores(a, lost[0], "v3"), 20, every=0.1)
        assert get(b, lost[0])["value"] == "v3"
        for k in lost:
            a.call("cache.set", {"key": k, "value": "v3"})
            assert get(b, k)["value"] == "v3"


def test_cluster_clear_shared_reaches_every_node(cluster: Cluster, cluster_hosts: List[Daemon]) -> None:
    keys = [unique(f"z{i}") for i in range(30)]   # spread over the three primaries
    assert len({cluster.node_serving(k).port for k in keys}) == 3

    def in_redis() -> List[str]:
        return [k for n in cluster.nodes for k in n.cli("KEYS", "*").split()]

    fresh = _start_daemon(["--upstream", f"redis://127.0.0.1:{cluster.nodes[2].port}"])   # its own copies only
    try:
        with client(cluster_hosts[0]) as a, client(fresh) as c:
            for k in keys:
                a.call("cache.set", {"key": k, "value": "v"})
            assert get(c, keys[0])["cacheType"] == "upstream"
            values = [k for k in in_redis() if "halcyon." not in k]     # these tests' keys too
            assert set(keys) <= set(values)
            assert c.call("cache.clear", {"shared": True}) == {"removed": 0, "droppedShared": 1, "removedShared": len(values)}
            assert [k for k in in_redis() if "halcyon.lease:" not in k] == []   # values and metadata, every node
            wait_until("A's copies are gone", lambda: get(a, keys[3]) == {"found": False}, 2)
    finally:
        fresh.stop()
        shutil.rmtree(fresh.folder, ignore_errors=True)
