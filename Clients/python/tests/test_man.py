"""The manual pages halcyon(1) and halcyond(8) in Packaging/man are current: regenerated
from the built binaries with swift-argument-parser's generate-manual (scripts/man
--check), they are what is committed; and man renders them without a warning, with the
hand-written sections in place."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import REPO, _binary

MAN = shutil.which("man")


def test_the_committed_pages_are_what_the_binaries_generate(halcyon_bin: str) -> None:
    daemon = _binary("HALCYOND_BIN", "halcyond")
    tool = _binary("GENERATE_MANUAL_BIN", "generate-manual")
    if daemon is None or tool is None:
        pytest.skip("halcyond or generate-manual is not built (swift build --product generate-manual)")
    # scripts/man reads both binaries from one folder, under their own names.
    folder = Path(tempfile.mkdtemp(prefix="hc-man-"))
    try:
        (folder / "halcyon").symlink_to(os.path.abspath(halcyon_bin))
        (folder / "halcyond").symlink_to(os.path.abspath(daemon))
        done = subprocess.run([str(REPO / "scripts" / "man"), "--check", "--binaries", str(folder),
                               "--generate-manual", tool], capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr


@pytest.mark.skipif(MAN is None, reason="man is not installed")
@pytest.mark.parametrize("page, wanted", [
    ("halcyon.1", ["NAME", "halcyon top", "--interval", "ENVIRONMENT", "HALCYON_SOCKET", "FILES",
                   "/run/halcyon/halcyon.sock", "EXIT STATUS", "SEE ALSO", "halcyond(8)"]),
    ("halcyond.8", ["NAME", "--metrics-listen", "FILES", "/var/cache/halcyon", "grafana-dashboard.json",
                    "EXIT STATUS", "halcyon(1)"]),
])
def test_man_renders_the_pages_cleanly(page: str, wanted: list) -> None:  # type: ignore[type-arg]
    done = subprocess.run([str(MAN), "-l", "-P", "cat", str(REPO / "Packaging" / "man" / page)],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "MANWIDTH": "80", "LC_ALL": "C"})
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    for text in wanted:
        assert text in done.stdout, f"{text!r} is not in {page}"
    # The generated EXIT STATUS ("exits 0 on success, and >0 if an error occurs") is
    # replaced by the hand-written one.
    assert "if an error occurs" not in done.stdout
