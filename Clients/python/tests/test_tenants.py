"""Tenancy: ``halcyond --access FILE``. One daemon, clients running as different users
(``setpriv``), each in the namespace its rule gives it: no method reads, writes, lists,
clears, leases or describes another namespace's key, or tells it apart from a key that
does not exist; rights are enforced; admins reach named namespaces; the rules file is
checked at start and read again on SIGHUP.

Needs root (to create the users and to switch to them) and ``setpriv``; the clients run
``/usr/bin/python3`` (the interpreter other users can read)."""

from __future__ import annotations

import asyncio
import grp
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from conftest import Daemon, _start_daemon, short_tmpdir

import halcyon
from halcyon.aio import AsyncClient

SYSTEM_PYTHON = "/usr/bin/python3"
SRC = str(Path(__file__).resolve().parent.parent / "src")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("useradd") is None
    or not os.access(SYSTEM_PYTHON, os.X_OK),
    reason="needs root, setpriv, useradd and /usr/bin/python3 to run clients as other users")

GROUP = "hct-users"
ALICE, BOB, CAROL, OPS, EVE = "hct-alice", "hct-bob", "hct-carol", "hct-ops", "hct-eve"

RULES = f"""\
# WHO              NAMESPACE   RIGHTS
user {CAROL}       reports     read
user {OPS}         *           read,write,admin
group {GROUP}      $user       read,write
"""

#: A JSON-lines client: sends each line of stdin on one connection and prints each reply
#: line as it comes, so a test can keep a connection open between requests. A line
#: received before any request (a refused connection) is printed too.
CLIENT = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(20)
f = s.makefile("rb")
for line in sys.stdin:
    try:
        s.sendall(line.encode())
    except OSError:
        pass
    reply = f.readline()
    sys.stdout.write(reply.decode())
    sys.stdout.flush()
    if not reply:
        break
"""


def _ensure_accounts() -> None:
    """The users and group of the rules, made once (they stay for later runs)."""
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        subprocess.run(["groupadd", GROUP], check=True)
    accounts = {
        ALICE: ["-N", "-g", GROUP],          # the group as primary group
        BOB: ["-U", "-G", GROUP],            # the group as supplementary group
        CAROL: ["-U"], OPS: ["-U"], EVE: ["-U"],
    }
    for name, args in accounts.items():
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", *args, name], check=True)


def as_user(name: str) -> List[str]:
    return ["setpriv", "--reuid", name, "--regid", str(pwd.getpwnam(name).pw_gid), "--init-groups"]


class Peer:
    """One connection of a client process running as ``user``."""

    def __init__(self, socket_path: str, user: str) -> None:
        self.proc = subprocess.Popen([*as_user(user), SYSTEM_PYTHON, "-c", CLIENT, socket_path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ids = 0

    def call(self, method: str, params: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """The whole reply object of one request."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.ids += 1
        request: Dict[str, Any] = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        if params is not None:
            request["params"] = params
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()  # the client's socket timeout bounds the wait
        assert line, f"{method}: the connection closed"
        return json.loads(line)

    def result(self, method: str, params: Optional[Dict[str, Any]] = None) -> Any:
        reply = self.call(method, params)
        assert "result" in reply, f"{method} {params}: {reply}"
        return reply["result"]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=20)


def _start_tenants(rules_text: str, extra: Optional[List[str]] = None) -> Daemon:
    """A daemon of the caller's own, with ``rules_text`` in ``<folder>/access.conf``
    (and the flags ``extra``)."""
    _ensure_accounts()
    folder = short_tmpdir()
    os.chmod(folder, 0o755)
    rules = os.path.join(folder, "access.conf")
    Path(rules).write_text(rules_text)
    d = _start_daemon(["--access", rules, "--socket-mode", "0666", "--log-level", "notice", *(extra or [])])
    os.chmod(d.folder, 0o711)  # the socket's folder: searchable by the other users
    d.rules = rules  # type: ignore[attr-defined]
    d.rules_folder = folder  # type: ignore[attr-defined]
    return d


def _stop_tenants(d: Daemon) -> None:
    """Stops a daemon of `_start_tenants` and removes its folders."""
    d.stop()
    shutil.rmtree(d.folder, ignore_errors=True)
    shutil.rmtree(d.rules_folder, ignore_errors=True)  # type: ignore[attr-defined]


def _tenants_until_done(rules_text: str, extra: Optional[List[str]] = None) -> Iterator[Daemon]:
    """A daemon of `_start_tenants` for a fixture to yield; stopped and removed after."""
    d = _start_tenants(rules_text, extra)
    yield d
    _stop_tenants(d)


