"""Every shell and CLI example of the docs, run against a real halcyond, as
Tests/HalcyonServerTests/ProtocolDocTests.swift runs Docs/PROTOCOL.md's wire examples.

What counts as an example, in README.md, Docs/CLI.md, Docs/CLIENTS.md, Docs/DURATIONS.md
and Docs/OPERATIONS.md:

- every indented code block (the README's and the guides' command lines), and every fenced
  block tagged ``sh``, ``bash`` or ``console``: each runs under ``bash -e -o pipefail``
  in a scratch folder (``Clients`` linked in, a ``src`` folder to pack), with the built
  ``halcyon`` first on PATH and ``HALCYON_SOCKET`` naming a fresh daemon, so every
  command not inside a condition must succeed;
- a block that cannot run in a test (it installs, uses systemd or root, starts a daemon
  in the foreground, or is a synopsis with placeholders) says so in the doc source with
  ``<!-- example: not run: <why> -->`` on the line before it; the walk lists those.

Every fenced block of those files carries a tag (``text`` for output, ``python`` for the
Python client, which its own suite covers), so none is skipped silently. The scripts in
Clients/shell/examples run with offline arguments given here; a new script fails the
walk until it has them.

Two commands the docs use as stand-ins for the reader's own (``make-report``,
``run-backup``) are provided here as small scripts, and ``import halcyon`` finds the
package in the source tree (where the docs have just installed it into a virtual
environment).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from conftest import REPO, Daemon, _start_daemon

DOCS = ["README.md", "Docs/CLI.md", "Docs/CLIENTS.md", "Docs/DURATIONS.md", "Docs/OPERATIONS.md"]
SHELL_TAGS = {"sh", "bash", "console"}
KNOWN_TAGS = SHELL_TAGS | {"text", "python"}
MARKER = re.compile(r"<!--\s*example:\s*not run:\s*(?P<why>[^>]*\S)\s*-->")
STAND_INS = {
    "make-report": "#!/bin/sh\necho \"report of $(date -u +%F)\"\n",
    "run-backup": "#!/bin/sh\necho backed up\n",
}


@dataclass
class Block:
    doc: str
    line: int
    tag: str          # "indented" for an indented block
    text: str
    not_run: Optional[str]

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(doc: str) -> Iterator[Block]:
    """The code blocks of a Markdown file, with the marker before each, if any."""
    lines = (REPO / doc).read_text().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(\s*)```(\S*)\s*$", line)
        marker = _marker_before(lines, i)
        if fence:
            start, tag, body = i + 1, fence.group(2), []
            i += 1
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i][len(fence.group(1)):])
                i += 1
            yield Block(doc, start, tag, "\n".join(body), marker)
        elif line.startswith("    ") and (i == 0 or not lines[i - 1].strip()) and not _in_list(lines, i):
            start, body = i + 1, []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                body.append(lines[i][4:])
                i += 1
            yield Block(doc, start, "indented", "\n".join(body).rstrip("\n"), marker)
            continue
        i += 1


def _marker_before(lines: List[str], i: int) -> Optional[str]:
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    m = MARKER.search(lines[j]) if j >= 0 else None
    return m.group("why") if m else None


def _in_list(lines: List[str], i: int) -> bool:
    # An indented paragraph continuing a list item is not a code block.
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    while j >= 0 and lines[j].strip():
        if re.match(r"^\s*([-*]|\d+\.)\s", lines[j]):
            return not lines[i].startswith("        ")
        if not lines[j].startswith(" "):
            return False
        j -= 1
    return False


ALL = [b for doc in DOCS for b in blocks(doc)]
EXAMPLES = [b for b in ALL if b.tag == "indented" or b.tag in SHELL_TAGS]


def test_the_walk_finds_the_examples() -> None:
    # A change of the docs' layout must not leave the walk with nothing to run.
    assert len([b for b in EXAMPLES if b.not_run is None]) >= 7
    assert {b.doc for b in EXAMPLES} >= {"README.md", "Docs/CLI.md", "Docs/CLIENTS.md", "Docs/OPERATIONS.md"}


@pytest.mark.parametrize("block", [b for b in ALL if b.tag != "indented"], ids=lambda b: b.name)
def test_every_fenced_block_says_what_it_is(block: Block) -> None:
    assert block.tag in KNOWN_TAGS, f"tag the block ({sorted(KNOWN_TAGS)}), so it is run or known not to be"


@pytest.fixture
def scratch(tmp_path: Path, cli_bin: str) -> Tuple[Path, Dict[str, str]]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "Clients").symlink_to(REPO / "Clients")
    (work / "src").mkdir()
    (work / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in STAND_INS.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
    cli_dir = str(Path(cli_bin).resolve().parent)
    env = dict(os.environ, PATH=f"{cli_dir}:{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
               HOME=str(tmp_path), HALCYON_BIN=cli_bin, PYTHONPATH=str(REPO / "Clients" / "python" / "src"))
    return work, env


@pytest.fixture(scope="module")
def walk_daemon() -> Iterator[Daemon]:
    daemon = _start_daemon()
    yield daemon
    daemon.stop()
    shutil.rmtree(daemon.folder, ignore_errors=True)


def _run(script: str, cwd: Path, env: Dict[str, str]) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, timeout=120)


@pytest.mark.parametrize("block", EXAMPLES, ids=lambda b: b.name)
def test_example(block: Block, walk_daemon: Daemon, scratch: Tuple[Path, Dict[str, str]]) -> None:
    if block.not_run is not None:
        pytest.skip(f"marked in the doc: not run: {block.not_run}")
    work, env = scratch
    env = dict(env, HALCYON_SOCKET=walk_daemon.socket)
    subprocess.run([env["HALCYON_BIN"], "clear"], env=env, capture_output=True, timeout=30, check=True)
    script = block.text
    if block.tag == "console":
        script = "\n".join(line[2:] for line in script.split("\n") if line.startswith("$ "))
    r = _run(script, work, env)
    assert r.returncode == 0, (
        f"{block.name} exited {r.returncode}\n--- script\n{script}\n--- stdout\n"
        f"{r.stdout.decode(errors='replace')}\n--- stderr\n{r.stderr.decode(errors='replace')}")


# The scripts of Clients/shell/examples, each run twice with offline arguments: the
# second run must answer from the cache (same output) or, for once-per.sh, not run again.
SHELL_EXAMPLES = {
    "cached-curl.sh": ["file:///etc/os-release", "10m"],
    "cached-build.sh": ["src"],
    "once-per.sh": ["1h", "doc-walk", "--", "echo", "ran"],
}


def test_every_shell_example_has_offline_arguments() -> None:
    found = {p.name for p in (REPO / "Clients" / "shell" / "examples").iterdir() if p.suffix == ".sh"}
    assert found == set(SHELL_EXAMPLES)


@pytest.mark.parametrize("name", sorted(SHELL_EXAMPLES))
def test_shell_example(name: str, walk_daemon: Daemon, scratch: Tuple[Path, Dict[str, str]]) -> None:
    work, env = scratch
    env = dict(env, HALCYON_SOCKET=walk_daemon.socket)
    command = [str(REPO / "Clients" / "shell" / "examples" / name), *SHELL_EXAMPLES[name]]
    first = subprocess.run(command, cwd=work, env=env, capture_output=True, timeout=120)
    second = subprocess.run(command, cwd=work, env=env, capture_output=True, timeout=120)
    assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
    if name == "once-per.sh":
        assert first.stdout == b"ran\n" and second.stdout == b""
    else:
        assert first.stdout and second.stdout == first.stdout
