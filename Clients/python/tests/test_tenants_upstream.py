"""Tenancy with shared keys: two daemons ("two hosts", each with its own socket, cache
folder and copy of one rules file) in front of one real ``redis-server``, with clients
running as other users (as test_tenants.py does: root, setpriv, useradd).

A namespace's shared keys are kept in Redis under the namespaced key (the namespace's
name, U+001F, the key as sent), so user A reads on host 2 what A wrote on host 1, while
user B (another namespace) neither reads, lists, removes, clears nor leases it, on either
host. ``--upstream-prefix`` is matched against the key as its client sent it, in every
namespace. Every wait has a deadline."""

from __future__ import annotations

from typing import Iterator, List, Tuple

import pytest

from conftest import Daemon
from test_tenants import ALICE, BOB, CAROL, OPS, Peer, _start_tenants, _stop_tenants, peer
from test_tenants import pytestmark as tenants_mark
from test_upstream import Redis, started, wait_until
from test_upstream import pytestmark as upstream_mark

pytestmark = [tenants_mark, upstream_mark]

SEP = "\x1f"

RULES = f"""\
# WHO              NAMESPACE   RIGHTS
user {CAROL}       reports     read,write
user {OPS}         *           read,write,admin
group hct-users    $user       read,write
"""


@pytest.fixture(scope="module")
def redis_server() -> Iterator[Redis]:
    yield from started(Redis())


def two_hosts(redis: Redis, *extra: str) -> Iterator[List[Daemon]]:
    hosts = [_start_tenants(RULES, ["--upstream", redis.url, *extra]) for _ in range(2)]
    yield hosts
    for d in hosts:
        _stop_tenants(d)
    redis.cli("FLUSHALL")


@pytest.fixture()
def hosts(redis_server: Redis) -> Iterator[List[Daemon]]:
    """Two hosts sharing every key."""
    yield from two_hosts(redis_server)


@pytest.fixture()
def prefixed_hosts(redis_server: Redis) -> Iterator[List[Daemon]]:
    """Two hosts sharing the keys under "sess:" only."""
    yield from two_hosts(redis_server, "--upstream-prefix", "sess:")


def peers(hosts: List[Daemon], user: str) -> Tuple[Peer, Peer]:
    return peer(hosts[0], user), peer(hosts[1], user)


def listed(p: Peer, prefix: str = "") -> List[str]:
    """Every key `cache.keys` lists, page after page (this host's, then the shared ones)."""
    keys: List[str] = []
    cursor = None
    for _ in range(100):
        params = {"prefix": prefix} if prefix else {}
        page = p.result("cache.keys", {**params, "cursor": cursor} if cursor else params)
        keys += page["keys"]
        cursor = page["cursor"]
        if cursor is None:
            return sorted(keys)
    raise AssertionError("cache.keys did not end within 100 pages")


def value_keys(redis: Redis) -> List[str]:
    """The keys Redis holds, without Halcyon's metadata and lease keys beside them."""
    keys = redis.cli("--scan").splitlines()
    return sorted(k for k in keys if k and "}halcyon.meta:" not in k and "}halcyon.lease:" not in k)


