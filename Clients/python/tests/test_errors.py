"""The exception classes against the error tables of the docs: every reason of
Docs/PROTOCOL.md's table (section 3) maps to a class of its code's family, and every
class Docs/CLIENTS.md lists under a family derives from that family."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Tuple

import pytest

from halcyon import errors

DOCS = Path(__file__).resolve().parents[3] / "Docs"


def _table_rows(text: str, heading: str) -> List[List[str]]:
    """The cells of the first Markdown table after ``heading``."""
    start = text.index(heading)
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # header and rule


def _protocol_reasons() -> List[Tuple[str, int]]:
    out = []
    for code, _, reasons in _table_rows((DOCS / "PROTOCOL.md").read_text(), "## 3. Errors"):
        words = re.sub(r"\([^)]*\)", "", reasons.split(" — ")[0])
        for reason in re.findall(r"`([a-z][A-Za-z]*)`", words):
            out.append((reason, int(code)))
    return out


REASONS = _protocol_reasons()


def test_the_table_was_read() -> None:
    # A change of the table's layout must not make the next test vacuous.
    assert len(REASONS) > 50
    assert ("cannotRemoveCacheFile", -32002) in REASONS and ("invalidKey", -32602) in REASONS


@pytest.mark.parametrize("reason, code", REASONS, ids=[r for r, _ in REASONS])
def test_every_reason_belongs_to_its_code_family(reason: str, code: int) -> None:
    family = errors._CODE_FAMILIES[code]
    cls = errors.for_reason(reason, code)
    assert issubclass(cls, family), f"{cls.__name__} does not derive from {family.__name__}"
    error = errors.from_reply({"code": code, "message": "m", "data": {"reason": reason}})
    assert isinstance(error, family) and error.reason == reason and error.code == code


def _clients_families() -> List[Tuple[str, str, int]]:
    out = []
    text = (DOCS / "CLIENTS.md").read_text()
    for family, code, classes in _table_rows(text, "### Errors"):
        if not re.fullmatch(r"-\d+", code):
            continue
        family_name = re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", family))[-1]
        for name in re.findall(r"`(\w+Error)`", classes):
            out.append((name, family_name, int(code)))
    return out


FAMILIES = _clients_families()


@pytest.mark.parametrize("name, family, code", FAMILIES, ids=[n for n, _, _ in FAMILIES])
def test_every_listed_class_derives_from_its_family(name: str, family: str, code: int) -> None:
    cls = getattr(errors, name)
    assert issubclass(cls, getattr(errors, family))
    assert errors._CODE_FAMILIES[code] is getattr(errors, family)


def test_catching_cannot_write_catches_a_failed_removal() -> None:
    error = errors.from_reply({"code": -32002, "message": "Cannot remove x: EACCES",
                               "data": {"reason": "cannotRemoveCacheFile", "errno": 13}})
    with pytest.raises(errors.CannotWriteError):
        raise error
