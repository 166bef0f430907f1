"""Tenant quotas and per-namespace stats: ``memory=SIZE`` and ``disk=SIZE`` on a rules
line bound a namespace's bytes in each tier. A namespace flooding past its quota loses
only its own least recently used entries, and another namespace's hit rate over a fixed
read set stays as it was; a value larger than the memory quota is refused; ``cache.stats`` shows a
non-admin its own namespace only and an admin each one; the metrics carry a series per
namespace the file names; SIGHUP with a smaller quota evicts down to it. Quotas on a
``$user`` line bound each user's namespace alone, a SIGHUP changes them for namespaces
already learnt, and a restart holds the namespaces stored before it to them before their
users connect again.

Runs clients as other users, as test_tenants.py does (root, setpriv, useradd)."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from conftest import Daemon
from test_tenants import (  # noqa: F401
    ALICE, BOB, CAROL, EVE, OPS, Peer, _await_log, _reload_rules, _tenants_until_done, as_user, peer, pytestmark)

KIB = 1024


def rules(batch_quota: str) -> str:
    return (f"user {ALICE}  web      read,write        memory=64KiB\n"
            f"user {BOB}    batch    read,write        memory={batch_quota} disk=16KiB\n"
            f"user {CAROL}  reports  read\n"
            f"user {OPS}    *        read,write,admin\n"
            f"user {EVE}    $user    read,write\n")


@pytest.fixture()
def quotas() -> Iterator[Daemon]:
    # Room for web's read set and batch's quota, not for a flood of 200 KiB.
    yield from _tenants_until_done(rules("8KiB"), ["--memory-limit", "64KiB"])


def hit_rate(p: Peer, keys: List[str]) -> float:
    found = sum(1 for k in keys if p.result("cache.get", {"key": k})["found"])
    return found / len(keys)


def flood_beside(reader: Peer, read_set: List[str], flooder: Peer, rows: int) -> Tuple[float, float]:
    """``reader`` stores ``read_set`` (1 KiB each, memory only: nothing on disk to fall
    back to), then ``flooder`` stores ``rows`` rows of 1 KiB the same way: ``reader``'s hit
    rate over its set before and after the flood (printed)."""
    for k in read_set:
        reader.result("cache.set", {"key": k, "value": "r" * KIB, "toDisk": False})
    before = hit_rate(reader, read_set)
    for i in range(rows):
        flooder.result("cache.set", {"key": f"row{i}", "value": "f" * KIB, "toDisk": False})
    after = hit_rate(reader, read_set)
    print(f"hit rate over {len(read_set)} keys: before another namespace floods {before:.3f}, after {after:.3f}")
    return before, after


def own_block(p: Peer) -> dict:
    result = p.result("cache.stats")
    assert list(result) == ["namespace"], result
    return result["namespace"]


def test_a_namespace_over_its_quota_evicts_only_its_own_entries(quotas: Daemon) -> None:
    web, batch = peer(quotas, ALICE), peer(quotas, BOB)
    read_set = [f"page{i}" for i in range(20)]
    # batch floods 25 times its quota.
    assert flood_beside(web, read_set, batch, 200) == (1.0, 1.0)

    mine = own_block(batch)
    assert mine["name"] == "batch"
    assert mine["memory"]["quota"] == 8 * KIB
    assert mine["memory"]["bytes"] <= 8 * KIB and mine["memory"]["entries"] == 8, mine
    assert mine["memory"]["evictions"] == 192 and mine["sets"] == 200, mine
    # Its own least recently used went: the newest rows stay, the oldest are gone.
    assert batch.result("cache.get", {"key": "row199"})["found"] is True
    assert batch.result("cache.get", {"key": "row0"})["found"] is False
    others = own_block(web)
    assert others["name"] == "web" and others["memory"]["evictions"] == 0
    assert others["memory"]["entries"] == 20 and others["memory"]["hits"] == 40, others

    # A value the quota could never hold is refused, naming the quota.
    error = batch.call("cache.set", {"key": "big", "value": "x" * (8 * KIB + 1), "toDisk": False})["error"]
    assert error["data"] == {"reason": "valueTooLarge", "param": "value", "tier": "memory", "limit": 8 * KIB,
                             "quota": True}, error

    # The same flood from a namespace without a quota fills the whole tier, whose own
    # least recently used entries then go, web's among them: what the quota prevents.
    eve = peer(quotas, EVE)
    for i in range(200):
        eve.result("cache.set", {"key": f"row{i}", "value": "e" * KIB, "toDisk": False})
    unbounded = hit_rate(web, read_set)
    print(f"web's hit rate after a namespace without a quota floods: {unbounded:.3f}")
    assert unbounded < 1.0
    eve.close()
    web.close()
    batch.close()


def test_stats_show_a_non_admin_its_namespace_and_an_admin_each(quotas: Daemon) -> None:
    carol = peer(quotas, CAROL)
    assert carol.result("cache.get", {"key": "nothing"})["found"] is False
    block = own_block(carol)
    assert block == {"name": "reports", "sets": 0, "memory": {
        "hits": 0, "misses": 1, "bytes": 0, "entries": 0, "evictions": 0, "quota": 0},
        "disk": {"bytes": 0, "entries": 0, "evictions": 0, "quota": 0}}, block
    carol.close()
    eve = peer(quotas, EVE)
    eve.result("cache.set", {"key": "e", "value": "v"})
    assert own_block(eve)["name"] == EVE
    eve.close()

    ops = peer(quotas, OPS)
    stats = ops.result("cache.stats")
    assert "memory" in stats and "disk" in stats
    names = [n["name"] for n in stats["namespaces"]]
    assert names[:3] == ["web", "batch", "reports"] and EVE in names, names
    text = ops.result("server.metrics")["text"]
    assert 'halcyon_namespace_quota_bytes{namespace="batch",tier="memory"} 8192' in text, text
    assert re.search(r'halcyon_namespace_misses_total\{namespace="reports",tier="memory"\} 1\b', text), text
    # A `$user` namespace is not a label of its own: it counts under "$user".
    assert EVE not in text
    assert re.search(r'halcyon_namespace_sets_total\{namespace="\$user"\} 1\b', text), text
    ops.close()


def fill_then_shrink(d: Daemon, p: Peer, smaller_rules: str) -> None:
    """Fills ``p``'s namespace with 8 KiB in memory, reloads ``smaller_rules`` (which give
    it a 2 KiB quota) and checks that it was evicted down to it, its newest entries kept."""
    for i in range(8):
        p.result("cache.set", {"key": f"row{i}", "value": "b" * KIB, "toDisk": False})
    assert own_block(p)["memory"]["bytes"] == 8 * KIB
    _reload_rules(d, smaller_rules)
    mine = own_block(p)
    assert (mine["memory"]["bytes"], mine["memory"]["quota"], mine["memory"]["evictions"]) == (2 * KIB, 2 * KIB, 6)
    assert [p.result("cache.get", {"key": f"row{i}"})["found"] for i in (5, 6, 7)] == [False, True, True]


def test_sighup_with_a_smaller_quota_evicts_down_to_it(quotas: Daemon) -> None:
    web, batch = peer(quotas, ALICE), peer(quotas, BOB)
    for i in range(8):
        web.result("cache.set", {"key": f"page{i}", "value": "w" * KIB, "toDisk": False})
    fill_then_shrink(quotas, batch, rules("2KiB"))
    assert own_block(web)["memory"]["entries"] == 8
    web.close()
    batch.close()


def test_the_cli_stats_table_shows_each_namespace(quotas: Daemon, halcyon_bin: str) -> None:
    def table(user: str) -> List[List[str]]:
        out = subprocess.run([*as_user(user), halcyon_bin, "--socket", quotas.socket, "stats"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return [line.split() for line in out.stdout.splitlines()]
    assert ["namespace.name", "batch"] in table(BOB)
    assert ["namespace.memory.quota", "8192"] in table(BOB)
    rows = table(OPS)
    assert ["namespaces.batch.memory.quota", "8192"] in rows and ["namespaces.web.sets", "0"] in rows, rows


def test_a_namespace_over_its_disk_quota_loses_only_its_own_files(quotas: Daemon) -> None:
    web, batch = peer(quotas, ALICE), peer(quotas, BOB)
    read_set = [f"doc{i}" for i in range(20)]
    for k in read_set:
        web.result("cache.set", {"key": k, "value": "w" * KIB})
    before = hit_rate(web, read_set)
    for i in range(100):
        batch.result("cache.set", {"key": f"file{i}", "value": "b" * KIB})
    # The quota is checked as values reach their files, which the write-behind does
    # when the writes pause.
    deadline = time.monotonic() + 20
    mine = own_block(batch)
    while mine["disk"]["evictions"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
        mine = own_block(batch)
    assert mine["disk"]["quota"] == 16 * KIB
    assert mine["disk"]["evictions"] > 0 and mine["disk"]["bytes"] <= 16 * KIB, mine
    theirs = own_block(web)
    assert theirs["disk"]["entries"] == 20 and theirs["disk"]["evictions"] == 0, theirs
    after = hit_rate(web, read_set)
    print(f"web's hit rate over {len(read_set)} keys stored to disk: before batch floods {before:.3f}, after {after:.3f}")
    assert (before, after) == (1.0, 1.0)
    assert batch.result("cache.get", {"key": "file99"})["found"] is True
    web.close()
    batch.close()


# ---------------------------------------------------------------- quotas on a `$user` line

def user_rules(quota: str) -> str:
    return (f"user {OPS}        *        read,write,admin\n"
            f"group hct-users   $user    read,write        {quota}\n")


@pytest.fixture()
def user_quotas() -> Iterator[Daemon]:
    # Alice and Bob are both in hct-users: each gets a namespace of their own, with 8 KiB.
    yield from _tenants_until_done(user_rules("memory=8KiB disk=256KiB"), ["--memory-limit", "64KiB"])


def test_a_user_line_quota_bounds_each_users_namespace_alone(user_quotas: Daemon) -> None:
    alice, bob = peer(user_quotas, ALICE), peer(user_quotas, BOB)
    assert flood_beside(alice, [f"page{i}" for i in range(6)], bob, 100) == (1.0, 1.0)
    mine = own_block(bob)
    assert mine["name"] == BOB and (mine["memory"]["quota"], mine["disk"]["quota"]) == (8 * KIB, 256 * KIB), mine
    assert mine["memory"]["bytes"] <= 8 * KIB and mine["memory"]["evictions"] == 92, mine
    assert bob.result("cache.get", {"key": "row99"})["found"] is True
    assert bob.result("cache.get", {"key": "row0"})["found"] is False

    # And the other way round: Alice's flood evicts her own entries, never Bob's.
    bobs = [f"row{i}" for i in range(92, 100)]
    for i in range(100):
        alice.result("cache.set", {"key": f"flood{i}", "value": "a" * KIB, "toDisk": False})
    assert hit_rate(bob, bobs) == 1.0
    theirs = own_block(alice)
    assert theirs["memory"]["quota"] == 8 * KIB and theirs["memory"]["bytes"] <= 8 * KIB, theirs
    assert own_block(bob)["memory"]["evictions"] == 92

    ops = peer(user_quotas, OPS)
    quotas = {n["name"]: n["memory"]["quota"] for n in ops.result("cache.stats")["namespaces"]}
    assert quotas == {ALICE: 8 * KIB, BOB: 8 * KIB}, quotas
    # The `$user` namespaces are one series in the metrics, with their quotas summed.
    text = ops.result("server.metrics")["text"]
    assert f'halcyon_namespace_quota_bytes{{namespace="$user",tier="memory"}} {16 * KIB}' in text, text
    for p in (alice, bob, ops):
        p.close()


def test_sighup_changes_the_quota_of_a_learnt_user_namespace(user_quotas: Daemon) -> None:
    # Bob connected before the reload: the new quota is his at once, evicting down to it.
    bob = peer(user_quotas, BOB)
    fill_then_shrink(user_quotas, bob, user_rules("memory=2KiB"))

    # A line that lost its quota leaves the namespace unbounded.
    _reload_rules(user_quotas, user_rules(""))
    for i in range(8, 16):
        bob.result("cache.set", {"key": f"row{i}", "value": "b" * KIB, "toDisk": False})
    mine = own_block(bob)
    assert (mine["memory"]["quota"], mine["disk"]["quota"], mine["memory"]["bytes"]) == (0, 0, 10 * KIB), mine
    bob.close()


def test_a_user_namespace_stored_before_a_restart_is_held_to_its_quota_before_its_user_returns(
        user_quotas: Daemon) -> None:
    bob = peer(user_quotas, BOB)
    for i in range(8):
        bob.result("cache.set", {"key": f"row{i}", "value": "b" * KIB})
    bob.close()
    # Stopped, the file lowers the `$user` line's disk quota below what Bob holds. At the
    # next start his namespace is found among the stored entries and brought within it,
    # although Bob has not connected since.
    Path(user_quotas.rules).write_text(user_rules("disk=4KiB"))  # type: ignore[attr-defined]
    mark = os.path.getsize(user_quotas.log)
    user_quotas.restart()
    _await_log(user_quotas, "quotas installed for stored namespaces", mark)
    ops = peer(user_quotas, OPS)

    def bobs() -> dict:
        found = [n for n in ops.result("cache.stats")["namespaces"] if n["name"] == BOB]
        assert len(found) == 1, found
        return found[0]

    deadline = time.monotonic() + 20
    mine = bobs()
    while mine["disk"]["evictions"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
        mine = bobs()
    assert mine["disk"]["quota"] == 4 * KIB, mine
    assert mine["disk"]["evictions"] > 0 and mine["disk"]["bytes"] <= 4 * KIB, mine
    assert ALICE not in {n["name"] for n in ops.result("cache.stats")["namespaces"]}
    ops.close()
