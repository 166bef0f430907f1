"""Eight processes want one expensive value at the same instant, through each
framework backend and that framework's own lock (dogpile's ``get_or_create`` with the
lease mutex) or add-as-lock (Django, cachelib, requests-cache): it is computed once,
and every process gets it. Workers: frameworks/stampede_worker.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator, List

import pytest

from conftest import Daemon, _daemon_until_done, short_tmpdir

HERE = Path(__file__).resolve().parent
WORKERS = 8


@pytest.fixture(scope="module")
def stampede_daemon() -> Iterator[Daemon]:
    yield from _daemon_until_done()


def _stampede(framework: str, daemon: Daemon, extra: List[str] = ()) -> None:  # type: ignore[assignment]
    markers = short_tmpdir()
    key = f"stampede-{uuid.uuid4().hex}"
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src"))
    # Everyone starts at one instant, well after the slowest interpreter has started.
    start = time.time() + 3.0
    procs = [subprocess.Popen(
        [sys.executable, str(HERE / "frameworks" / "stampede_worker.py"), framework, daemon.socket, key, markers,
         repr(start), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(WORKERS)]
    try:
        outputs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            p.kill()
    computed = os.listdir(markers)
    shutil.rmtree(markers, ignore_errors=True)
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-3000:]
        assert out.strip() == "the value", (out, err[-2000:])
    assert len(computed) == 1, f"{len(computed)} computations: {computed}"


def test_django_add_as_lock_computes_once(stampede_daemon: Daemon) -> None:
    pytest.importorskip("django")
    _stampede("django", stampede_daemon)


def test_cachelib_add_as_lock_computes_once(stampede_daemon: Daemon) -> None:
    pytest.importorskip("cachelib")
    _stampede("cachelib", stampede_daemon)


def test_dogpile_lease_mutex_computes_once(stampede_daemon: Daemon) -> None:
    pytest.importorskip("dogpile.cache")
    _stampede("dogpile", stampede_daemon)


def test_requests_cache_add_as_lock_fetches_once(stampede_daemon: Daemon) -> None:
    pytest.importorskip("requests_cache")
    pytest.importorskip("httpbin")
    server = subprocess.Popen([sys.executable, str(HERE / "frameworks" / "httpbin_server.py")],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        _stampede("requests-cache", stampede_daemon, [f"{url}/delay/0.5"])
    finally:
        server.kill()
        server.wait(10)