@pytest.fixture(scope="module")
def tenants() -> Iterator[Daemon]:
    yield from _tenants_until_done(RULES)


def peer(d: Daemon, user: str) -> Peer:
    return Peer(d.socket, user)


# ---------------------------------------------------------------- who is who

def test_each_peer_gets_the_namespace_and_rights_of_its_first_matching_rule(tenants: Daemon) -> None:
    seen = {}
    for user in (ALICE, BOB, CAROL, OPS):
        p = peer(tenants, user)
        info = p.result("server.info")
        seen[user] = (info["namespace"], info["rights"])
        p.close()
    assert seen == {
        ALICE: (ALICE, ["read", "write"]),           # primary group
        BOB: (BOB, ["read", "write"]),               # supplementary group
        CAROL: ("reports", ["read"]),
        OPS: (None, ["read", "write", "admin"]),
    }
    # Root, matching no rule, keeps the whole keyspace (it can read the cache folder anyway).
    whole = {"namespace": None, "rights": ["read", "write", "admin"], "access": True}
    with halcyon.Client(tenants.socket, timeout=10) as c:
        assert c.identity() == whole

    async def identity() -> Dict[str, Any]:
        async with AsyncClient(tenants.socket) as c:
            return await c.identity()
    assert asyncio.run(asyncio.wait_for(identity(), 20)) == whole


def test_identity_without_access_is_every_right_and_no_namespace(daemon: Daemon) -> None:
    with halcyon.Client(daemon.socket, timeout=10) as c:
        assert c.identity() == {"namespace": None, "rights": ["read", "write", "admin"], "access": False}
        assert "namespace" not in c.info() and "rights" not in c.info()


def test_the_python_client_reports_its_identity_as_another_user(tenants: Daemon) -> None:
    code = ("import json, sys; sys.path.insert(0, sys.argv[2]); import halcyon\n"
            "with halcyon.Client(sys.argv[1], timeout=10) as c: print(json.dumps(c.identity()))")
    out = subprocess.run([*as_user(ALICE), SYSTEM_PYTHON, "-c", code, tenants.socket, SRC],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"namespace": ALICE, "rights": ["read", "write"], "access": True}


