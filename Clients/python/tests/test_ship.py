"""Shipping: one version everywhere, the install script and the systemd units, metrics
(``halcyon metrics``, ``server.metrics`` and the HTTP endpoint), logs, socket activation
reporting the inherited path, and finding the daemon without ``XDG_RUNTIME_DIR``."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

import halcyon
from conftest import REPO, Daemon, _start_daemon, short_tmpdir

VERSION = (REPO / "VERSION").read_text().strip()


@pytest.fixture(scope="module")
def halcyon_cli(halcyon_bin: str) -> str:
    return halcyon_bin


def wait_for(predicate, seconds: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


# ---------------------------------------------------------------- one version

def test_version_is_one_number_everywhere(halcyond_bin: str, halcyon_cli: str) -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION)
    assert halcyon.__version__ == VERSION
    swift = (REPO / "Sources/HalcyonVersion/HalcyonVersion.swift").read_text()
    assert f'public static let current = "{VERSION}"' in swift
    pyproject = (REPO / "Clients/python/pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'attr = "halcyon.__version__"' in pyproject
    for binary in (halcyond_bin, halcyon_cli):
        done = subprocess.run([binary, "--version"], capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode().strip() == VERSION


def test_server_info_reports_the_version(daemon: Daemon) -> None:
    with halcyon.Client(daemon.socket) as c:
        assert c.info()["version"] == VERSION


# ---------------------------------------------------------------- install, units

@pytest.fixture(scope="module")
def installed(halcyond_bin: str, halcyon_cli: str) -> Iterator[Path]:
    """scripts/install with the already-built binaries (no release build: too slow here)."""
    folder = Path(tempfile.mkdtemp(prefix="hc-install-"))
    binaries = Path(halcyond_bin).parent
    if Path(halcyon_cli).parent != binaries:
        pytest.skip("halcyond and halcyon are not in one folder")
    done = subprocess.run([str(REPO / "scripts/install"), "--prefix", str(folder), "--binaries", str(binaries)],
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_install_lays_out_binaries_units_completions_docs(installed: Path) -> None:
    for path in ["bin/halcyond", "bin/halcyon",
                 "lib/systemd/system/halcyon.socket", "lib/systemd/system/halcyon.service",
                 "lib/systemd/user/halcyon.socket", "lib/systemd/user/halcyon.service",
                 "share/bash-completion/completions/halcyon", "share/bash-completion/completions/halcyond",
                 "share/zsh/site-functions/_halcyon", "share/fish/vendor_completions.d/halcyon.fish",
                 "share/doc/halcyon/OPERATIONS.md", "share/doc/halcyon/LICENSE",
                 "share/man/man1/halcyon.1", "share/man/man8/halcyond.8",
                 "share/halcyon/grafana-dashboard.json"]:
        assert (installed / path).is_file(), path
    assert os.access(installed / "bin/halcyond", os.X_OK)
    service = (installed / "lib/systemd/system/halcyon.service").read_text()
    assert f"ExecStart={installed}/bin/halcyond " in service
    assert "@BINDIR@" not in service and "@DOCDIR@" not in service
    for option in ["Type=notify", "NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes"]:
        assert option in service
    assert "metrics" in (installed / "share/bash-completion/completions/halcyon").read_text()


def test_install_dry_run_changes_nothing(halcyond_bin: str) -> None:
    folder = Path(tempfile.mkdtemp(prefix="hc-dry-"))
    try:
        done = subprocess.run([str(REPO / "scripts/install"), "--prefix", str(folder / "p"), "--dry-run",
                               "--binaries", str(Path(halcyond_bin).parent)], capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode()
        assert "lib/systemd/user/halcyon.socket" in done.stdout.decode()
        assert not (folder / "p").exists()
        bad = subprocess.run([str(REPO / "scripts/install"), "--prefix", "relative"], capture_output=True, timeout=60)
        assert bad.returncode == 2 and b"absolute" in bad.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("scope", ["system", "user"])
def test_units_pass_systemd_analyze_verify(installed: Path, scope: str) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    units = installed / "lib/systemd" / scope
    args = [analyze, "verify", "--man=no"]
    env = {**os.environ, "SYSTEMD_LOG_LEVEL": "warning"}
    runtime = tempfile.mkdtemp(prefix="hc-xdg-")
    if scope == "user":
        # A user manager needs a runtime folder, which a CI shell may not have.
        args.append("--user")
        env["XDG_RUNTIME_DIR"] = runtime
    try:
        done = subprocess.run([*args, str(units / "halcyon.socket"), str(units / "halcyon.service")],
                              capture_output=True, timeout=60, env=env)
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    output = (done.stdout + done.stderr).decode()
    if "Failed to initialize manager" in output:
        pytest.skip(f"systemd-analyze cannot run here: {output.strip()[:200]}")
    # Complaints about units it cannot find on this machine (sockets.target in a chroot)
    # are not about our files; everything naming halcyon is.
    ours = [line for line in output.splitlines() if "halcyon" in line]
    assert done.returncode == 0 or not ours, output
    assert not ours, output


# ---------------------------------------------------------------- metrics

def parse_metrics(text: str) -> Dict[str, "object"]:
    parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client is not installed "
                                 "(scripts/bootstrap --python installs it)")
    return {family.name: family for family in parser.text_string_to_metric_families(text)}


def sample(families: Dict[str, "object"], family: str, name: str, **labels: str) -> float:
    for s in families[family].samples:  # type: ignore[attr-defined]
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    raise KeyError(f"{name} {labels}")


def test_halcyon_metrics_parses_and_counts(fresh_daemon: Daemon, halcyon_cli: str) -> None:
    with halcyon.Client(fresh_daemon.socket) as c:
        c.set("m-key", b"v")
        assert c.get("m-key") == b"v"
        assert c.get("m-absent") is None
    done = subprocess.run([halcyon_cli, "--socket", fresh_daemon.socket, "metrics"], capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    families = parse_metrics(done.stdout.decode())
    for family in ["halcyon_cache_hits", "halcyon_cache_misses", "halcyon_cache_hit_ratio", "halcyon_cache_sets",
                   "halcyon_cache_evictions", "halcyon_cache_expirations", "halcyon_cache_bytes",
                   "halcyon_cache_entries", "halcyon_connections", "halcyon_requests_in_flight",
                   "halcyon_write_backlog", "halcyon_request_duration_seconds", "halcyon_build_info"]:
        assert family in families, family
    assert sample(families, "halcyon_cache_hits", "halcyon_cache_hits_total", tier="memory") == 1
    assert sample(families, "halcyon_cache_misses", "halcyon_cache_misses_total", tier="disk") == 1
    assert sample(families, "halcyon_cache_sets", "halcyon_cache_sets_total") == 1
    assert sample(families, "halcyon_cache_entries", "halcyon_cache_entries", tier="memory") == 1
    assert 0 < sample(families, "halcyon_cache_hit_ratio", "halcyon_cache_hit_ratio") < 1
    assert sample(families, "halcyon_request_duration_seconds", "halcyon_request_duration_seconds_count",
                  method="cache.get") == 2
    assert sample(families, "halcyon_build_info", "halcyon_build_info", version=VERSION) == 1
    # A second render adds nothing that did not happen (counters copy differences once).
    again = parse_metrics(subprocess.run([halcyon_cli, "--socket", fresh_daemon.socket, "metrics"],
                                         capture_output=True, timeout=30, check=True).stdout.decode())
    assert sample(again, "halcyon_cache_hits", "halcyon_cache_hits_total", tier="memory") == 1
    assert sample(again, "halcyon_connections", "halcyon_connections") >= 1


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_metrics_http_endpoint_answers_on_loopback() -> None:
    port = free_port()
    daemon = _start_daemon(["--metrics-listen", f"127.0.0.1:{port}"])
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            assert reply.status == 200
            assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            body = reply.read().decode()
        assert "halcyon_cache_hits_total" in body
        parse_metrics(body)
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nothing", timeout=10)
        assert missing.value.code == 404
    finally:
        daemon.stop()
        shutil.rmtree(daemon.folder, ignore_errors=True)


@pytest.mark.parametrize("address", ["0.0.0.0:9100", "192.0.2.1:9100", "example.org:9100", "127.0.0.1:http",
                                     "127.0.0.1"])
def test_metrics_listen_refuses_non_loopback(halcyond_bin: str, address: str) -> None:
    done = subprocess.run([halcyond_bin, "--metrics-listen", address], capture_output=True, timeout=30)
    assert done.returncode == 2
    assert b"--metrics-listen" in done.stderr


# ---------------------------------------------------------------- logs

def run_logged(halcyond_bin: str, extra: List[str]) -> str:
    """Starts a daemon with `extra`, does a set and a get, stops it; returns its log."""
    daemon = Daemon(halcyond_bin, short_tmpdir(), extra)
    # Daemon.start passes --log-level warning; a later --log-level overrides it.
    daemon.start()
    try:
        with halcyon.Client(daemon.socket) as c:
            c.set("log-key", "v")
            c.get("log-key")
    finally:
        daemon.stop()
    text = Path(daemon.log).read_text()
    shutil.rmtree(daemon.folder, ignore_errors=True)
    return text


def test_trace_logs_each_request_and_debug_each_connection(halcyond_bin: str) -> None:
    log = run_logged(halcyond_bin, ["--log-level", "trace"])
    uid = str(os.getuid())
    assert re.search(rf"connection opened.*uid={uid}|uid={uid}.*connection opened", log), log
    assert "connection closed" in log
    requests = [line for line in log.splitlines() if "request" in line and "method=cache.set" in line]
    assert requests and "outcome=ok" in requests[0], log


def test_json_log_lines(halcyond_bin: str) -> None:
    log = run_logged(halcyond_bin, ["--log-level", "trace", "--log-format", "json"])
    lines = [json.loads(line) for line in log.splitlines() if line.strip()]
    assert lines and all({"time", "level", "label", "message"} <= set(line) for line in lines)
    gets = [line for line in lines if line["message"] == "request" and line.get("method") == "cache.get"]
    assert gets and gets[0]["outcome"] == "ok" and gets[0]["level"] == "trace"
    assert any(line["message"] == "connection opened" and line["uid"] == str(os.getuid()) for line in lines)


def test_bad_log_format_is_a_usage_error(halcyond_bin: str) -> None:
    done = subprocess.run([halcyond_bin, "--log-format", "xml"], capture_output=True, timeout=30)
    assert done.returncode == 2 and b"--log-format" in done.stderr


# ---------------------------------------------------------------- socket activation

def test_socket_activation_reports_the_inherited_path(halcyond_bin: str) -> None:
    folder = short_tmpdir()
    path = os.path.join(folder, "activated.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    fd = listener.fileno()
    log = os.path.join(folder, "log")

    def as_fd_3() -> None:
        os.dup2(fd, 3)

    with open(log, "wb") as out:
        # LISTEN_PID must be the daemon's own pid: the shell sets it to its pid, then execs.
        proc = subprocess.Popen(
            ["sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"', halcyond_bin,
             "--cache-dir", os.path.join(folder, "cache"), "--log-level", "info",
             "--socket", os.path.join(folder, "not-this.sock")],
            stdout=out, stderr=out, stdin=subprocess.DEVNULL, preexec_fn=as_fd_3, close_fds=False)
    try:
        with halcyon.Client(path, timeout=10) as c:
            info = c.info()
        assert info["socket"] == path
        started = wait_for(lambda: "listening" in Path(log).read_text())
        assert started, Path(log).read_text()
        line = next(l for l in Path(log).read_text().splitlines() if "listening" in l)
        assert f"socket={path}" in line and "not-this.sock" not in line
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        listener.close()
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- finding the daemon

def test_socket_candidates_order() -> None:
    assert halcyon.socket_candidates({"XDG_RUNTIME_DIR": "/run/user/1000"}, uid=1000) == [
        "/run/user/1000/halcyon/halcyon.sock", "/tmp/halcyon-1000/halcyon.sock", "/run/halcyon/halcyon.sock"]
    assert halcyon.socket_candidates({"XDG_RUNTIME_DIR": "/x"}, uid=7) == [
        "/x/halcyon/halcyon.sock", "/run/user/7/halcyon/halcyon.sock", "/tmp/halcyon-7/halcyon.sock",
        "/run/halcyon/halcyon.sock"]
    assert halcyon.socket_candidates({}, uid=7)[0] == "/run/user/7/halcyon/halcyon.sock"


def test_clients_find_the_daemon_without_xdg_runtime_dir(halcyond_bin: str, halcyon_cli: str) -> None:
    """As from cron: no XDG_RUNTIME_DIR, no HALCYON_SOCKET; the daemon is at the
    /tmp/halcyon-<uid> fallback. The CLI, the Python client and the shell library find it."""
    uid = os.geteuid()
    earlier = f"/run/user/{uid}/halcyon/halcyon.sock"
    target = f"/tmp/halcyon-{uid}/halcyon.sock"
    for path in (earlier, target):
        if os.path.exists(path):
            pytest.skip(f"{path} exists on this machine; not touching another daemon")
    folder = short_tmpdir()
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "HALCYON_SOCKET")}
    # Started the way cron would start it too: on its default path.
    proc = subprocess.Popen([halcyond_bin, "--cache-dir", os.path.join(folder, "cache")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: os.path.exists(target) and stat.S_ISSOCK(os.stat(target).st_mode)), "no socket"
        done = subprocess.run([halcyon_cli, "set", "cron-key", "from-cron"], env=env, capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr
        code = ("import halcyon; c = halcyon.Client(); print(c.path); print(c.get('cron-key'))")
        py = subprocess.run(["python3", "-c", code], capture_output=True, timeout=30,
                            env={**env, "PYTHONPATH": str(REPO / "Clients/python/src")})
        assert py.returncode == 0, py.stderr
        assert py.stdout.decode().split() == [target, "from-cron"]
        sh = subprocess.run(["bash", "-c", f'source "{REPO}/Clients/shell/halcyon.sh"; halcyon_get cron-key'],
                            env={**env, "HALCYON_BIN": halcyon_cli}, capture_output=True, timeout=30)
        assert sh.returncode == 0 and sh.stdout == b"from-cron", sh.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- scripts/package, scripts/start

def test_package_refuses_binaries_that_are_not_self_contained(halcyond_bin: str, halcyon_cli: str) -> None:
    # The debug build: a run path into the toolchain, the Swift runtime as shared
    # libraries, symbols kept. Packaged, it would run nowhere else.
    work = Path(short_tmpdir())
    try:
        binaries = work / "bin"
        binaries.mkdir()
        shutil.copy2(halcyond_bin, binaries / "halcyond")
        shutil.copy2(halcyon_cli, binaries / "halcyon")
        out = work / "out"
        r = subprocess.run([str(REPO / "scripts/package"), "deb", "--binaries", str(binaries), "--out", str(out)],
                           capture_output=True, timeout=600)
        message = r.stderr.decode()
        assert r.returncode == 1, message
        assert "is not a self-contained release binary" in message and "scripts/build-release" in message, message
        assert "run path" in message and "libswiftCore.so" in message and "not stripped" in message, message
        assert not out.exists() or not any(out.iterdir())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_start_says_what_it_builds_before_the_compiler_runs() -> None:
    # A `swift` that only records that it was called stands in for the compiler: the
    # point is what scripts/start says before a build it cannot shorten.
    work = Path(short_tmpdir())
    try:
        fake = work / "swift"
        fake.write_text("#!/bin/sh\necho 'COMPILER CALLED' >&2\nexit 3\n")
        fake.chmod(0o755)
        env = dict(os.environ, PATH=f"{work}:{os.environ['PATH']}")
        r = subprocess.run([str(REPO / "scripts/start")], capture_output=True, timeout=300, env=env,
                           stdin=subprocess.DEVNULL)
        text = r.stderr.decode()
        assert r.returncode == 3, text
        assert "COMPILER CALLED" in text
        before = text[:text.index("COMPILER CALLED")]
        assert "start: [1/4]" in before and "start: [2/4] building halcyond in release mode" in before, text
        if not (REPO / ".build/release/halcyond").exists():
            assert "for the first time" in before and "15 minutes" in before and "take seconds" in before, text
    finally:
        shutil.rmtree(work, ignore_errors=True)
