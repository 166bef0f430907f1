"""The rules that need no server: socket discovery, value encodings, expirations,
error classes by reason, memoize keys, request framing."""

from __future__ import annotations

import datetime as dt
import json
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

import halcyon
from halcyon import _wire, errors
from halcyon.memoize import make_key


# ------------------------------------------------------------- discovery

def test_socket_path_argument_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HALCYON_SOCKET", "/env/h.sock")
    assert halcyon.resolve_socket_path("/arg/h.sock") == "/arg/h.sock"
    assert halcyon.Client("/arg/h.sock").path == "/arg/h.sock"


def test_socket_path_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HALCYON_SOCKET", "/env/h.sock")
    assert halcyon.Client().path == "/env/h.sock"


def test_socket_path_xdg_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HALCYON_SOCKET", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert halcyon.Client().path == "/run/user/1000/halcyon/halcyon.sock"


def test_socket_path_tmp_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    monkeypatch.delenv("HALCYON_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert halcyon.default_socket_path() == f"/tmp/halcyon-{os.getuid()}/halcyon.sock"
    monkeypatch.setenv("XDG_RUNTIME_DIR", "")
    assert halcyon.default_socket_path() == f"/tmp/halcyon-{os.getuid()}/halcyon.sock"


# ---------------------------------------------------------------- values

@pytest.mark.parametrize("value, encoding", [
    (b"\x00\xff", "base64"), (bytearray(b"ab"), "base64"), (memoryview(b"ab"), "base64"),
    ("héllo", "utf8"), ("", "utf8"),
    (None, "json"), (True, "json"), (0, "json"), (1.5, "json"), ([1, "a"], "json"), ({"a": [1]}, "json"),
])
def test_encoding_rule(value: object, encoding: str) -> None:
    assert _wire.encode_value(value)[1] == encoding


@pytest.mark.parametrize("value", [object(), {1, 2}, float("nan"), float("inf"), {"a": object()},
                                   2**63, [-(2**63) - 1], {"a": [2**64]},
                                   # json.dumps would turn these keys into strings:
                                   {1: "a"}, {"a": {2.5: 1}}, [{True: 1}], {None: 0}, {("t",): 1}])
def test_unstorable_values_raise_type_error(value: object) -> None:
    with pytest.raises(TypeError):
        _wire.encode_value(value)


@given(st.binary(max_size=2048))
def test_bytes_encode_decode_exactly(data: bytes) -> None:
    wire, encoding = _wire.encode_value(data)
    assert _wire.decode_value(json.loads(json.dumps(wire)), encoding) == data


@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text() |
                    st.floats(allow_nan=False, allow_infinity=False),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20))
def test_json_values_decode_as_stored(value: object) -> None:
    wire, encoding = _wire.encode_value(value)
    assert _wire.decode_value(json.loads(_wire.dumps(wire)), encoding) == value


# ----------------------------------------------------------- expirations

def test_expirations() -> None:
    assert _wire.to_expiration(None) is None
    assert _wire.to_expiration(10) == {"seconds": 10}
    assert _wire.to_expiration(0.5) == {"seconds": 0.5}
    assert _wire.to_expiration(0) == "expired"
    assert _wire.to_expiration(-3) == "expired"
    assert _wire.to_expiration(dt.timedelta(minutes=2)) == {"seconds": 120.0}
    assert _wire.to_expiration("never") == "never"
    assert _wire.to_expiration("expired") == "expired"
    assert _wire.to_expiration({"days": 7}) == {"days": 7}
    when = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    assert _wire.to_expiration(when) == {"date": when.timestamp()}
    with pytest.raises(TypeError):
        _wire.to_expiration(True)
    with pytest.raises(ValueError):
        _wire.to_expiration("soon")
    with pytest.raises(ValueError):
        _wire.to_expiration(float("nan"))


def test_extending() -> None:
    assert _wire.to_extending(None) is None
    assert _wire.to_extending(False) == "none"
    assert _wire.to_extending("none") == "none"
    assert _wire.to_extending("cacheTime") == "cacheTime"
    assert _wire.to_extending(60) == {"expirationTime": {"seconds": 60}}
    assert _wire.to_extending("never") == {"expirationTime": "never"}


