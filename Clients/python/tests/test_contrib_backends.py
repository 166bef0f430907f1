"""The halcyon.contrib backends' own tests against a real halcyond: what the
frameworks' suites do not pin down (Halcyon's side of each semantic: lifetimes, no
sliding reads, prefixes, native asyncio in Django, the requests-cache TTL rule)."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Iterator

import pytest

import halcyon
from conftest import Daemon, _daemon_until_done


@pytest.fixture(scope="module")
def backend_daemon() -> Iterator[Daemon]:
    yield from _daemon_until_done()


@pytest.fixture
def raw(backend_daemon: Daemon) -> Iterator[halcyon.Client]:
    with halcyon.Client(backend_daemon.socket, timeout=10, extend=False) as c:
        yield c


def _lifetime(raw: halcyon.Client, key: str) -> object:
    d = raw.describe(key)
    return "missing" if d is None else d.expires_at


# ------------------------------------------------------------------ Django

@pytest.fixture(scope="module")
def django_caches(backend_daemon: Daemon):  # type: ignore[no-untyped-def]
    pytest.importorskip("django")
    from django.conf import settings

    if not settings.configured:
        settings.configure(CACHES={
            "default": {"BACKEND": "halcyon.contrib.django.HalcyonCache", "LOCATION": backend_daemon.socket},
            "prefixed": {"BACKEND": "halcyon.contrib.django.HalcyonCache", "LOCATION": backend_daemon.socket,
                         "KEY_PREFIX": "site2", "TIMEOUT": None},
        })
        import django

        django.setup()
    from django.core.cache import caches

    if "halcyon" not in type(caches["default"]).__module__:
        pytest.skip("Django was configured by another test module in this process")
    return caches


def test_django_timeouts_and_no_sliding(django_caches, raw: halcyon.Client) -> None:  # type: ignore[no-untyped-def]
    cache = django_caches["default"]
    k = uuid.uuid4().hex
    cache.set(k, {"a": 1}, 100)
    full = cache.make_key(k)
    first = _lifetime(raw, full)
    assert isinstance(first, float) and time.time() + 95 < first <= time.time() + 101
    time.sleep(1.1)
    assert cache.get(k) == {"a": 1}
    assert _lifetime(raw, full) == first  # a read never moves a Django timeout
    cache.set(k, 1, None)
    assert _lifetime(raw, full) is None
    cache.set(k, 1, 0)
    assert cache.get(k, "gone") == "gone"
    assert cache.add(k, 1, -5) is True and cache.get(k) is None
    cache.set(k, 41)
    assert raw.get(full) == b"41"  # an int is its digits, so incr adds in place
    assert cache.incr(k) == 42 and cache.get(k) == 42
    with pytest.raises(ValueError):
        cache.incr(uuid.uuid4().hex)
    assert cache.touch(k, 0) is True and not cache.has_key(k)


def test_django_prefix_clear_leaves_other_keys(django_caches, raw: halcyon.Client) -> None:  # type: ignore[no-untyped-def]
    prefixed, default = django_caches["prefixed"], django_caches["default"]
    k = uuid.uuid4().hex
    prefixed.set(k, "p")
    raw.set(f"other:{k}", "stays")
    assert _lifetime(raw, prefixed.make_key(k)) is None  # TIMEOUT None: never
    prefixed.clear()
    assert prefixed.get(k) is None
    assert raw.get(f"other:{k}") == "stays"
    assert default.get_many([]) == {}


def test_django_async_methods_are_native(django_caches) -> None:  # type: ignore[no-untyped-def]
    from django.core.cache.backends.base import BaseCache

    from halcyon.contrib.django import HalcyonCache

    for name in ("aadd", "aget", "aset", "atouch", "adelete", "aget_many", "ahas_key", "aincr",
                 "aset_many", "adelete_many", "aclear", "aclose"):
        assert getattr(HalcyonCache, name) is not getattr(BaseCache, name), name
    cache = django_caches["default"]
    k = uuid.uuid4().hex

    async def main() -> None:
        import threading

        main_thread = threading.get_ident()
        await cache.aset(k, 5, 60)
        assert await cache.aget(k) == 5
        assert await cache.aincr(k, 2) == 7
        assert await cache.adecr(k) == 6
        assert await cache.aadd(k, 0) is False
        await cache.aset_many({f"{k}:1": "a", f"{k}:2": [1]})
        assert await cache.aget_many([f"{k}:1", f"{k}:2", f"{k}:3"]) == {f"{k}:1": "a", f"{k}:2": [1]}
        await cache.adelete_many([f"{k}:1", f"{k}:2"])
        assert not await cache.ahas_key(f"{k}:1")
        assert await cache.atouch(k, None) is True
        assert await cache.adelete(k) is True
        assert await cache.aget_or_set(k, "made") == "made"
        with pytest.raises(ValueError):
            await cache.aincr(uuid.uuid4().hex)
        assert threading.get_ident() == main_thread

    asyncio.run(main())

    async def again() -> None:
        await cache.aset(k, "second loop")
        assert await cache.aget(k) == "second loop"

    asyncio.run(again())  # a second event loop gets an asyncio client of its own


def test_django_unknown_option_is_refused(backend_daemon: Daemon) -> None:
    pytest.importorskip("django")
    from django.core.exceptions import ImproperlyConfigured

    from halcyon.contrib.django import HalcyonCache

    with pytest.raises(ImproperlyConfigured):
        HalcyonCache(backend_daemon.socket, {"OPTIONS": {"pool_size": 3}})


# ----------------------------------------------------------------- cachelib

def test_cachelib_semantics(backend_daemon: Daemon, raw: halcyon.Client) -> None:
    pytest.importorskip("cachelib")
    from halcyon.contrib.cachelib import HalcyonCache

    prefix = f"cl-{uuid.uuid4().hex}:"
    cache = HalcyonCache(backend_daemon.socket, default_timeout=100, key_prefix=prefix)
    assert cache.set("forever", "v", timeout=0)
    assert _lifetime(raw, prefix + "forever") is None
    assert cache.set("default", "v")
    lifetime = _lifetime(raw, prefix + "default")
    assert isinstance(lifetime, float) and lifetime <= time.time() + 101
    assert cache.set("td", "v", timeout=timedelta(seconds=30))
    assert cache.set("negative", "v", timeout=-1) is False and cache.get("negative") is None
    assert cache.set("n", 10) and cache.inc("n", 5) == 15 and cache.get("n") == 15
    assert raw.get(prefix + "n") == b"15"
    raw.set("outside", "stays")
    assert cache.clear()
    assert cache.get("forever") is None and raw.get("outside") == "stays"


def test_cachelib_key_prefix_may_be_callable_and_keys_are_named_as_redis_cache_names_them(
        backend_daemon: Daemon, raw: halcyon.Client) -> None:
    pytest.importorskip("cachelib")
    from halcyon.contrib.cachelib import HalcyonCache

    tenant = [f"t1-{uuid.uuid4().hex}:"]
    cache = HalcyonCache(backend_daemon.socket, key_prefix=lambda: tenant[0])
    assert cache.set("k", "one") and raw.exists(tenant[0] + "k")
    first = tenant[0]
    tenant[0] = f"t2-{uuid.uuid4().hex}:"          # asked at every call
    assert cache.get("k") is None and cache.set("k", "two")
    assert cache.get_many("k") == ["two"] and cache.has("k")
    # A key that is not a string is named by its text, f"{prefix}{key}", as RedisCache does.
    assert cache.set(42, "number") and raw.exists(f"{tenant[0]}42") and cache.get(42) == "number"
    assert cache.inc(7) == 1 and cache.delete(7) is True
    assert cache.clear()
    assert not raw.exists(tenant[0] + "k") and raw.exists(first + "k")


# ----------------------------------------------------------- requests-cache

def test_requests_cache_ttl_and_collections(backend_daemon: Daemon, raw: halcyon.Client) -> None:
    pytest.importorskip("requests_cache")
    from requests_cache.models import CachedResponse

    from halcyon.contrib.requests_cache import HalcyonCache, HalcyonDict

    ns = f"rc-{uuid.uuid4().hex}"
    cache = HalcyonCache(namespace=ns, socket_path=backend_daemon.socket)
    response = CachedResponse(expires=None)
    cache.responses["forever"] = response
    assert _lifetime(raw, f"{ns}:responses:forever") is None
    from datetime import datetime, timezone

    expiring = CachedResponse(expires=datetime.now(timezone.utc) + timedelta(seconds=60))
    cache.responses["soon"] = expiring
    lifetime = _lifetime(raw, f"{ns}:responses:soon")
    assert isinstance(lifetime, float) and time.time() + 3600 + 50 < lifetime <= time.time() + 3600 + 61
    cache.redirects["alias"] = "soon"
    assert raw.get(f"{ns}:redirects:alias") == "soon"
    assert sorted(cache.responses.keys()) == ["forever", "soon"]
    other = HalcyonDict(ns, "other", socket_path=backend_daemon.socket)
    other["x"] = 1
    cache.responses.clear()
    assert len(cache.responses) == 0 and list(other) == ["x"] and len(cache.redirects) == 1
    other.bulk_delete(["x", "absent"])
    assert len(other) == 0
