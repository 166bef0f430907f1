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
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from conftest import REPO, Daemon, _start_daemon, short_tmpdir

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


# OPERATIONS.md's "Logging" shows the lines a daemon logs at start, and its
# "Troubleshooting" table explains the messages an operator meets: both against a real
# halcyond's log.

LOG_LINE = re.compile(r"^\S+ (?P<level>\w+) halcyond: (?P<meta>.*?) ?\[(?P<label>[^\]]+)\] (?P<message>.*)$")


def _section(doc: str, title: str) -> str:
    return (REPO / doc).read_text().split(f"\n## {title}\n")[1].split("\n## ")[0]


def _parsed(line: str) -> Tuple[str, str, str, Dict[str, str]]:
    m = LOG_LINE.match(line.strip())
    assert m, f"not a log line: {line!r}"
    meta: Dict[str, str] = {}
    last = ""
    for word in m.group("meta").split():
        if "=" in word:
            last, value = word.split("=", 1)
            meta[last] = value
        else:                      # a value with a space in it (the allocator's)
            meta[last] += " " + word
    return m.group("level"), m.group("label"), m.group("message"), meta


def _daemon_log(folder: str, *args: str, until: Callable[[str], bool]) -> List[str]:
    """The lines a daemon started with ``args`` logs until one of them satisfies ``until``
    (that one included), or all it logs before it exits; the daemon is then stopped."""
    binary = os.environ.get("HALCYOND_BIN") or str(REPO / ".build" / "debug" / "halcyond")
    if not os.access(binary, os.X_OK):
        pytest.skip("halcyond is not built")
    log = Path(folder) / "start.log"

    def lines() -> List[str]:
        return [line for line in log.read_text(errors="replace").splitlines() if line.strip()]

    with open(log, "wb") as out:
        proc = subprocess.Popen([binary, *args], stdout=out, stderr=out, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not any(until(line) for line in lines()) and proc.poll() is None:
            assert time.monotonic() < deadline, f"nothing awaited within 30 s: {lines()}"
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    logged = lines()
    ends = [i for i, line in enumerate(logged) if until(line)]
    return logged[: ends[0] + 1] if ends else logged


def test_the_start_up_lines_in_logging_are_the_daemons(tmp_path: Path) -> None:
    section = _section("Docs/OPERATIONS.md", "Logging")
    shown = [line.strip() for line in section.split("```text\n", 1)[1].split("```", 1)[0].splitlines() if line.strip()]
    folder = short_tmpdir()
    try:
        logged = _daemon_log(folder, "--socket", f"{folder}/h.sock", "--cache-dir", f"{folder}/cache",
                             until=lambda line: line.endswith(" listening"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert len(logged) == len(shown), f"the daemon logs:\n" + "\n".join(logged)
    # What depends on the machine and the run: paths, cores, the allocator's and the daemon's versions.
    def normal(line: str, root: str) -> Tuple[str, str, str, Dict[str, str]]:
        level, label, message, meta = _parsed(line.replace(root, "/tmp/hc"))
        meta.pop("eventLoops", None)
        meta["allocator"] = meta.get("allocator", "").split(" ")[0]
        return level, label, re.sub(r"\d+\.\d+\.\d+\S*", "<version>", message), meta
    for doc_line, real in zip(shown, logged):
        assert normal(doc_line, "/tmp/hc") == normal(real, folder), f"\n  doc:    {doc_line}\n  daemon: {real}"


def _troubleshooting_messages() -> List[str]:
    rows = [line for line in _section("Docs/OPERATIONS.md", "Troubleshooting").splitlines() if line.startswith("| ")]
    cells = [re.match(r"^\| (.*?) \| ", row).group(1) for row in rows[1:]]  # type: ignore[union-attr]
    return [cell.strip("`") for cell in cells if cell.startswith("`") and cell.endswith("`")]


def _matches(row: str, message: str) -> bool:
    """Whether the row's text (``…`` standing for the variable parts) is the start of ``message``."""
    return re.match(".*".join(re.escape(part) for part in row.split("…")), message) is not None


def test_troubleshooting_explains_each_message_once() -> None:
    messages = _troubleshooting_messages()
    assert len(messages) >= 10
    twice = [(a, b) for a in messages for b in messages if a is not b and _matches(a, b)]
    assert twice == []


def test_an_unusable_cache_folder_is_in_troubleshooting() -> None:
    folder = short_tmpdir()
    try:
        Path(folder, "cache").write_text("a file where the cache folder belongs\n")
        logged = _daemon_log(folder, "--socket", f"{folder}/h.sock", "--cache-dir", f"{folder}/cache",
                             until=lambda line: " error " in line or " critical " in line)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    errors = [line for line in logged if " error " in line or " critical " in line]
    assert errors, "\n".join(logged)
    rows = _troubleshooting_messages()
    for line in errors:
        # A start that fails prints one line, "halcyond cannot start: <cause>"; the rows name the causes.
        message = (_parsed(line)[2] if LOG_LINE.match(line) else line).removeprefix("halcyond cannot start: ")
        assert any(_matches(row, message) for row in rows), f"no Troubleshooting row for: {message}"