def test_only_given_params_are_sent() -> None:
    # The daemon rejects unknown members, and a null is not "left out".
    assert _wire.cmd_set("k", "v").params == {"key": "k", "value": "v", "encoding": "utf8"}
    assert _wire.cmd_get("k").params == {"key": "k"}
    assert _wire.cmd_get("k", memory_only=True, extend=False).params == {
        "key": "k", "fromMemoryOnly": True, "extendingExpiration": "none"}
    assert _wire.cmd_clear().params is None
    assert _wire.cmd_clear(disk=False).params == {"disk": False}
    assert _wire.cmd_touch("k").params == {"key": "k"}
    assert _wire.cmd_set("k", b"", 5, memory_expire=1, to_disk=False).params == {
        "key": "k", "value": "", "encoding": "base64", "expiration": {"seconds": 5},
        "memoryExpiration": {"seconds": 1}, "toDisk": False}


def test_keys_must_be_str() -> None:
    with pytest.raises(TypeError):
        _wire.cmd_get(b"k")  # type: ignore[arg-type]


def test_request_framing() -> None:
    line = _wire.dumps(_wire.cmd_set("ключ", "значение").request(7))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    obj = json.loads(line)
    assert obj == {"jsonrpc": "2.0", "method": "cache.set", "id": 7,
                   "params": {"key": "ключ", "value": "значение", "encoding": "utf8"}}
    assert "params" not in json.loads(_wire.dumps(_wire.cmd_ping().request(1)))
    assert "id" not in _wire.cmd_ping().request(None)
    assert json.loads(_wire.cancel_line(9)) == {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 9}}


def test_parse_line_batch_and_garbage() -> None:
    assert len(_wire.parse_line(b'[{"id":1,"result":1},{"id":2,"result":2}]')) == 2
    with pytest.raises(errors.ProtocolError):
        _wire.parse_line(b"{nope")


@pytest.mark.parametrize("line", [
    b'{"id":1,"result":{"found":true,"value":"dg==","encoding":"base64"}}\n',  # as it comes off the socket
    b'{"id":1,"result":1.5e3}', b'  {"id":2}\r\n', b'{"id":3,"result":"\\u00e9\xc3\xa9"}\t',
    b'{"id":4,"result":NaN}',
])
def test_parse_line_reads_what_json_loads_reads(line: bytes) -> None:
    # The scanner called directly must accept exactly json.loads's input, trailing
    # newline included (the single-reply path parses the line as received).
    assert _wire.parse_line(line) == [json.loads(line)]


@pytest.mark.parametrize("line", [b"", b"\n", b'{"id":1} {"id":2}', b'{"id":1}x', b'{"id":1', b"nope", b"\xff"])
def test_parse_line_refuses_what_json_loads_refuses(line: bytes) -> None:
    with pytest.raises(errors.ProtocolError):
        _wire.parse_line(line)


# ---------------------------------------------------------------- errors

def _err(code: int, reason: str, **data: object) -> errors.HalcyonError:
    return errors.from_reply({"code": code, "message": "m", "data": {"reason": reason, **data}})


def test_errors_by_reason_and_family() -> None:
    e = _err(-32602, "keyTooLong")
    assert type(e) is errors.KeyTooLongError
    assert isinstance(e, halcyon.InvalidParamsError) and isinstance(e, halcyon.ProtocolError)
    assert isinstance(e, ValueError) and e.code == -32602 and e.reason == "keyTooLong"
    assert type(_err(-32600, "lineTooLong")) is errors.LineTooLongError
    assert type(_err(-32600, "batchTooLarge")) is errors.BatchTooLargeError
    assert type(_err(-32001, "diskStorageIsNotReady")) is errors.DiskStorageIsNotReadyError
    e = _err(-32002, "cannotCreateCacheFile", errno=28)
    assert isinstance(e, errors.CannotWriteError) and isinstance(e, halcyon.StorageError) and e.errno == 28
    e = _err(-32800, "requestCancelled", started=True)
    assert isinstance(e, halcyon.CancelledError) and e.started is True
    assert type(_err(-32005, "tooManyInFlight")) is errors.TooManyInFlightError
    assert isinstance(_err(-32005, "shuttingDown"), halcyon.OverloadedError)
    assert type(_err(-32004, "cannotEncode")) is errors.CannotEncodeError
    assert isinstance(_err(-32004, "notUTF8"), errors.CannotEncodeError)
    assert type(_err(-32601, "methodNotFound")) is halcyon.MethodNotFoundError
    assert type(_err(-32602, "emptyKey")) is errors.EmptyKeyError
    assert type(_err(-32601, "debugMethodsDisabled")) is errors.DebugMethodsDisabledError


def test_unknown_reason_gets_one_stable_class() -> None:
    classes = []

    def make() -> None:
        classes.append(errors.for_reason("brandNewReason", -32602))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(classes)) == 1
    cls = classes[0]
    assert cls.__name__ == "BrandNewReasonError" and issubclass(cls, halcyon.InvalidParamsError)
    assert type(_err(-32602, "brandNewReason")) is cls