def test_the_cli_whoami_shows_namespace_and_rights(tenants: Daemon, halcyon_bin: str) -> None:
    out = subprocess.run([*as_user(CAROL), halcyon_bin, "--socket", tenants.socket, "whoami"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["namespace  reports", "rights     read"]
    out = subprocess.run([*as_user(CAROL), halcyon_bin, "--socket", tenants.socket, "whoami", "--json"],
                         capture_output=True, text=True, timeout=30)
    assert json.loads(out.stdout) == {"namespace": "reports", "rights": ["read"]}


def test_a_peer_matching_no_rule_is_refused(tenants: Daemon) -> None:
    p = peer(tenants, EVE)
    reply = p.call("server.ping")
    p.close()
    assert reply["id"] is None
    assert reply["error"]["code"] == -32005
    assert reply["error"]["data"] == {"reason": "peerNotAllowed", "uid": pwd.getpwnam(EVE).pw_uid,
                                      "gid": pwd.getpwnam(EVE).pw_gid}


# ---------------------------------------------------------------- isolation

#: Members whose values differ from call to call, not from key to key.
_VOLATILE = {"version", "versions", "expiresAt", "lease", "id"}


def shape(reply: Dict[str, Any]) -> Any:
    """A reply with call-to-call values (versions, times, lease tokens) blanked."""
    def walk(v: Any, name: str = "") -> Any:
        if name in _VOLATILE:
            return "<volatile>"
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return walk(reply)


def test_no_method_reaches_or_reveals_another_namespaces_key(tenants: Daemon) -> None:
    alice = peer(tenants, ALICE)
    stored = alice.result("cache.set", {"key": "k", "value": "alice-secret"})
    alice.result("cache.set", {"key": "k2", "value": 7, "encoding": "json"})
    held = alice.result("cache.lease", {"key": "lk", "ttl": {"seconds": 60}})
    assert "lease" in held
    bob = peer(tenants, BOB)
    # Each request runs for Alice's key and for a key no namespace has, in the same order:
    # Bob's namespace holds neither, so every reply must have the same shape.
    requests = [
        ("cache.get", {"key": "$K"}),
        ("cache.isCached", {"key": "$K"}),
        ("cache.describe", {"key": "$K"}),
        ("cache.getMany", {"keys": ["$K"]}),
        ("cache.leaseStatus", {"key": "$L"}),
        ("cache.releaseLease", {"key": "$L", "lease": held["lease"]}),
        ("cache.touch", {"key": "$K", "expiration": {"seconds": 5}}),
        ("cache.remove", {"key": "$K"}),
        ("cache.removeMany", {"keys": ["$K"]}),
        ("cache.removePrefix", {"prefix": "$K"}),
        ("cache.cas", {"key": "$K", "value": "x", "version": stored["version"]}),
        ("cache.incr", {"key": "$K2", "create": False}),
        ("cache.lease", {"key": "$L", "ttl": {"seconds": 60}}),
        ("cache.add", {"key": "$K", "value": "bob"}),
        ("cache.set", {"key": "$K", "value": "bob"}),
        ("cache.setMany", {"entries": [{"key": "$K2", "value": "bob"}]}),
        ("cache.get", {"key": "$K"}),
    ]
    for method, params in requests:
        def fill(key: str, key2: str, lkey: str) -> Dict[str, Any]:
            text = json.dumps(params).replace("$K2", key2).replace("$K", key).replace("$L", lkey)
            return json.loads(text)
        theirs = bob.call(method, fill("k", "k2", "lk"))
        absent = bob.call(method, fill("absent", "absent2", "absentl"))
        assert shape(theirs) == shape(absent), method
    listed = bob.result("cache.keys", {})
    assert sorted(listed["keys"]) == ["absent", "absent2", "k", "k2"]  # Bob's own, and only them
    assert sorted(bob.result("cache.keys", {"prefix": "k"})["keys"]) == ["k", "k2"]
    assert bob.result("cache.clear", {}) == {"removed": 4}
    assert bob.result("cache.keys", {})["keys"] == []
    bob.close()

    # Alice's keys, values, versions and lease are as she left them.
    got = alice.result("cache.get", {"key": "k"})
    assert (got["found"], got["value"], got["version"]) == (True, "alice-secret", stored["version"])
    assert alice.result("cache.get", {"key": "k2", "encoding": "json"})["value"] == 7
    assert alice.result("cache.leaseStatus", {"key": "lk"})["leased"] is True
    assert sorted(alice.result("cache.keys", {})["keys"]) == ["k", "k2"]
    alice.close()


def test_whole_cache_methods_and_other_namespaces_need_admin(tenants: Daemon) -> None:
    bob = peer(tenants, BOB)
    for method in ("server.metrics", "cache.trim", "cache.removeExpired", "cache.totalSize"):
        error = bob.call(method)["error"]
        assert (error["code"], error["data"]) == (-32005, {"reason": "notPermitted", "right": "admin"}), method
    error = bob.call("cache.get", {"key": "k", "namespace": ALICE})["error"]
    assert error["data"] == {"reason": "notPermitted", "right": "admin"}
    bob.close()


def test_a_read_only_peer_reads_and_cannot_write(tenants: Daemon) -> None:
    carol = peer(tenants, CAROL)
    assert carol.result("cache.get", {"key": "r"})["found"] is False
    assert carol.result("cache.keys", {})["keys"] == []
    for method, params in [("cache.set", {"key": "r", "value": "v"}), ("cache.add", {"key": "r", "value": "v"}),
                           ("cache.incr", {"key": "r"}), ("cache.remove", {"key": "r"}),
                           ("cache.touch", {"key": "r"}), ("cache.clear", {}),
                           ("cache.setMany", {"entries": [{"key": "r", "value": "v"}]}),
                           ("cache.removeMany", {"keys": ["r"]}), ("cache.removePrefix", {"prefix": "r"})]:
        error = carol.call(method, params)["error"]
        assert (error["code"], error["data"]) == (-32005, {"reason": "notPermitted", "right": "write"}), method
    carol.close()


def test_an_admin_reaches_a_named_namespace_and_the_whole_keyspace(tenants: Daemon) -> None:
    alice = peer(tenants, ALICE)
    alice.result("cache.set", {"key": "for-ops", "value": "hello"})
    alice.close()
    ops = peer(tenants, OPS)
    got = ops.result("cache.get", {"key": "for-ops", "namespace": ALICE})
    assert (got["found"], got["value"]) == (True, "hello")
    assert ops.result("cache.set", {"key": "from-ops", "value": "x", "namespace": "reports"})["stored"] is True
    # The whole keyspace holds every namespace's keys with their namespace in front.
    whole = ops.result("cache.keys", {"prefix": ALICE + "\u001f"})["keys"]
    assert ALICE + "\u001ffor-ops" in whole
    assert ops.result("cache.get", {"key": ALICE + "\u001ffor-ops"})["value"] == "hello"
    assert "hits" in json.dumps(ops.result("cache.stats"))
    error = ops.call("cache.get", {"key": "k", "namespace": "no/such"})["error"]
    assert error["data"] == {"reason": "invalidNamespace", "param": "namespace"}
    ops.close()
    carol = peer(tenants, CAROL)
    assert carol.result("cache.get", {"key": "from-ops"})["value"] == "x"
    carol.close()


# ---------------------------------------------------------------- the rules file

@pytest.mark.parametrize("text,expected", [
    ("uid 1 web read\nuid 2 web read,fly\n", "line 2: 'fly' is not one of the rights"),
    ("# ok\n\nperson x web read\n", "line 3:"),
    ("uid 1 * read,admin memory=1MiB\n", "line 1: quotas need a namespace: '*' spans every namespace"),
])
def test_a_bad_rules_file_stops_the_daemon_with_exit_2_naming_the_line(
        halcyond_bin: str, text: str, expected: str) -> None:
    folder = short_tmpdir()
    try:
        rules = os.path.join(folder, "access.conf")
        Path(rules).write_text(text)
        r = subprocess.run([halcyond_bin, "--socket", os.path.join(folder, "s.sock"), "--cache-dir",
                            os.path.join(folder, "c"), "--access", rules], capture_output=True, text=True, timeout=20)
        assert r.returncode == 2, r.stderr
        assert expected in r.stderr and rules in r.stderr, r.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("flags,expected", [
    (["--no-hashed-file-names"], "needs hashed file names"),
    (["--allow-uid", "0"], "replaces --allow-uid and --allow-gid"),
])
def test_access_refuses_flags_it_cannot_honour(halcyond_bin: str, flags: List[str], expected: str) -> None:
    folder = short_tmpdir()
    try:
        rules = os.path.join(folder, "access.conf")
        Path(rules).write_text("uid 1 web read\n")
        r = subprocess.run([halcyond_bin, "--socket", os.path.join(folder, "s.sock"), "--cache-dir",
                            os.path.join(folder, "c"), "--access", rules, *flags],
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 2, r.stderr
        assert expected in r.stderr, r.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _await_log(d: Daemon, pattern: str, after: int, timeout: float = 20) -> str:
    """The first log line past byte ``after`` matching ``pattern``; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(d.log, "rb") as f:
            f.seek(after)
            for line in f.read().decode("utf-8", "replace").splitlines():
                if re.search(pattern, line):
                    return line
        time.sleep(0.02)
    pytest.fail(f"no log line matching {pattern!r} within {timeout} s: {d.tail()}")


def _reload_rules(d: Daemon, rules_text: str, outcome: str = "access rules reloaded") -> str:
    """Writes ``rules_text`` to the daemon's rules file, sends SIGHUP and waits for the
    log line ``outcome``; that line."""
    Path(d.rules).write_text(rules_text)  # type: ignore[attr-defined]
    mark = os.path.getsize(d.log)
    assert d.proc is not None
    d.proc.send_signal(signal.SIGHUP)
    return _await_log(d, outcome, mark)


def test_sighup_applies_a_good_file_to_new_connections_and_keeps_the_rules_over_a_bad_one() -> None:
    d = _start_tenants(f"group {GROUP} first read,write\n")
    try:
        before = peer(d, ALICE)
        assert before.result("server.info")["namespace"] == "first"
        before.result("cache.set", {"key": "k", "value": "in-first"})

        _reload_rules(d, f"group {GROUP} second read\n")
        after = peer(d, ALICE)
        info = after.result("server.info")
        assert (info["namespace"], info["rights"]) == ("second", ["read"])
        assert after.result("cache.get", {"key": "k"})["found"] is False
        after.close()
        # The open connection keeps what it was granted.
        assert before.result("cache.get", {"key": "k"})["value"] == "in-first"
        before.close()

        line = _reload_rules(d, f"group {GROUP} third read\nuid nobody x read\n", "access rules not reloaded")
        assert "line 2" in line, line
        kept = peer(d, ALICE)
        assert kept.result("server.info")["namespace"] == "second"
        kept.close()
        assert d.proc is not None and d.proc.poll() is None
    finally:
        _stop_tenants(d)
