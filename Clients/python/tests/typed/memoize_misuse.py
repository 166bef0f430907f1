"""Calls a type checker must refuse: ``mypy --strict`` reports an error on every line
marked ``# error`` (test_typing.py counts them)."""

from __future__ import annotations

import halcyon

client = halcyon.Client()


@client.memoize()
def lookup(user_id: int) -> str:
    return str(user_id)


def misuse() -> None:
    lookup("seven")  # error
    lookup.invalidate("seven")  # error
    lookup.cache_key(1, 2)  # error
    n: int = lookup(7)  # error
    print(n)
