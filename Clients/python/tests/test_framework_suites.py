"""Each framework's own backend suite, run against its halcyon.contrib backend and a
real halcyond, as the framework runs it for its Redis backend:

- Django: ``BaseCacheTests`` (tests/cache/tests.py of Django's source distribution);
- cachelib: the shared classes of tests/common.py and its siblings;
- requests-cache: ``BaseStorageTest`` and ``BaseCacheTest`` (with the ``httpbin``
  package served on loopback).

(dogpile.cache's suites ship in its wheel and run in test_contrib_dogpile.py.) The
suites come from the source distributions of the installed versions, which
scripts/bootstrap unpacks into .build/framework-suites (``fetch_suites.py``); a suite
that is not there is skipped, saying so. Each must pass with no failure and no skip but
those the framework's Redis backend takes too; the counts are printed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from conftest import REPO, Daemon, _daemon_until_done

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
SUITES = Path(os.environ.get("HALCYON_FRAMEWORK_SUITES", str(REPO / ".build" / "framework-suites")))
#: Wall-clock bound for one framework's whole suite (a hung suite fails, not hangs).
SUITE_TIMEOUT = 900


def _sdist(name: str, module: str) -> Path:
    pytest.importorskip(module, reason=f"{name} is not installed (pip install 'halcyon-cache[{name}]')")
    try:
        found = SUITES / f"{name}-{version(name)}"
    except PackageNotFoundError:
        pytest.skip(f"{name} is not installed as a distribution")
    if not found.is_dir():
        pytest.skip(f"{found} is missing: scripts/bootstrap --python fetches {name}'s source distribution")
    return found


@pytest.fixture
def suite_daemon() -> Iterator[Daemon]:
    yield from _daemon_until_done()


def _env(daemon: Daemon, **extra: str) -> Dict[str, str]:
    env = dict(os.environ)
    env["HALCYON_SOCKET"] = daemon.socket
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *extra.pop("path", "").split(os.pathsep)]).rstrip(os.pathsep)
    env.update(extra)
    return env


def _pytest_counts(xml: Path) -> Tuple[int, List[str], List[Tuple[str, str]]]:
    """(ran, failed or errored test names, [(skipped test, reason)]) from a JUnit file."""
    root = ET.parse(xml).getroot()
    ran, bad, skipped = 0, [], []
    for case in root.iter("testcase"):
        ran += 1
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            bad.append(name)
        skip = case.find("skipped")
        if skip is not None:
            skipped.append((name, skip.get("message", "")))
    return ran, bad, skipped


def _run_pytest_suite(sdist: Path, test_file: Path, env: Dict[str, str], tmp: Path) -> Tuple[int, List[str], List]:
    xml = tmp / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", str(test_file)],
        cwd=sdist, env=env, capture_output=True, text=True, timeout=SUITE_TIMEOUT)
    if not xml.exists():
        pytest.fail(f"the suite did not run:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    ran, bad, skipped = _pytest_counts(xml)
    assert not bad, f"{len(bad)} failed: {bad}\n{proc.stdout[-6000:]}"
    return ran, bad, skipped


def test_django_base_cache_tests(suite_daemon: Daemon) -> None:
    sdist = _sdist("django", "django")
    proc = subprocess.run(
        [sys.executable, str(HERE / "frameworks" / "django_suite.py"), str(sdist / "tests"), suite_daemon.socket],
        env=_env(suite_daemon), capture_output=True, text=True, timeout=SUITE_TIMEOUT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the suite did not report:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    outcome = json.loads(lines[-1])
    assert not outcome["failures"] and not outcome["errors"], f"{outcome}\n{proc.stderr[-8000:]}"
    # Django's Redis backend leaves out the culling caches, so its suite skips these three.
    assert sorted(outcome["skipped"]) == [
        ["test_cull", "Culling isn't implemented."],
        ["test_cull_delete_when_store_empty", "Culling isn't implemented."],
        ["test_zero_cull", "Culling isn't implemented."],
    ]
    print(f"\n{outcome['suite']}: {outcome['ran']} ran, {outcome['ran'] - len(outcome['skipped'])} passed, "
          f"{len(outcome['skipped'])} skipped (as for RedisCache)")


def test_cachelib_common_tests(suite_daemon: Daemon, tmp_path: Path) -> None:
    sdist = _sdist("cachelib", "cachelib")
    pytest.importorskip("xprocess", reason="cachelib's tests/conftest.py needs pytest-xprocess")
    target = sdist / "tests" / "test_halcyon_suite.py"
    shutil.copyfile(HERE / "frameworks" / "cachelib_suite.py", target)
    ran, _, skipped = _run_pytest_suite(sdist, target, _env(suite_daemon), tmp_path)
    assert ran > 0 and not skipped, skipped
    print(f"\ncachelib {version('cachelib')} shared suites: {ran} ran, {ran} passed, 0 skipped")


def test_requests_cache_storage_and_cache_tests(suite_daemon: Daemon, tmp_path: Path) -> None:
    sdist = _sdist("requests-cache", "requests_cache")
    for module in ("httpbin", "requests_mock", "rich"):
        pytest.importorskip(module, reason=f"requests-cache's suite needs {module}")
    httpbin = subprocess.Popen([sys.executable, str(HERE / "frameworks" / "httpbin_server.py")],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert httpbin.stdout is not None
        url = httpbin.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        target = sdist / "tests" / "integration" / "test_halcyon_suite.py"
        shutil.copyfile(HERE / "frameworks" / "requests_cache_suite.py", target)
        env = _env(suite_daemon, path=str(sdist), HTTPBIN_URL=url)
        ran, _, skipped = _run_pytest_suite(sdist, target, env, tmp_path)
    finally:
        httpbin.kill()
        httpbin.wait(10)
    assert ran > 0 and not skipped, skipped
    print(f"\nrequests-cache {version('requests-cache')} storage and cache suites: {ran} ran, {ran} passed, 0 skipped")