def test_a_namespace_shares_its_keys_across_hosts_and_nothing_else(hosts: List[Daemon], redis_server: Redis) -> None:
    a1, a2 = peers(hosts, ALICE)
    b1, b2 = peers(hosts, BOB)
    written = a1.result("cache.set", {"key": "k", "value": "alice-1"})
    a1.result("cache.set", {"key": "k2", "value": "alice-2"})
    # Kept in Redis under the namespaced key, as any Redis client sees it.
    assert redis_server.cli("GET", f"{ALICE}{SEP}k") == "alice-1"
    assert redis_server.cli("EXISTS", "k") == "0"

    got = a2.result("cache.get", {"key": "k"})
    assert (got["value"], got["cacheType"], got["version"]) == ("alice-1", "upstream", written["version"])
    assert listed(a2) == ["k", "k2"]

    # Bob, on either host, finds nothing of Alice's: not by key, listing, prefix or clear.
    for b in (b1, b2):
        assert b.result("cache.get", {"key": "k"}) == {"found": False}
        assert b.result("cache.getMany", {"keys": ["k", "k2"]})["entries"] == [{"found": False}] * 2
        assert listed(b) == []
        assert b.result("cache.removePrefix", {"prefix": "k"}) == {"removed": 0}
        assert b.result("cache.removePrefix", {"prefix": "*"}) == {"removed": 0}  # a glob byte is a byte
        assert b.result("cache.clear", {}) == {"removed": 0}
    b2.result("cache.set", {"key": "k", "value": "bob"})
    assert b1.result("cache.get", {"key": "k"})["value"] == "bob"
    assert listed(b1) == ["k"]
    assert a1.result("cache.get", {"key": "k"})["value"] == "alice-1"
    assert redis_server.cli("GET", f"{BOB}{SEP}k") == "bob"
    # An admin acting in a namespace reaches its shared keys from any host.
    ops = peer(hosts[1], OPS)
    assert ops.result("cache.get", {"key": "k", "namespace": ALICE})["value"] == "alice-1"
    ops.close()

    # A lease is the namespace's too: Bob sees none on Alice's key and takes his own.
    assert "lease" in a1.result("cache.lease", {"key": "lk", "ttl": {"seconds": 60}})
    assert a2.result("cache.leaseStatus", {"key": "lk"})["leased"] is True
    assert b2.result("cache.leaseStatus", {"key": "lk"})["leased"] is False
    bobs = b2.result("cache.lease", {"key": "lk", "ttl": {"seconds": 60}})
    assert "lease" in bobs, bobs
    assert b1.result("cache.leaseStatus", {"key": "lk"})["leased"] is True

    # Alice's clear on host 1 removes her shared keys from Redis, for both hosts, and
    # leaves Bob's there.
    assert a1.result("cache.clear", {}) == {"removed": 2}
    assert redis_server.cli("EXISTS", f"{ALICE}{SEP}k", f"{ALICE}{SEP}k2") == "0"
    assert a2.result("cache.get", {"key": "k"}) == {"found": False}
    assert redis_server.cli("GET", f"{BOB}{SEP}k") == "bob"
    assert b2.result("cache.get", {"key": "k"})["value"] == "bob"
    for p in (a1, a2, b1, b2):
        p.close()


def test_an_overwrite_on_one_host_reaches_the_namespaces_copy_on_the_other(hosts: List[Daemon]) -> None:
    a1, a2 = peers(hosts, ALICE)
    a1.result("cache.set", {"key": "seen", "value": "one"})
    assert a1.result("cache.get", {"key": "seen"})["cacheType"] == "memory"   # host 1 keeps a copy
    assert a2.result("cache.get", {"key": "seen"})["value"] == "one"
    a2.result("cache.set", {"key": "seen", "value": "two"})
    # Redis's invalidation drops host 1's copy; documented bound: 1 s.
    seen = wait_until("host 1 sees host 2's write",
                      lambda: (lambda r: r if r.get("value") == "two" else None)(a1.result("cache.get", {"key": "seen"})), 1.0)
    assert seen["cacheType"] == "upstream"
    a1.close()
    a2.close()


def test_the_upstream_prefix_is_matched_within_each_namespace(
        prefixed_hosts: List[Daemon], redis_server: Redis) -> None:
    a1, a2 = peers(prefixed_hosts, ALICE)
    b1, b2 = peers(prefixed_hosts, BOB)
    for key in ("sess:1", "local:1"):
        a1.result("cache.set", {"key": key, "value": f"a-{key}"})
        b1.result("cache.set", {"key": key, "value": f"b-{key}"})
    # Only the keys under "sess:" went to Redis, each in its namespace.
    assert value_keys(redis_server) == [f"{ALICE}{SEP}sess:1", f"{BOB}{SEP}sess:1"]
    assert a2.result("cache.get", {"key": "sess:1"})["value"] == "a-sess:1"
    assert b2.result("cache.get", {"key": "sess:1"})["value"] == "b-sess:1"
    assert a2.result("cache.get", {"key": "local:1"}) == {"found": False}  # host 1's own
    assert listed(a2) == ["sess:1"]
    assert listed(a1) == ["local:1", "sess:1"]

    # Bob's removePrefix on host 2 removes his shared key only.
    assert b2.result("cache.removePrefix", {"prefix": "sess:"}) == {"removed": 1}
    assert redis_server.cli("EXISTS", f"{BOB}{SEP}sess:1") == "0"
    assert a2.result("cache.get", {"key": "sess:1"})["value"] == "a-sess:1"

    # An admin's shared clear removes every namespace's shared keys from Redis.
    b1.result("cache.set", {"key": "sess:2", "value": "b"})
    ops = peer(prefixed_hosts[0], OPS)
    cleared = ops.result("cache.clear", {"shared": True})
    assert cleared["removedShared"] == 2, cleared
    assert value_keys(redis_server) == []
    assert b2.result("cache.get", {"key": "sess:2"}) == {"found": False}
    for p in (a1, a2, b1, b2, ops):
        p.close()
