"""A fresh virtual environment gets working backends from the distribution: the
``halcyon.contrib`` package is in it, the dogpile.cache entry point is declared, and the
snippets of Docs/FRAMEWORKS.md run as pasted against a real halcyond.

The venv sees the machine's site-packages (the frameworks come from there, so the test
needs no network) and gets halcyon-cache itself with ``pip install --no-deps``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from conftest import REPO, Daemon, _daemon_until_done, short_tmpdir

DOC = REPO / "Docs" / "FRAMEWORKS.md"


@pytest.fixture(scope="module")
def venv_python() -> Iterator[str]:
    for module in ("django", "dogpile.cache", "cachelib", "requests_cache", "setuptools", "wheel"):
        pytest.importorskip(module)
    folder = short_tmpdir()
    try:
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", folder], check=True, timeout=120)
        python = os.path.join(folder, "bin", "python")
        r = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                            str(REPO / "Clients" / "python")], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            pytest.skip(f"pip could not install the distribution here: {r.stderr[-1500:]}")
        yield python
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def doc_daemon() -> Iterator[Daemon]:
    yield from _daemon_until_done()


def _snippets() -> list:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def _run(python: str, daemon: Daemon, code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HALCYON_SOCKET"] = daemon.socket
    r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd="/")
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_the_distribution_has_contrib_and_the_entry_point(venv_python: str, doc_daemon: Daemon) -> None:
    out = _run(venv_python, doc_daemon, textwrap.dedent("""
        import halcyon, halcyon.contrib
        from importlib.metadata import entry_points
        assert "site-packages" in halcyon.__file__, halcyon.__file__
        (ep,) = [e for e in entry_points(group="dogpile.cache") if e.name == "halcyon"]
        print(ep.load().__name__)
    """))
    assert out.strip() == "HalcyonBackend"


def test_every_snippet_runs_as_pasted(venv_python: str, doc_daemon: Daemon) -> None:
    django_settings, dogpile_code, cachelib_code, requests_code = _snippets()
    _run(venv_python, doc_daemon, django_settings + textwrap.dedent("""
        import django
        from django.conf import settings
        settings.configure(CACHES=CACHES)
        django.setup()
        from django.core.cache import cache
        cache.set("snippet", {"ok": 1})
        assert cache.get("snippet") == {"ok": 1}
        assert cache.make_key("snippet").startswith("mysite:")
    """))
    _run(venv_python, doc_daemon, dogpile_code.replace("    ...", "    return {'id': user_id}") + textwrap.dedent("""
        assert load_user(7) == {"id": 7}
        assert region.backend.get_mutex("k").acquire(False)
    """))
    _run(venv_python, doc_daemon, cachelib_code + "\nassert cache.get('answer') == 43\n")
    # The snippet's URL is not on this machine: everything but the request itself runs.
    offline = "\n".join(line for line in requests_code.splitlines() if "example.invalid" not in line)
    _run(venv_python, doc_daemon, offline + textwrap.dedent("""
        from halcyon.contrib.requests_cache import HalcyonCache as H
        assert isinstance(session.cache, H)
        session.cache.redirects["a"] = "b"
        assert session.cache.redirects["a"] == "b"
    """))
