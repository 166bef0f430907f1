#!/usr/bin/env python3
"""Each halcyon.contrib backend against the same framework's Redis backend, through the
framework, as an application uses it: Django's ``cache.get``/``cache.set``, a dogpile.cache
region's ``get``/``set``, cachelib's ``get``/``set``, and requests-cache's cached
``session.get`` (a hit) and ``cache.save_response``.

Redis runs with ``--appendonly yes --appendfsync everysec`` (the write guarantee closest
to halcyond's: an acknowledged write survives a crash of the server) and halcyond on its
defaults, both on Unix sockets in a fresh temp folder. For each framework, each
operation is timed in ``--runs`` interleaved runs (Halcyon, Redis, Halcyon, ...) so that
other work on the machine falls on both alike; the report keeps medians of the time per
operation, the ratio Halcyon / Redis, the client's CPU per operation (this process's
user + system CPU: the framework, the client library and its system calls) and each
server's CPU per request (user + system, from its CPU-time clock, over the run and until
the server is idle after it, divided by the requests it served). Each run waits for its
server to go idle before the next starts, so work one server deferred past its replies
never lands in the other's timed run.

Run through ``Benchmarks/frameworks_compare.sh``, which builds the release halcyond and
installs what is missing. Direct use:

    python3 Benchmarks/frameworks_compare.py --halcyond .build/release/halcyond \\
        [--client-src Clients/python/src] [--runs 7] [--ops 2000] [--value-size 100] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from python_compare import cpu_seconds, wait_socket  # noqa: E402  (the same measures as the client comparison)


class Side:
    """One backend of one framework: how to get and set one key through it. ``scale``
    divides the operations per run for a framework whose own work per call is large."""

    def __init__(self, name: str, get: Callable[[int], Any], set_: Callable[[int], Any], scale: int = 1) -> None:
        self.name, self.get, self.set, self.scale = name, get, set_, scale


def django_sides(hsock: str, rsock: str, value: str) -> Tuple[Side, Side]:
    import django
    from django.conf import settings

    settings.configure(CACHES={
        "default": {"BACKEND": "halcyon.contrib.django.HalcyonCache", "LOCATION": hsock},
        "redis": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": f"unix://{rsock}"},
    })
    django.setup()
    from django.core.cache import caches

    def side(alias: str) -> Side:
        cache = caches[alias]
        cache.set("bench", value, 3600)
        assert cache.get("bench") == value
        return Side(alias, lambda i: cache.get("bench"), lambda i: cache.set(f"bench:{i % 1000}", value, 3600))

    return side("default"), side("redis")


def dogpile_sides(hsock: str, rsock: str, value: str) -> Tuple[Side, Side]:
    from dogpile.cache import make_region, register_backend

    register_backend("halcyon", "halcyon.contrib.dogpile", "HalcyonBackend")
    h = make_region().configure("halcyon", expiration_time=3600, arguments={"socket_path": hsock})
    r = make_region().configure("dogpile.cache.redis", expiration_time=3600, arguments={"url": f"unix://{rsock}"})

    def side(name: str, region: Any) -> Side:
        region.set("bench", value)
        assert region.get("bench") == value
        return Side(name, lambda i: region.get("bench"), lambda i: region.set(f"bench:{i % 1000}", value))

    return side("halcyon", h), side("redis", r)


def cachelib_sides(hsock: str, rsock: str, value: str) -> Tuple[Side, Side]:
    import redis
    from cachelib import RedisCache

    from halcyon.contrib.cachelib import HalcyonCache

    def side(name: str, cache: Any) -> Side:
        cache.set("bench", value, 3600)
        assert cache.get("bench") == value
        return Side(name, lambda i: cache.get("bench"), lambda i: cache.set(f"bench:{i % 1000}", value, 3600))

    return (side("halcyon", HalcyonCache(hsock)),
            side("redis", RedisCache(host=redis.Redis(unix_socket_path=rsock))))


def requests_cache_sides(hsock: str, rsock: str, value: str, url: str) -> Tuple[Side, Side]:
    import requests_cache
    from redis import StrictRedis
    from requests_cache.backends.redis import RedisCache

    from halcyon.contrib.requests_cache import HalcyonCache

    def side(name: str, backend: Any) -> Side:
        session = requests_cache.CachedSession(backend=backend, expire_after=3600)
        first = session.get(url)
        assert not first.from_cache and session.get(url).from_cache
        response = first

        def get(i: int) -> Any:
            hit = session.get(url)
            assert hit.from_cache
            return hit

        def set_(i: int) -> Any:
            return session.cache.save_response(response, cache_key=f"bench:{i % 1000}")

        # A cached session.get costs requests-cache milliseconds of its own.
        return Side(name, get, set_, scale=10)

    return (side("halcyon", HalcyonCache(namespace="bench", socket_path=hsock)),
            side("redis", RedisCache(namespace="bench", connection=StrictRedis(unix_socket_path=rsock))))


#: A server that used less CPU than this over one 50 ms look is idle: its housekeeping
#: stays below it (Redis's 10 Hz cron costs 0.1-0.2 ms a time), deferred work does not.
IDLE_CPU = 0.001


def settle(pid: int, limit: float = 2.0) -> None:
    """Waits (at most ``limit`` seconds) until the server's CPU time stops moving: the
    work a server defers past its replies (halcyond's file writes behind the journal,
    a Redis AOF flush) then lands in the run that caused it, not in the next one, which
    may be the other server's."""
    prev = cpu_seconds(pid)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = cpu_seconds(pid)
        if now - prev < IDLE_CPU:
            return
        prev = now


