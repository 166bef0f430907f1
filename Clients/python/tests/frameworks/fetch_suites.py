"""Fetches the test suites the frameworks do not ship in their wheels: the source
distribution of the installed version of Django, cachelib and requests-cache, from PyPI
through pip, unpacked as ``<folder>/<name>-<version>/``. A framework that is not
installed, or whose suite is already there, is left alone. Run by scripts/bootstrap.

Usage: python fetch_suites.py <folder>
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

#: Distribution name -> the file its suite needs (relative to the unpacked sdist).
SUITES = {
    "django": "tests/cache/tests.py",
    "cachelib": "tests/common.py",
    "requests-cache": "tests/integration/base_cache_test.py",
}


def fetch(folder: Path, name: str, marker: str) -> str:
    try:
        wanted = version(name)
    except PackageNotFoundError:
        return f"{name}: not installed, skipped"
    target = folder / f"{name}-{wanted}"
    if (target / marker).exists():
        return f"{name} {wanted}: already there"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        f"{name}=={wanted}", "-d", tmp], check=True)
        archives = list(Path(tmp).glob("*.tar.gz"))
        if len(archives) != 1:
            raise SystemExit(f"{name}: expected one sdist, got {archives}")
        with tarfile.open(archives[0]) as tar:
            try:
                tar.extractall(tmp, filter="data")
            except TypeError:  # a Python without extraction filters
                tar.extractall(tmp)
        roots = [p for p in Path(tmp).iterdir() if p.is_dir()]
        if len(roots) != 1 or not (roots[0] / marker).exists():
            raise SystemExit(f"{name}: the sdist has no {marker}")
        shutil.rmtree(target, ignore_errors=True)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.move(str(roots[0]), str(target))
    return f"{name} {wanted}: fetched"


def main(folder: str) -> int:
    for name, marker in SUITES.items():
        print("framework suites:", fetch(Path(folder), name, marker))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
