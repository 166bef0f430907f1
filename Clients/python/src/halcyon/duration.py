"""The one duration grammar (Docs/DURATIONS.md), as the daemon and the ``halcyon``
command read it: ``90``, ``1.5``, ``500ms``, ``30s``, ``5min``, ``1h30m``, ``7d``, ``1w``.

A bare number is seconds; otherwise one or more ``<number><unit>`` groups, added up,
with units ``ms``, ``s``/``sec``, ``m``/``min``, ``h``, ``d``, ``w`` in any letter case.
Spaces and tabs around the whole are ignored; anything else (signs, exponents, spaces
inside, quotes, unknown units, a number after the last unit, 10^15 s or more) is
refused. ``0`` is a duration; where a lifetime is meant the caller refuses it.
"""

from __future__ import annotations

import re

__all__ = ["parse_duration"]

_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
# Longer units first, so "5min" is not read as "5m" followed by "in".
_GROUP = re.compile(r"(" + _NUMBER + r")(sec|min|ms|s|m|h|d|w)", re.IGNORECASE)
_BARE = re.compile(_NUMBER)
_WHOLE = re.compile(r"(?:" + _NUMBER + r"(?:sec|min|ms|s|m|h|d|w))+", re.IGNORECASE)
_SECONDS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0,
            "d": 86400.0, "w": 604800.0}
_LIMIT = 1e15


def parse_duration(text: str) -> float:
    """Seconds for a duration such as ``"1h30m"`` (5400.0).

    Raises:
        ValueError: ``text`` is not a duration of the grammar, naming what is accepted.
    """
    if not isinstance(text, str):
        raise TypeError(f"a duration is a str, not {type(text).__name__}")
    body = text.strip(" \t")
    if _BARE.fullmatch(body):
        seconds = float(body)
    elif _WHOLE.fullmatch(body):
        seconds = sum(float(n) * _SECONDS[u.lower()] for n, u in _GROUP.findall(body))
    else:
        raise ValueError(f"bad duration {text!r}: use seconds (90, 1.5) or groups such as "
                         "500ms, 30s, 5min, 1h30m, 7d, 1w")
    if seconds >= _LIMIT:
        raise ValueError(f"duration {text!r} is too long (10^15 seconds or more)")
    return seconds
