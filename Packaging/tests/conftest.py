"""Fixtures for the package tests: the artifacts scripts/package built, a minimal Debian
root made by debootstrap (Debian's own packages, no Swift, no -dev package), and helpers
that run commands inside it.

scripts/test-packages builds the artifacts and names them: ``HALCYON_DEB``,
``HALCYON_WHEEL`` and ``HALCYON_RELEASE_BIN`` (the folder of the self-contained
binaries). ``HALCYON_DEBIAN_MIRROR`` overrides the mirror debootstrap uses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
VERSION = (REPO / "VERSION").read_text().strip()
SUITE = "bookworm"
# What the binaries may still link dynamically: glibc's libraries, libstdc++ and libgcc_s
# (on every Debian system: apt itself needs them), the vDSO and the loader.
ALLOWED_LIBRARIES = ("linux-vdso.so", "libc.so", "libm.so", "libstdc++.so", "libgcc_s.so", "ld-linux")


def artifact(env: str) -> Path:
    value = os.environ.get(env)
    if not value:
        pytest.fail(f"{env} is not set: run scripts/test-packages, which builds the packages first")
    path = Path(value)
    assert path.exists(), f"{env}={value} does not exist"
    return path


@pytest.fixture(scope="session")
def deb() -> Path:
    return artifact("HALCYON_DEB")


@pytest.fixture(scope="session")
def wheel() -> Path:
    return artifact("HALCYON_WHEEL")


@pytest.fixture(scope="session")
def release_bin() -> Path:
    return artifact("HALCYON_RELEASE_BIN")


def short_tmpdir(prefix: str) -> Path:
    # Unix socket paths must stay under 108 bytes, so no deep pytest tmp_path.
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


@pytest.fixture(scope="session")
def pristine_root() -> Iterator[Path]:
    """One debootstrap per run (minbase plus adduser, the package's one dependency beyond
    libc and libstdc++, and man-db, to read the package's manual pages); each test gets a
    copy of it."""
    if os.geteuid() != 0:
        pytest.fail("the Debian root tests need root (debootstrap, chroot, dpkg -i)")
    folder = short_tmpdir("hc-debroot-")
    root = folder / "root"
    mirror = os.environ.get("HALCYON_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    started = time.monotonic()
    done = subprocess.run(["debootstrap", "--variant=minbase", "--include=adduser,man-db", SUITE, str(root), mirror],
                          capture_output=True, timeout=1200)
    assert done.returncode == 0, done.stdout.decode()[-3000:] + done.stderr.decode()[-3000:]
    print(f"debootstrap {SUITE} minbase: {time.monotonic() - started:.0f} s")
    yield root
    shutil.rmtree(folder, ignore_errors=True)


class DebianRoot:
    """A copy of the pristine root, with /proc mounted while the test runs."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def run(self, *command: str, user: Optional[str] = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.argv(*command, user=user), capture_output=True, text=True, timeout=timeout)
        if check:
            assert done.returncode == 0, f"{command}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    def argv(self, *command: str, user: Optional[str] = None) -> List[str]:
        """chroot, an empty environment (env -i) and, given a user, that user's ids and groups."""
        as_user = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"] if user else []
        return ["chroot", str(self.path), *as_user, "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME=/tmp", *command]

    def wait_for_ping(self, socket: str, user: Optional[str], daemon: "subprocess.Popen[bytes]",
                      cli: str = "halcyon", seconds: float = 30) -> None:
        """Polls with `halcyon ping` until the daemon in this root answers (it cannot be
        awaited from outside the root), failing if it exits or takes over `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            assert daemon.poll() is None, f"halcyond exited with {daemon.returncode}"
            done = self.run(cli, "--socket", socket, "--timeout", "2", "ping", user=user, check=False)
            if done.returncode == 0 and done.stdout.strip() == "PONG":
                return
            assert time.monotonic() < deadline, f"halcyond did not answer on {socket}: {done.stderr}"
            time.sleep(0.1)


@pytest.fixture
def debian_root(pristine_root: Path) -> Iterator[DebianRoot]:
    folder = short_tmpdir("hc-root-")
    root = folder / "root"
    subprocess.run(["cp", "-a", str(pristine_root), str(root)], check=True, timeout=300)
    subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True, timeout=30)
    try:
        yield DebianRoot(root)
    finally:
        subprocess.run(["umount", "-l", str(root / "proc")], check=False, timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


def stop(daemon: "subprocess.Popen[bytes]") -> int:
    """SIGTERM, then the exit status (halcyond drains and exits 0)."""
    daemon.terminate()
    try:
        return daemon.wait(timeout=30)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait(timeout=10)
        raise AssertionError("halcyond did not exit within 30 s of SIGTERM")


def ldd_libraries(binary: Path) -> List[str]:
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=30)
    if "not a dynamic executable" in done.stdout + done.stderr:
        return []
    assert done.returncode == 0, done.stderr
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]

