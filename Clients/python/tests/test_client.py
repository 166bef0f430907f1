"""The blocking client, run against the fake server and the real daemon alike
(``server_path`` is parametrised): every method, every value type, errors, pipelines,
batches, timeouts, reconnects, threads and memoize."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import halcyon
from halcyon import errors
from fakeserver import FakeServer

VALUES: List[Any] = [
    b"", b"\x00\x01\xfe\xff" * 10, bytes(range(256)),
    "", "plain", "ünïcödé ✓ 🚀", "line\nbreaks\r\n\t",
    None, True, False, 0, -17, 2**53, 2**63 - 1, -(2**63), 3.25, 0.1, [], [1, "two", None, [3.5]], {}, {"nested": {"a": [1, 2]}, "b": None},
]


# halcyond (main at merge 092babe) answers cache.set {"value": null, "encoding": "json"}
# with -32602 missingParam, though null is a JSON value (PROTOCOL.md section 3). Until
# that is fixed, tests storing None expect that failure instead of failing CI.
NULL_BUG = "halcyond rejects cache.set with value null (missingParam): daemon bug, reported"


def set_or_xfail(c: halcyon.Client, key: str, value: Any) -> bool:
    try:
        return c.set(key, value)
    except errors.MissingParamError:
        if value is None:
            pytest.xfail(NULL_BUG)
        raise


def test_ping_and_info(client: halcyon.Client) -> None:
    assert client.ping() is True
    info = client.info()
    assert info["protocol"] == 1


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_value_round_trip_keeps_type(client: halcyon.Client, key: str, value: Any) -> None:
    assert set_or_xfail(client, key, value) is True
    got = client.get(key, default="MISS")
    assert got == value and type(got) is type(value)
    entry = client.get_entry(key)
    assert entry is not None and entry.value == value
    assert entry.encoding == {bytes: "base64", str: "utf8"}.get(type(value), "json")


def test_tuple_and_bytearray_come_back_as_list_and_bytes(client: halcyon.Client, key: str) -> None:
    client.set(key, (1, 2))
    assert client.get(key) == [1, 2]
    client.set(key, bytearray(b"ab"))
    assert client.get(key) == b"ab"


def test_miss_returns_default(client: halcyon.Client, key: str) -> None:
    assert client.get(key) is None
    assert client.get(key, default=42) == 42
    assert client.get_entry(key) is None
    assert client.exists(key) is False
    assert client.cached_type(key) == "none"
    assert client.describe(key) is None
    assert client.touch(key, 10) is False
    assert client.delete(key) is False


def test_stored_none_is_not_a_miss(client: halcyon.Client, key: str) -> None:
    set_or_xfail(client, key, None)
    entry = client.get_entry(key)
    assert entry is not None and entry.value is None
    assert client[key] is None


def test_exists_describe_touch_delete(client: halcyon.Client, key: str) -> None:
    client.set(key, b"12345", expire=60)
    assert client.exists(key) is True
    assert client.cached_type(key) in ("memory", "disk")
    d = client.describe(key)
    assert d is not None and d.encoding == "base64" and d.cache_type in ("memory", "disk")
    assert client.touch(key, 120) is True
    assert client.delete(key) is True
    assert client.exists(key) is False


def test_already_expired_stores_nothing(client: halcyon.Client, key: str) -> None:
    assert client.set(key, "x", expire=0) is False
    assert client.get(key) is None


def test_mapping_interface(client: halcyon.Client, key: str) -> None:
    with pytest.raises(KeyError):
        client[key]
    assert key not in client
    client[key] = {"a": 1}
    assert key in client and client[key] == {"a": 1}
    del client[key]
    assert key not in client
    with pytest.raises(KeyError):
        del client[key]
    assert 5 not in client  # type: ignore[operator]


def test_whole_cache_methods_answer(client: halcyon.Client) -> None:
    assert isinstance(client.remove_expired(), int)
    assert set(client.trim()) >= {"removed", "totalSize"}
    assert set(client.total_size()) >= {"bytes", "count"}
    assert isinstance(client.stats(), dict)


def test_errors_map_to_classes(client: halcyon.Client) -> None:
    with pytest.raises(errors.KeyTooLongError) as info:
        client.set("k" * 4097, b"x")
    assert info.value.code == -32602 and info.value.reason == "keyTooLong"
    with pytest.raises(halcyon.InvalidParamsError):
        client.get("")
    with pytest.raises(halcyon.MethodNotFoundError):
        client.call("no.such.method")
    with pytest.raises(errors.UnknownParamError):
        client.call("cache.get", {"key": "a", "bogus": 1})
    # The connection is still good after errors.
    assert client.ping()


def test_longest_key_is_fine(client: halcyon.Client) -> None:
    k = "é" * 2048  # 4096 UTF-8 bytes
    client.set(k, "v")
    assert client.get(k) == "v"
    client.delete(k)


def test_pipeline_results_in_call_order(client: halcyon.Client, key: str) -> None:
    with client.pipeline() as p:
        p.set(key, b"v").get(key).exists(key).delete(key).get(key, default="gone")
    assert p.results == [True, b"v", True, True, "gone"]


def test_pipeline_of_ten_thousand(client: halcyon.Client) -> None:
    prefix = uuid.uuid4().hex
    n = 10_000
    p = client.pipeline(timeout=60)
    for i in range(n):
        p.set(f"{prefix}:{i}", i)
    assert p.execute() == [True] * n
    for i in range(n):
        p.get(f"{prefix}:{i}")
    assert p.execute() == list(range(n))


def test_pipeline_errors_in_place(client: halcyon.Client, key: str) -> None:
    p = client.pipeline(raise_on_error=False)
    p.set(key, 1).set("x" * 5000, 1).get(key)
    results = p.execute()
    assert results[0] is True and isinstance(results[1], errors.KeyTooLongError) and results[2] == 1
    p = client.pipeline()
    p.set(key, 2).call("no.such").get(key)
    with pytest.raises(halcyon.MethodNotFoundError):
        p.execute()
    assert p.results[0] is True and p.results[2] == 2


def test_batch_form(client: halcyon.Client, key: str) -> None:
    with client.batch() as b:
        b.set(key, "a").get(key).ping()
    assert b.results == [True, "a", True]
    assert client.batch().execute() == []


def test_batch_too_large(client: halcyon.Client) -> None:
    b = client.batch(raise_on_error=False)
    for _ in range(1001):
        b.ping()
    results = b.execute()
    assert len(results) == 1001 and all(isinstance(r, errors.BatchTooLargeError) for r in results)
    assert client.ping()


def _hold_io(path: str, seconds: float) -> threading.Thread:
    """Keep the ioQueue busy from another connection for ``seconds``."""
    def run() -> None:
        with halcyon.Client(path, timeout=seconds + 10) as holder:
            holder.call("debug.sleep", {"seconds": seconds})
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.2)  # let the sleep reach the queue first
    return t


def test_timeout_then_connection_still_usable(server_path: str, key: str) -> None:
    with halcyon.Client(server_path, timeout=10) as c:
        assert c.ping()
        holder = _hold_io(server_path, 1.5)
        started = time.monotonic()
        with pytest.raises(halcyon.HalcyonTimeoutError):
            c.set(key, "late", timeout=0.3)
        assert time.monotonic() - started < 1.4
        assert c.ping(timeout=5)
        holder.join()
        # A late reply for the abandoned id is dropped, not handed to the next call.
        assert c.get(key + "-other", default="miss") == "miss"


def test_connection_refused_is_connection_error(tmp_path: Any) -> None:
    c = halcyon.Client("/tmp/halcyon-no-such-dir/none.sock")
    with pytest.raises(halcyon.HalcyonConnectionError):
        c.ping()
    with pytest.raises(ConnectionError):
        c.get("a")


def test_threads_share_one_client(client: halcyon.Client) -> None:
    prefix = uuid.uuid4().hex
    failures: List[str] = []

    def work(t: int) -> None:
        for i in range(150):
            k = f"{prefix}:{t}:{i}"
            client.set(k, [t, i])
            if client.get(k) != [t, i]:
                failures.append(k)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_memoize_runs_once_and_invalidates(daemon_client: halcyon.Client) -> None:
    client = daemon_client
    calls: List[Any] = []
    tag = uuid.uuid4().hex

    @client.memoize(expire=60, prefix=f"memo-{tag}")
    def square(x: int, *, plus: int = 0) -> int:
        calls.append(x)
        return x * x + plus

    assert square(4) == 16 and square(4) == 16
    assert calls == [4]
    assert square(4, plus=1) == 17 and calls == [4, 4]
    assert square.invalidate(4) is True
    assert square(4) == 16 and calls == [4, 4, 4]
    assert square.cache_key(4).startswith(f"memo-{tag}:")
    assert client.exists(square.cache_key(4))


def test_memoize_caches_none_not_exceptions(daemon_client: halcyon.Client) -> None:
    client = daemon_client
    calls: List[int] = []

    @client.memoize(prefix=f"memo-{uuid.uuid4().hex}")
    def maybe(x: int) -> Any:
        calls.append(x)
        if x < 0:
            raise ValueError(x)
        return None

    try:
        assert maybe(1) is None
    except errors.MissingParamError:
        pytest.xfail(NULL_BUG)
    assert maybe(1) is None and calls == [1]
    for _ in range(2):
        with pytest.raises(ValueError):
            maybe(-1)
    assert calls == [1, -1, -1]


# ------------------------------------------------ fake server only

def test_replies_matched_by_id_not_order(fake: FakeServer, key: str) -> None:
    with halcyon.Client(fake.path) as c:
        c.call("fake.reverse")
        with c.pipeline() as p:
            for i in range(50):
                p.set(f"{key}{i}", i)
            for i in range(50):
                p.get(f"{key}{i}")
        assert p.results == [True] * 50 + list(range(50))


def test_timeout_sends_cancel(fake: FakeServer, key: str) -> None:
    with halcyon.Client(fake.path) as c:
        holder = _hold_io(fake.path, 1.0)
        with pytest.raises(halcyon.HalcyonTimeoutError):
            c.set(key, "x", timeout=0.2)
        holder.join()
        assert c.ping()
    sets = [m for m in fake.received if m.get("method") == "cache.set"]
    cancels = [m for m in fake.received if m.get("method") == "$/cancelRequest"]
    assert cancels and cancels[0]["params"]["id"] == sets[0]["id"]


def test_reconnect_retries_idempotent_calls(fake: FakeServer, key: str) -> None:
    with halcyon.Client(fake.path) as c:
        c.set(key, "v")
        fake.hangup_next = True
        assert c.get(key) == "v"          # broken after sending; get is idempotent
        assert fake.connections == 2
        fake.hangup_next = True
        with pytest.raises(halcyon.HalcyonConnectionError):
            c.call("server.ping")         # call() is never resent
        assert c.ping() and fake.connections == 3


def test_no_retry_when_disabled(fake: FakeServer) -> None:
    with halcyon.Client(fake.path, retry=False) as c:
        c.ping()
        fake.hangup_next = True
        with pytest.raises(halcyon.HalcyonConnectionError):
            c.ping()
        assert c.ping()


def test_server_restart_between_calls(fake: FakeServer) -> None:
    import os
    path = fake.path
    with halcyon.Client(path) as c:
        assert c.ping()
        fake.stop()
        replacement = FakeServer(path)
        try:
            assert c.ping()               # stale connection: resent on a new one
            assert replacement.connections == 1
        finally:
            replacement.stop()
    assert not os.path.exists(path)


def test_configure_reapplied_after_reconnect(fake: FakeServer) -> None:
    with halcyon.Client(fake.path) as c:
        c.configure(load_disk_file_synchronously=True)
        fake.hangup_next = True
        assert c.ping()
    configures = [m for m in fake.received if m.get("method") == "connection.configure"]
    assert len(configures) == 2 and configures[1]["params"] == {"loadDiskFileSynchronously": True}


def test_forked_child_gets_its_own_connection(fake: FakeServer, key: str) -> None:
    import os
    with halcyon.Client(fake.path) as c:
        c.set(key, "parent")
        pid = os.fork()
        if pid == 0:  # child: exit code says whether it could talk to the server
            try:
                ok = c.get(key) == "parent" and c.set(key, "child")
            except BaseException:
                ok = False
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert c.get(key) == "child"
        assert fake.connections == 2


# ------------------------------------------------ properties

@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=65536))
def test_any_bytes_round_trip(server_path: str, data: bytes) -> None:
    with halcyon.Client(server_path) as c:
        k = f"bytes-{uuid.uuid4().hex}"
        c.set(k, data)
        assert c.get(k) == data


# At most 1024 code points of at most 4 UTF-8 bytes: every key is 1..4096 bytes.
keys = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=1024)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=keys, value=st.text())
def test_any_unicode_key_round_trips(server_path: str, key: str, value: str) -> None:
    with halcyon.Client(server_path) as c:
        c.set(key, value)
        assert c.get(key) == value
        assert c.exists(key)
        assert c.delete(key)


def test_large_values(client: halcyon.Client, key: str) -> None:
    big = bytes(range(256)) * (2 * 4096)  # 2 MiB
    client.set(key, big, timeout=60)
    assert client.get(key, timeout=60) == big
    text = "ü" * (1 << 19)
    client.set(key, text, timeout=60)
    assert client.get(key, timeout=60) == text


def test_get_entry_in_another_encoding(client: halcyon.Client, key: str) -> None:
    client.set(key, {"a": 1})
    entry = client.get_entry(key, encoding="base64")
    assert entry is not None and entry.value == b'{"a":1}' and entry.encoding == "base64"
    client.set(key, b"\xff")
    with pytest.raises(errors.CannotEncodeError):
        client.get_entry(key, encoding="utf8")
    with pytest.raises(ValueError):
        client.get_entry(key, encoding="hex")


def test_notifications_get_no_reply(client: halcyon.Client) -> None:
    client.notify("$/cancelRequest", {"id": 987654321})  # unknown id: silently ignored
    client.notify("server.ping")                          # a notification is never answered
    client.notify("no.such.method")                       # not even with an error
    assert client.ping()
