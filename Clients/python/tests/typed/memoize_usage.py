"""User code as a type checker sees it: ``mypy --strict`` must accept this file
(test_typing.py runs it). Never imported by the tests; the wrong calls at the end must
stay errors, which test_typing.py checks too."""

from __future__ import annotations

from typing import Dict, Optional

import halcyon
from halcyon.aio import AsyncClient

client = halcyon.Client()
aclient = AsyncClient()


@client.memoize(expire="10m")
def lookup(user_id: int, *, verbose: bool = False) -> Dict[str, int]:
    return {"id": user_id}


@aclient.memoize(expire=60)
async def fetch(url: str) -> bytes:
    return url.encode()


def use() -> None:
    row: Dict[str, int] = lookup(7, verbose=True)
    key: str = lookup.cache_key(7)
    forgot: bool = lookup.invalidate(7)
    raw: Dict[str, int] = lookup.__wrapped__(7)
    entry: Optional[halcyon.Entry] = client.get_entry(key)
    if entry is not None and entry.version is not None:
        stored: bool = client.cas(key, row, entry.version)
    count: int = client.incr("visits")
    many: Dict[str, object] = client.get_many(["a", "b"])
    versions: Dict[str, Optional[int]] = client.set_many({"a": 1})
    lease: halcyon.Lease = client.lease("k", "30s", wait=5)
    left: Optional[float] = client.ttl("k")
    names = [k for k in client.keys("user:")]
    print(row, forgot, raw, stored, count, many, versions, lease, left, names)


async def ause() -> None:
    body: bytes = await fetch("https://example.invalid/")
    key: str = fetch.cache_key("x")
    forgot: bool = await fetch.invalidate("x")
    names = [k async for k in aclient.keys("user:")]
    print(body, key, forgot, names)
