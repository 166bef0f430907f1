"""One of several processes that all want the same expensive value at the same moment,
through one framework backend. Each process waits for a common start instant, then:

- django, cachelib: add-as-lock (``add`` of a lock key decides who computes; the others
  poll the value, as those frameworks' users do);
- dogpile: ``region.get_or_create`` with ``distributed_lock`` (the daemon's lease);
- requests-cache: add-as-lock on the backend's client around ``session.get``.

The process that computes drops a marker file; every process prints the value it got.

Usage: python stampede_worker.py <framework> <socket> <key> <markers folder> <start unix time> [url]
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from typing import Any, Callable

#: How long the computation takes: long enough for every process to arrive meanwhile.
WORK_SECONDS = 0.5
#: Bound on waiting for the value (the test fails rather than hangs).
WAIT_LIMIT = 30.0


def compute(markers: str) -> str:
    with open(os.path.join(markers, f"computed-{os.getpid()}-{uuid.uuid4().hex}"), "w"):
        pass
    time.sleep(WORK_SECONDS)
    return "the value"


def add_as_lock(add: Callable[[], bool], get: Callable[[], Any], set_: Callable[[Any], None],
                release: Callable[[], None], produce: Callable[[], Any]) -> Any:
    value = get()
    if value is not None:
        return value
    if add():
        try:
            value = produce()
            set_(value)
            return value
        finally:
            release()
    deadline = time.monotonic() + WAIT_LIMIT
    while time.monotonic() < deadline:
        value = get()
        if value is not None:
            return value
        time.sleep(0.02)
    raise SystemExit("the value never came")


def main(framework: str, socket: str, key: str, markers: str, start: float, url: str = "") -> None:
    lock = f"{key}:lock"
    if framework == "django":
        import django
        from django.conf import settings

        settings.configure(CACHES={"default": {"BACKEND": "halcyon.contrib.django.HalcyonCache", "LOCATION": socket}})
        django.setup()
        from django.core.cache import cache

        time.sleep(max(0.0, start - time.time()))
        value = add_as_lock(lambda: cache.add(lock, 1, 30), lambda: cache.get(key),
                            lambda v: cache.set(key, v, 60), lambda: cache.delete(lock), lambda: compute(markers))
    elif framework == "cachelib":
        from halcyon.contrib.cachelib import HalcyonCache

        c = HalcyonCache(socket)
        time.sleep(max(0.0, start - time.time()))
        value = add_as_lock(lambda: c.add(lock, 1, 30), lambda: c.get(key),
                            lambda v: c.set(key, v, 60), lambda: c.delete(lock), lambda: compute(markers))
    elif framework == "dogpile":
        from dogpile.cache import make_region, register_backend

        register_backend("halcyon", "halcyon.contrib.dogpile", "HalcyonBackend")
        region = make_region().configure("halcyon", expiration_time=60, arguments={
            "socket_path": socket, "distributed_lock": True, "lock_timeout": 30})
        time.sleep(max(0.0, start - time.time()))
        value = region.get_or_create(key, lambda: compute(markers))
    elif framework == "requests-cache":
        import requests_cache

        from halcyon.contrib.requests_cache import HalcyonCache

        session = requests_cache.CachedSession(backend=HalcyonCache(namespace=key, socket_path=socket))
        client = session.cache.responses.connection

        def fetch() -> str:
            response = session.get(url)
            if not response.from_cache:
                # A request that reached the server: the one computation.
                with open(os.path.join(markers, f"fetched-{os.getpid()}"), "w"):
                    pass
            return "the value"

        def cached() -> Any:
            return session.get(url).text if session.cache.contains(url=url) else None

        time.sleep(max(0.0, start - time.time()))
        value = add_as_lock(lambda: client.add(lock, 1, 30), lambda: "the value" if cached() else None,
                            lambda v: None, lambda: client.delete(lock), fetch)
    else:
        raise SystemExit(f"unknown framework {framework}")
    print(value, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), *sys.argv[6:])
