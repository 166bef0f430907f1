"""``mypy --strict`` on user code of the memoize decorator and the new methods: the
decorated function's ``invalidate``/``cache_key`` take its own parameters, and wrong
calls are errors. Skipped when mypy is not installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import HERE

TYPED = HERE / "typed"


def _mypy(path: str) -> "subprocess.CompletedProcess[str]":
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.skip("mypy is not installed (pip install mypy)")
    env_path = str(HERE.parent / "src")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", "/dev/null", path],
        capture_output=True, text=True, timeout=300, cwd=str(HERE),
        env={"MYPYPATH": env_path, "PATH": "/usr/bin:/bin"},
    )


def test_memoize_and_methods_type_check_under_strict() -> None:
    r = _mypy(str(TYPED / "memoize_usage.py"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_wrong_calls_are_type_errors() -> None:
    source = (TYPED / "memoize_misuse.py").read_text().splitlines()
    expected = {i + 1 for i, line in enumerate(source) if line.rstrip().endswith("# error")}
    r = _mypy(str(TYPED / "memoize_misuse.py"))
    reported = {int(line.split(":")[1]) for line in r.stdout.splitlines() if ": error:" in line}
    assert reported == expected, r.stdout
