"""Shared-key setMany/removeMany through halcyond: one builds's daemon against another's,
side by side on one Redis, and redis-py's pipelined SETs of the same keys as the floor.

    python3 Benchmarks/nearcache/batch_bench.py --halcyond NAME=PATH [--halcyond NAME=PATH ...]
        [--rounds 5] [--calls 30] [--keys 100]

Each round, in alternating order: for every daemon, ``calls`` ``cache.setMany`` of ``keys``
shared keys (100-byte values, keys spread over the slot space) and as many
``cache.removeMany`` of them, one request at a time from one Python client; then redis-py
(``protocol=3``) sending the same SETs in one pipeline per call. Prints the medians over
rounds of each call's median latency, and the socket reads Redis made per call
(``INFO stats`` ``total_reads_processed``): the round trips a call cost.
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
from typing import Dict, List

sys.path.insert(0, os.path.dirname(__file__))
from nearcache_bench import start_redis, wait_for  # noqa: E402

import halcyon  # noqa: E402
import redis  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--halcyond", action="append", required=True, help="NAME=PATH of a halcyond binary")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--keys", type=int, default=100)
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="hbb-", dir="/tmp")
    server, port = start_redis(folder)
    daemons: Dict[str, subprocess.Popen] = {}
    clients: Dict[str, halcyon.Client] = {}
    try:
        r = redis.Redis(host="127.0.0.1", port=port, protocol=3)
        wait_for(r.ping)
        for spec in args.halcyond:
            name, path = spec.split("=", 1)
            sock = os.path.join(folder, f"{name}.sock")
            daemons[name] = subprocess.Popen([path, "--socket", sock, "--cache-dir", os.path.join(folder, name),
                                              "--upstream", f"redis://127.0.0.1:{port}", "--log-level", "warning"],
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for(lambda: halcyon.Client(sock, timeout=2, retry=False).ping())
            clients[name] = halcyon.Client(sock, timeout=30)
        value = "v" * 100
        keys = [f"batch:{i}" for i in range(args.keys)]
        entries = [{"key": k, "value": value} for k in keys]

        def reads() -> int:
            # The reads Redis made from its clients' sockets: one per round trip that
            # carried commands (the INFO call itself adds one, subtracted below).
            return int(r.info("stats")["total_reads_processed"])

        results: Dict[str, Dict[str, List[float]]] = {}
        names = list(clients) + ["redis-py"]
        for round_index in range(args.rounds):
            order = names if round_index % 2 == 0 else list(reversed(names))
            for name in order:
                row = results.setdefault(name, {"set_ms": [], "remove_ms": [], "reads_per_call": []})
                sets: List[float] = []
                removes: List[float] = []
                before = reads()
                for _ in range(args.calls):
                    start = time.perf_counter()
                    if name == "redis-py":
                        pipe = r.pipeline(transaction=False)
                        for k in keys:
                            pipe.set(k, value)
                        pipe.execute()
                    else:
                        clients[name].call("cache.setMany", {"entries": entries})
                    sets.append((time.perf_counter() - start) * 1000)
                    start = time.perf_counter()
                    if name == "redis-py":
                        r.delete(*keys)
                    else:
                        clients[name].call("cache.removeMany", {"keys": keys})
                    removes.append((time.perf_counter() - start) * 1000)
                row["set_ms"].append(statistics.median(sets))
                row["remove_ms"].append(statistics.median(removes))
                row["reads_per_call"].append((reads() - before - 1) / (2 * args.calls))
        print(f"| {args.keys} shared keys per call | setMany ms (p50) | removeMany ms (p50) | Redis socket reads per call |")
        print("|---|---:|---:|---:|")
        for name in names:
            row = results[name]
            print(f"| {name} | {statistics.median(row['set_ms']):.2f} | {statistics.median(row['remove_ms']):.2f} | "
                  f"{statistics.median(row['reads_per_call']):.1f} |")
    finally:
        for proc in daemons.values():
            proc.terminate()
        for proc in daemons.values():
            proc.wait(timeout=10)
        server.kill()
        server.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