def test_malformed_error_replies() -> None:
    assert type(errors.from_reply("boom")) is errors.ProtocolError
    e = errors.from_reply({"code": -32099})
    assert type(e) is errors.HalcyonError and e.reason is None
    assert "keyTooLong" in str(_err(-32602, "keyTooLong"))


def test_client_side_errors_are_builtin_kinds() -> None:
    assert issubclass(halcyon.HalcyonConnectionError, ConnectionError)
    assert issubclass(halcyon.HalcyonTimeoutError, TimeoutError)


# --------------------------------------------------------------- memoize

def test_memoize_keys() -> None:
    a = make_key("p", (1, "x"), {"b": 2, "a": 1}, False)
    assert a == make_key("p", (1, "x"), {"a": 1, "b": 2}, False)
    assert a.startswith("p:") and len(a.encode()) < 100
    assert a != make_key("p", (1, "y"), {"a": 1, "b": 2}, False)
    assert make_key("p", (1,), {}, False) == make_key("p", (1.0,), {}, False)
    assert make_key("p", (1,), {}, True) != make_key("p", (1.0,), {}, True)
    assert make_key("p", (b"x",), {}, False) != make_key("p", ("x",), {}, False)


def test_command_line_is_the_request_encoded() -> None:
    for command in (_wire.cmd_get("ключ"), _wire.cmd_set("k", b"\x00", 5), _wire.cmd_ping(),
                    _wire.cmd_get("k", memory_only=True)):
        for rid in (1, 123456789):
            line = command.line(rid)
            assert line.endswith(b"\n") and line.count(b"\n") == 1
            assert json.loads(line) == command.request(rid)


@given(st.text(min_size=1, max_size=40), st.binary(max_size=3000), st.sampled_from([None, 5, "never", 0.5]))
def test_write_lines_of_bytes_are_the_request_encoded(key: str, data: bytes, expire: object) -> None:
    # Bytes go into the line without the encoder's escape pass; the line must still be
    # the request (any key, escapes included), and the value the stored bytes.
    for command in (_wire.cmd_set(key, data, expire), _wire.cmd_add(key, bytearray(data), expire, to_disk=False),
                    _wire.cmd_cas(key, memoryview(data), 7, expire)):
        line = command.line(9)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        request = json.loads(line)
        assert request == command.request(9)
        assert _wire.decode_value(request["params"]["value"], "base64") == data


def test_only_values_encoded_here_skip_the_escape_pass() -> None:
    # A str the caller sends as "base64" through call() is not trusted to need no escapes.
    command = _wire.cmd_call("cache.set", {"key": "k", "value": 'not "base64"\n', "encoding": "base64"})
    assert json.loads(command.line(1)) == command.request(1)
    wire, encoding = _wire.encode_value(b"\xff\x00")
    assert (wire, encoding) == ("/wA=", "base64") and isinstance(wire, str)


def test_parse_lines_decodes_many_lines_at_once() -> None:
    chunk = b'{"id":1,"result":1}\n[{"id":2,"result":2},{"id":3,"result":3}]\n{"id":null,"error":{}}'
    assert [r["id"] for r in _wire.parse_lines(chunk)] == [1, 2, 3, None]
    # Blank lines and CRs fall back to line by line.
    assert [r["id"] for r in _wire.parse_lines(b'{"id":1}\r\n\n{"id":2}')] == [1, 2]
    assert _wire.parse_lines(b"") == []
    with pytest.raises(errors.ProtocolError):
        _wire.parse_lines(b'{"id":1}\n[1]')
    with pytest.raises(errors.ProtocolError):
        _wire.parse_lines(b'{"id":1}\n{nope')


def test_a_plain_get_reuses_its_command_and_the_table_stays_bounded() -> None:
    hot = _wire.cmd_get("hot")
    assert _wire.cmd_get("hot") is hot
    assert hot.line(7) == b'{"jsonrpc":"2.0","method":"cache.get","params":{"key":"hot"},"id":7}\n'
    assert hot.line(8).endswith(b'"id":8}\n')
    assert hot.decode({"found": False}) is None
    assert hot.decode({"found": True, "value": "v", "encoding": "utf8"}) == "v"
    # A default, or any option, gets a command of its own.
    with_default = _wire.cmd_get("hot", "fallback")
    assert with_default is not hot and with_default.decode({"found": False}) == "fallback"
    assert _wire.cmd_get("hot", memory_only=True) is not hot
    for i in range(_wire._PLAIN_GETS_BOUND + 10):
        _wire.cmd_get(f"k{i}")
    assert 0 < len(_wire._plain_gets) <= _wire._PLAIN_GETS_BOUND