def run(side: Side, op: str, ops: int, pid: int) -> Tuple[float, float, float]:
    """Microseconds per operation, the client's CPU microseconds per operation (this
    process: the framework, its client library and the system calls they make), and
    the server's CPU microseconds per request, counting the work it finished after the
    last reply (see :func:`settle`)."""
    call = side.get if op == "get" else side.set
    ops = max(1, ops // side.scale)
    cpu0 = cpu_seconds(pid)
    client0 = time.process_time()
    t0 = time.perf_counter()
    for i in range(ops):
        call(i)
    wall = time.perf_counter() - t0
    client = time.process_time() - client0
    settle(pid)
    return wall * 1e6 / ops, client * 1e6 / ops, (cpu_seconds(pid) - cpu0) * 1e6 / ops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--halcyond", required=True)
    ap.add_argument("--client-src", default=os.path.join(HERE, "..", "Clients", "python", "src"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--ops", type=int, default=2000, help="operations per run (2000)")
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--only", default="django,dogpile,cachelib,requests-cache")
    ap.add_argument("--out", help="append the report to this file")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.client_src))
    sys.path.insert(0, os.path.join(HERE, "..", "Clients", "python", "tests", "frameworks"))

    tmp = tempfile.mkdtemp(prefix="hfw.")
    procs: List[subprocess.Popen] = []
    lines: List[str] = []
    try:
        rsock, hsock = os.path.join(tmp, "r.sock"), os.path.join(tmp, "h.sock")
        os.makedirs(os.path.join(tmp, "aof"))
        rproc = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", rsock, "--unixsocketperm", "700", "--save", "",
             "--appendonly", "yes", "--appendfsync", "everysec", "--dir", os.path.join(tmp, "aof"),
             "--logfile", os.path.join(tmp, "redis.log")])
        procs.append(rproc)
        hproc = subprocess.Popen([args.halcyond, "--socket", hsock, "--cache-dir", os.path.join(tmp, "cache")],
                                 stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "halcyond.log"), "w"))
        procs.append(hproc)
        web = subprocess.Popen([sys.executable, os.path.join(HERE, "..", "Clients", "python", "tests", "frameworks",
                                                             "httpbin_server.py")],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(web)
        wait_socket(rsock, rproc, "redis-server")
        wait_socket(hsock, hproc, "halcyond")
        assert web.stdout is not None
        url = web.stdout.readline().strip() + "/bytes/100"

        value = "v" * args.value_size
        builders: Dict[str, Callable[[], Tuple[Side, Side]]] = {
            "django": lambda: django_sides(hsock, rsock, value),
            "dogpile": lambda: dogpile_sides(hsock, rsock, value),
            "cachelib": lambda: cachelib_sides(hsock, rsock, value),
            "requests-cache": lambda: requests_cache_sides(hsock, rsock, value, url),
        }
        rows = []
        for framework in args.only.split(","):
            halcyon_side, redis_side = builders[framework]()
            for op in ("get", "set"):
                samples: Dict[str, List[Tuple[float, float, float]]] = {"h": [], "r": []}
                # Warm both with a whole run: every key a set run writes exists before
                # the timed runs, which measure overwrites (the steady state of a cache).
                run(halcyon_side, op, args.ops, hproc.pid)
                run(redis_side, op, args.ops, rproc.pid)
                for i in range(args.runs):
                    # Interleaved, and alternating which goes first.
                    order = [("h", halcyon_side, hproc.pid), ("r", redis_side, rproc.pid)]
                    for tag, side, pid in (order if i % 2 == 0 else order[::-1]):
                        samples[tag].append(run(side, op, args.ops, pid))
                h_us, h_client, h_cpu = (statistics.median(s[j] for s in samples["h"]) for j in range(3))
                r_us, r_client, r_cpu = (statistics.median(s[j] for s in samples["r"]) for j in range(3))
                rows.append((framework, op, h_us, r_us, h_client, r_client, h_cpu, r_cpu))
                print(f"{framework:15} {op}: halcyon {h_us:8.1f} us (client CPU {h_client:6.1f})  "
                      f"redis {r_us:8.1f} us (client CPU {r_client:6.1f})  ratio {h_us / r_us:5.2f}",
                      file=sys.stderr, flush=True)

        import django
        import dogpile
        import redis as redis_py

        versions = []
        for dist in ("django", "dogpile.cache", "cachelib", "requests-cache", "redis"):
            from importlib.metadata import version

            versions.append(f"{dist} {version(dist)}")
        load = open("/proc/loadavg").read().split()[:3]
        rev = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip() or "?"
        redis_version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
        lines += [
            f"- Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {rev}, "
            f"`Benchmarks/frameworks_compare.py --runs {args.runs} --ops {args.ops}`: {args.runs} interleaved runs "
            f"(alternating which side goes first) of {args.ops} sequential operations per side (requests-cache: a "
            f"tenth), medians; "
            f"load average at the end {' '.join(load)} on {os.cpu_count()} cores.",
            f"- Servers on Unix sockets: halcyond (release, defaults: a write is acknowledged once it reached the "
            f"kernel through the journal) and redis-server {redis_version} with `--appendonly yes --appendfsync "
            f"everysec`. Clients: halcyon from `Clients/python/src`, {', '.join(versions)} (`hiredis` absent); "
            f"Python {sys.version.split()[0]}.",
            f"- Operations through each framework, one key, value {args.value_size} B: `get` is a hit of one key; "
            f"`set` writes one of 1,000 keys in turn (Django, cachelib: timeout 3600 s; dogpile: a region with "
            f"`expiration_time` 3600; requests-cache: a cached `session.get` and `cache.save_response` of a "
            f"100-byte response from a loopback httpbin).",
            "- Client CPU per operation: this process's user + system CPU over the run (the framework, its "
            "client library, the system calls) divided by the operations; server CPU per request: the server's "
            "user + system CPU over the run and until it went idle after it (the work it deferred past its "
            "replies), divided by the operations (the process's CPU-time clock, to the nanosecond). "
            "CPU time moves less than wall time when other work shares the cores.",
            "",
            "| framework | op | Halcyon µs/op | Redis µs/op | Halcyon / Redis | target "
            "| client CPU µs/op Halcyon | Redis | server CPU µs/op Halcyon | Redis |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for framework, op, h_us, r_us, h_client, r_client, h_cpu, r_cpu in rows:
            target = "≤ 1.0" if op == "get" else "≤ 1.2"
            lines.append(f"| {framework} | {op} | {h_us:.1f} | {r_us:.1f} | {h_us / r_us:.2f} | {target} | "
                         f"{h_client:.1f} | {r_client:.1f} | {h_cpu:.1f} | {r_cpu:.1f} |")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        with open(args.out, "a") as f:
            f.write(report)


if __name__ == "__main__":
    main()
