"""The one duration grammar (Docs/DURATIONS.md): the Python parser runs the same
table of accepted and refused examples as the daemon and the ``halcyon`` command, and
the table here must stay the one in the document."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

import pytest

import halcyon
from halcyon._wire import to_expiration
from conftest import REPO

# (input, seconds or None for refused): a copy of the table in Docs/DURATIONS.md.
TABLE: List[Tuple[str, Optional[float]]] = [
    ('90', 90.0),
    ('1.5', 1.5),
    ('0', 0.0),
    ('0s', 0.0),
    ('500ms', 0.5),
    ('250ms', 0.25),
    ('30s', 30.0),
    ('30sec', 30.0),
    ('10m', 600.0),
    ('5min', 300.0),
    ('1.5m', 90.0),
    ('2h', 7200.0),
    ('2H', 7200.0),
    ('1h30m', 5400.0),
    ('30m1h', 5400.0),
    ('1h0m30s', 3630.0),
    ('2m30.5s', 150.5),
    ('7d', 604800.0),
    ('1w', 604800.0),
    (' 10m ', 600.0),
    ('', None),
    ('s', None),
    ('h1', None),
    ('10x', None),
    ('5mins', None),
    ('1y', None),
    ('-5', None),
    ('-5s', None),
    ('+5s', None),
    ('1e3', None),
    ('1e3s', None),
    ('.5s', None),
    ('5.s', None),
    ('1h 30m', None),
    ('"1h"', None),
    ("'1h'", None),
    ('5s3', None),
    ('inf', None),
    ('nan', None),
    ('never', None),
    ('1000000000000000', None),
]


@pytest.mark.parametrize("text, seconds", TABLE)
def test_parse_duration_runs_the_table(text: str, seconds: Optional[float]) -> None:
    if seconds is None:
        with pytest.raises(ValueError):
            halcyon.parse_duration(text)
    else:
        assert halcyon.parse_duration(text) == pytest.approx(seconds)


def test_table_is_the_documents() -> None:
    doc = REPO / "Docs" / "DURATIONS.md"
    if not doc.exists():
        pytest.skip("Docs/DURATIONS.md is not in this tree yet (it comes with the daemon's grammar)")
    rows = re.findall(r"^\| `(.*?)` \| (\S+) \|$", doc.read_text(), re.M)
    assert [(text, None if out == "refused" else float(out)) for text, out in rows] == TABLE


def test_expire_strings_use_the_grammar_and_refuse_zero() -> None:
    assert to_expiration("1h30m") == {"seconds": 5400.0}
    assert to_expiration("5min") == {"seconds": 300.0}
    assert to_expiration("NEVER") == "never"
    assert to_expiration("expired") == "expired"
    for bad in ("0", "0s", "1h 30m", "\"1h\"", "-5s", "soon"):
        with pytest.raises(ValueError):
            to_expiration(bad)
