"""halcyond as a near-cache in front of Redis, measured from Python.

Starts one redis-server and two halcyond (two "hosts", each with its own socket and
cache folder, both with --upstream to that Redis) on loopback, then, in interleaved
rounds:

- hot reads: one Python caller reads hot shared keys (100-byte values) one request at a
  time through halcyond (halcyon.Client.get: a memory hit on the host) and through
  redis-py (GET to the same Redis over TCP loopback, RESP3), the same number of each;
- a mixed run with 1 % writes: 99 reads on host B for each write through host A; after
  each write the caller reads the key on B until the new value shows (the invalidation
  delay, from A's reply), and every read's latency is recorded.

Prints one JSON object of the medians, or with --markdown the table RESULTS.md keeps.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "Clients" / "python" / "src"))

import halcyon  # noqa: E402
import redis  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def redis_cpu(r: "redis.Redis") -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def percentile(values: List[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def wait_for(check, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.05)
    raise RuntimeError("did not come up")


def markdown(d: Dict[str, float]) -> str:
    return "\n".join([
        f"{d['rounds']} interleaved rounds, medians",
        "",
        "| | halcyond (memory hit on the host) | redis-py GET (TCP loopback) |",
        "|---|---:|---:|",
        f"| reads/s, one caller | {d['halcyond_rps']:,.0f} | {d['redis_py_rps']:,.0f} |",
        f"| × redis-py | {d['ratio']:.2f} | 1.00 |",
        f"| latency p50 / p99 µs | {d['hit_p50_us']:.0f} / {d['hit_p99_us']:.0f} | {d['redis_p50_us']:.0f} / {d['redis_p99_us']:.0f} |",
        f"| server CPU µs per read | {d['halcyond_cpu_us']:.1f} | {d['redis_cpu_us']:.1f} |",
        "",
        f"1 % writes through host A, reads through host B: invalidation delay p50 {d['inval_p50_ms']:.2f} ms, "
        f"p99 {d['inval_p99_ms']:.2f} ms, max {d['inval_max_ms']:.2f} ms; read latency p50 {d['mixed_read_p50_us']:.0f} µs, "
        f"p99 {d['mixed_read_p99_us']:.0f} µs",
    ])


def start_redis(folder: str) -> "tuple[subprocess.Popen[bytes], int]":
    """A redis-server on a free loopback port, no persistence, its files in ``folder``."""
    port = free_port()
    server = subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", "--dir", folder],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return server, port


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--halcyond", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--mixed-ops", type=int, default=20_000)
    parser.add_argument("--markdown", action="store_true", help="print the medians as a Markdown table")
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="hnb-", dir="/tmp")
    server, port = start_redis(folder)
    daemons = []
    try:
        r = redis.Redis(host="127.0.0.1", port=port, protocol=3)
        wait_for(r.ping)
        for name in ("a", "b"):
            sock = os.path.join(folder, f"{name}.sock")
            proc = subprocess.Popen([args.halcyond, "--socket", sock, "--cache-dir", os.path.join(folder, name),
                                     "--upstream", f"redis://127.0.0.1:{port}", "--log-level", "warning"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            daemons.append((proc, sock))
            wait_for(lambda: halcyon.Client(sock, timeout=2, retry=False).ping())
        a = halcyon.Client(daemons[0][1], timeout=10)
        b = halcyon.Client(daemons[1][1], timeout=10)
        keys = [f"hot:{i}" for i in range(args.keys)]
        value = "v" * 100
        for k in keys:
            a.set(k, value)
            b.get(k)   # B holds a copy now

        rows: Dict[str, List[float]] = {"halcyond_rps": [], "redis_py_rps": [], "halcyond_cpu_us": [], "redis_cpu_us": [],
                                        "hit_p50_us": [], "hit_p99_us": [], "redis_p50_us": [], "redis_p99_us": [],
                                        "inval_p50_ms": [], "inval_p99_ms": [], "inval_max_ms": [],
                                        "mixed_read_p50_us": [], "mixed_read_p99_us": []}
        rng = random.Random(7)
        for _ in range(args.rounds):
            order = ["halcyond", "redis"] if len(rows["halcyond_rps"]) % 2 == 0 else ["redis", "halcyond"]
            # Each side: (row prefix, the read, the server's CPU seconds so far).
            sides = {
                "halcyond": (("halcyond_rps", "halcyond_cpu_us", "hit_p50_us", "hit_p99_us"), b.get,
                             lambda: proc_cpu(daemons[1][0].pid)),
                # INFO itself costs a little: negligible against thousands of GETs.
                "redis": (("redis_py_rps", "redis_cpu_us", "redis_p50_us", "redis_p99_us"), r.get, lambda: redis_cpu(r)),
            }
            for who in order:
                (rps, cpu, p50, p99), read, server_cpu = sides[who]
                picks = [keys[rng.randrange(len(keys))] for _ in range(args.reads)]
                lat: List[float] = []
                cpu0 = server_cpu()
                t0 = time.perf_counter()
                for k in picks:
                    s = time.perf_counter()
                    read(k)
                    lat.append(time.perf_counter() - s)
                elapsed = time.perf_counter() - t0
                rows[rps].append(args.reads / elapsed)
                rows[cpu].append((server_cpu() - cpu0) / args.reads * 1e6)
                rows[p50].append(percentile(lat, 0.5) * 1e6)
                rows[p99].append(percentile(lat, 0.99) * 1e6)
            # Mixed: 1 % writes through A, reads through B; the delay until B sees each write.
            delays: List[float] = []
            reads: List[float] = []
            n = 0
            for i in range(args.mixed_ops):
                if i % 100 == 99:
                    k = keys[rng.randrange(len(keys))]
                    n += 1
                    new = f"w{n}-" + value[:90]
                    a.set(k, new)
                    written = time.perf_counter()
                    deadline = written + 5
                    while b.get(k) != new:
                        assert time.perf_counter() < deadline, "B never saw the write"
                    delays.append(time.perf_counter() - written)
                else:
                    k = keys[rng.randrange(len(keys))]
                    s = time.perf_counter()
                    b.get(k)
                    reads.append(time.perf_counter() - s)
            rows["inval_p50_ms"].append(percentile(delays, 0.5) * 1e3)
            rows["inval_p99_ms"].append(percentile(delays, 0.99) * 1e3)
            rows["inval_max_ms"].append(max(delays) * 1e3)
            rows["mixed_read_p50_us"].append(percentile(reads, 0.5) * 1e6)
            rows["mixed_read_p99_us"].append(percentile(reads, 0.99) * 1e6)
        stats = b.stats()["upstream"]
        out = {k: statistics.median(v) for k, v in rows.items()}
        out["ratio"] = out["halcyond_rps"] / out["redis_py_rps"]
        out["rounds"] = args.rounds
        out["b_upstream_hits"] = stats["hits"]
        out["b_invalidations"] = stats["invalidations"]
        print(markdown(out) if args.markdown else json.dumps(out))
    finally:
        for proc, _ in daemons:
            proc.terminate()
            proc.wait(timeout=15)
        server.kill()
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
