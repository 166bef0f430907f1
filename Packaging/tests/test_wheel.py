"""The platform wheel, installed into a fresh virtual environment whose PATH holds no
build folder: the daemon starts from it and the client answers. And the pure client,
still installable alone."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Dict, Iterator

import pytest

from conftest import REPO, VERSION, short_tmpdir, stop

TOOLS = REPO / ".build-release/package-tools/bin"


@pytest.fixture
def folder() -> Iterator[Path]:
    path = short_tmpdir("hc-wheel-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def fresh_venv(where: Path) -> Dict[str, str]:
    """A new virtual environment and the environment to run commands in it: its bin first,
    then only the system's folders (no toolchain, no .build)."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    return {"PATH": f"{where}/bin:/usr/local/bin:/usr/bin:/bin", "HOME": str(where.parent),
            "LANG": "C.UTF-8"}


def test_wheel_is_tagged_as_auditwheel_judges_it(wheel: Path) -> None:
    platform = wheel.name.removesuffix(".whl").split("-")[-1]
    shown = subprocess.run([str(TOOLS / "auditwheel"), "show", str(wheel)], capture_output=True, text=True,
                           timeout=300)
    verdict = " ".join((shown.stdout + shown.stderr).split())
    print(verdict)
    found = re.search(r'consistent with the following platform tag: "([a-z0-9_]+)"', verdict)
    if platform.startswith("manylinux"):
        assert found is not None and found.group(1) == platform, verdict
    else:
        assert platform == f"linux_{os.uname().machine}"
        assert found is None or not found.group(1).startswith("manylinux"), verdict


def test_wheel_records_every_file_and_carries_executables(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        dist_info = f"halcyon_cache-{VERSION}.dist-info"
        record = archive.read(f"{dist_info}/RECORD").decode().splitlines()
        listed = {}
        for line in record:
            name, digest, size = line.rsplit(",", 2)
            listed[name] = (digest, size)
        assert set(listed) == set(names)
        for name in names:
            if name.endswith("/RECORD"):
                continue
            data = archive.read(name)
            expected = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert listed[name] == (expected, str(len(data))), name
        for tool in ("halcyond", "halcyon"):
            info = archive.getinfo(f"halcyon_cache-{VERSION}.data/scripts/{tool}")
            assert (info.external_attr >> 16) & 0o111, f"{tool} is not executable in the wheel"
        metadata = archive.read(f"{dist_info}/WHEEL").decode()
        assert "Root-Is-Purelib: false" in metadata
        assert f"Tag: py3-none-{wheel.name.removesuffix('.whl').split('-')[-1]}" in metadata
        assert "halcyon/__init__.py" in names


def test_wheel_in_a_fresh_venv_starts_the_daemon_and_the_clients_answer(wheel: Path, folder: Path) -> None:
    venv = folder / "venv"
    env = fresh_venv(venv)
    subprocess.run([str(venv / "bin/pip"), "install", "-q", "--no-index", str(wheel)], env=env, check=True,
                   timeout=300)
    for tool in ("halcyond", "halcyon"):
        assert shutil.which(tool, path=env["PATH"]) == str(venv / "bin" / tool)
    version = subprocess.run(["halcyond", "--version"], env=env, capture_output=True, text=True, timeout=30)
    assert version.stdout.strip() == VERSION, version.stderr

    socket = str(folder / "h.sock")
    daemon = subprocess.Popen(["halcyond", "--socket", socket, "--cache-dir", str(folder / "cache")],
                              env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # The venv's Python, run from an empty folder, imports the installed package.
        script = ("import sys, time, halcyon\n"
                  "assert halcyon.__file__.startswith(sys.prefix), halcyon.__file__\n"
                  "deadline = time.monotonic() + 30\n"
                  "while True:\n"
                  "    try:\n"
                  "        c = halcyon.Client(sys.argv[1], timeout=2, retry=False); c.ping(); break\n"
                  "    except halcyon.HalcyonError:\n"
                  "        assert time.monotonic() < deadline, 'halcyond did not answer'\n"
                  "        time.sleep(0.05)\n"
                  "c.set('greeting', b'hello from the wheel')\n"
                  "print(c.get('greeting').decode())\n")
        done = subprocess.run(["python", "-c", script, socket], env=env, cwd=folder, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "hello from the wheel"
        got = subprocess.run(["halcyon", "--socket", socket, "get", "greeting"], env=env, capture_output=True,
                             text=True, timeout=30)
        assert got.returncode == 0 and got.stdout == "hello from the wheel", got.stderr
    finally:
        status = stop(daemon)
        assert status == 0, daemon.stdout.read().decode() if daemon.stdout else ""

    # Uninstall takes the binaries away with the package.
    subprocess.run([str(venv / "bin/pip"), "uninstall", "-q", "-y", "halcyon-cache"], env=env, check=True,
                   timeout=120)
    assert not (venv / "bin/halcyond").exists()


def test_pure_client_still_installs_alone(folder: Path) -> None:
    venv = folder / "venv"
    env = fresh_venv(venv)
    started = time.monotonic()
    subprocess.run([str(venv / "bin/pip"), "install", "-q", str(REPO / "Clients/python")], env=env, check=True,
                   timeout=600, cwd=folder)
    print(f"pure client install: {time.monotonic() - started:.1f} s")
    assert not (venv / "bin/halcyond").exists() and not (venv / "bin/halcyon").exists()
    done = subprocess.run(["python", "-c", "import halcyon; print(halcyon.__version__)"], env=env, cwd=folder,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == VERSION, done.stderr
