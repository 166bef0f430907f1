#!/usr/bin/env python3
"""halcyon's Python client against redis-py, each on its own server, as a new user would
use them: ``Client.get`` round trips and a pipeline of 10,000 gets.

Both servers run on Unix sockets in a fresh temp folder (Redis without persistence), hold
the same key with a value of ``--value-size`` bytes, and are measured in interleaved runs
so that other work on the machine falls on both alike; the report keeps medians. Server
CPU per request comes from its CPU-time clock (user + system, all threads) around each measurement.

Run through ``Benchmarks/python_compare.sh``, which builds halcyond and installs Redis and
redis-py when missing. Direct use:

    python3 Benchmarks/python_compare.py --halcyond .build/release/halcyond \\
        [--client-src Clients/python/src] [--runs 7] [--gets 2000] [--pipeline 10000] [--out FILE]
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
from typing import Callable, Dict, List, Tuple

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process (all its threads, living and ended) has
    used so far, to the nanosecond: Linux's CPU-time clock of another process (the
    clock id ``clock_getcpuclockid`` would return, ``(~pid << 3) | 2``). ``/proc/PID/stat``
    counts in 10 ms ticks, too coarse for the few hundred requests of one run; it stays
    the fallback where that clock cannot be read."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wait_socket(path: str, proc: subprocess.Popen, name: str) -> None:
    for _ in range(200):
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            sys.exit(f"python_compare: {name} exited with {proc.returncode}")
        time.sleep(0.05)
    sys.exit(f"python_compare: {name} did not create {path}")


def measure(pid: int, body: Callable[[], int]) -> Tuple[float, float]:
    """Runs ``body`` (which returns how many requests it made); returns its wall seconds
    and the server's CPU microseconds per request over it."""
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    n = body()
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    return wall, cpu * 1e6 / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--halcyond", required=True)
    ap.add_argument("--client-src", default=os.path.join(os.path.dirname(__file__), "..", "Clients", "python", "src"))
    ap.add_argument("--runs", type=int, default=7, help="interleaved runs; the report keeps medians (7)")
    ap.add_argument("--gets", type=int, default=2000, help="round trips per run for the get latency (2000)")
    ap.add_argument("--pipeline", type=int, default=10000, help="gets per pipeline (10000)")
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--label", default="", help="a name for this client build in the report")
    ap.add_argument("--out", help="append the report to this file (default: stdout only)")
    args = ap.parse_args()

    sys.path.insert(0, os.path.abspath(args.client_src))
    import halcyon  # noqa: E402  (the client under test, from --client-src)
    import redis  # noqa: E402

    tmp = tempfile.mkdtemp(prefix="hpy.")  # short: sun_path holds 108 bytes
    procs: List[subprocess.Popen] = []
    try:
        rsock, hsock = os.path.join(tmp, "r.sock"), os.path.join(tmp, "h.sock")
        rproc = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", rsock, "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--logfile", os.path.join(tmp, "redis.log")])
        procs.append(rproc)
        hproc = subprocess.Popen(
            [args.halcyond, "--socket", hsock, "--cache-dir", os.path.join(tmp, "cache")],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "halcyond.log"), "w"))
        procs.append(hproc)
        wait_socket(rsock, rproc, "redis-server")
        wait_socket(hsock, hproc, "halcyond")

        value = "v" * args.value_size
        h = halcyon.Client(hsock)
        r = redis.Redis(unix_socket_path=rsock)
        h.set("bench:key", value, to_disk=False)
        r.set("bench:key", value)
        assert h.get("bench:key") == value and r.get("bench:key") == value.encode()

        def round_trips(get: Callable[[str], object]) -> Callable[[], int]:
            samples: List[int] = []

            def body() -> int:
                clock = time.perf_counter_ns
                for _ in range(args.gets):
                    t0 = clock()
                    get("bench:key")
                    samples.append(clock() - t0)
                return args.gets
            body.samples = samples  # type: ignore[attr-defined]
            return body

        def h_pipeline() -> int:
            p = h.pipeline()
            for _ in range(args.pipeline):
                p.get("bench:key")
            results = p.execute()
            assert len(results) == args.pipeline and results[-1] == value
            return args.pipeline

        def r_pipeline() -> int:
            p = r.pipeline(transaction=False)
            for _ in range(args.pipeline):
                p.get("bench:key")
            results = p.execute()
            assert len(results) == args.pipeline and results[-1] == value.encode()
            return args.pipeline

        # Warm-up: connections open, code paths hot.
        for _ in range(200):
            h.get("bench:key")
            r.get("bench:key")
        h_pipeline()
        r_pipeline()

        rows: Dict[str, List[float]] = {k: [] for k in (
            "h_get_us", "r_get_us", "h_get_cpu", "r_get_cpu", "h_pipe_ms", "r_pipe_ms", "h_pipe_cpu", "r_pipe_cpu")}
        for run in range(args.runs):
            # Alternate which goes first, so neither always runs on a warmer machine.
            order = [("h", hproc.pid, h.get, h_pipeline), ("r", rproc.pid, r.get, r_pipeline)]
            if run % 2:
                order.reverse()
            for name, pid, get, pipe in order:
                body = round_trips(get)
                _, cpu = measure(pid, body)
                rows[f"{name}_get_us"].append(statistics.median(body.samples) / 1e3)  # type: ignore[attr-defined]
                rows[f"{name}_get_cpu"].append(cpu)
                wall, cpu = measure(pid, pipe)
                rows[f"{name}_pipe_ms"].append(wall * 1e3)
                rows[f"{name}_pipe_cpu"].append(cpu)
            print(f"[python_compare] run {run + 1}/{args.runs}: "
                  f"get {rows['h_get_us'][-1]:.1f} vs {rows['r_get_us'][-1]:.1f} µs, "
                  f"pipeline {rows['h_pipe_ms'][-1]:.1f} vs {rows['r_pipe_ms'][-1]:.1f} ms", file=sys.stderr)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in rows.items()}
    spread = {k: (min(v), max(v)) for k, v in rows.items()}
    load = open("/proc/loadavg").read().split()[:3]
    label = f" ({args.label})" if args.label else ""
    lines = [
        f"## Python clients{label}: halcyon vs redis-py",
        "",
        f"- Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, `Benchmarks/python_compare.py`: "
        f"{args.runs} interleaved runs, medians; value {args.value_size} B, memory hits; "
        f"load average at the end {' '.join(load)} on {os.cpu_count()} cores.",
        f"- Clients: halcyon from `{os.path.relpath(args.client_src)}`, redis-py {redis.__version__} "
        f"(`hiredis` {'present' if _has_hiredis() else 'absent'}); Python {sys.version.split()[0]}.",
        f"- `get`: median round trip of {args.gets} sequential `get` calls per run; "
        f"pipeline: wall time of one pipeline of {args.pipeline} gets (`Client.pipeline()` / "
        "`Redis.pipeline(transaction=False)`), queueing, sending and decoding included.",
        "- Server CPU per request: the server process's user + system CPU time over the "
        "measurement divided by its requests (the process's CPU-time clock, all threads).",
        "",
        "| measure | halcyon | redis-py | halcyon / redis-py | halcyon min–max | redis-py min–max |",
        "|---|---:|---:|---:|---:|---:|",
    ]

    def row(title: str, hk: str, rk: str, fmt: str) -> None:
        hv, rv = med[hk], med[rk]
        ratio = f"{hv / rv:.2f}" if rv > 0 else "n/a"
        lines.append(f"| {title} | {hv:{fmt}} | {rv:{fmt}} | {ratio} | "
                     f"{spread[hk][0]:{fmt}}–{spread[hk][1]:{fmt}} | {spread[rk][0]:{fmt}}–{spread[rk][1]:{fmt}} |")

    row("`get` round trip, µs (median)", "h_get_us", "r_get_us", ".1f")
    row(f"{args.pipeline} pipelined gets, ms", "h_pipe_ms", "r_pipe_ms", ".1f")
    row("server CPU per `get`, µs", "h_get_cpu", "r_get_cpu", ".2f")
    row("server CPU per pipelined get, µs", "h_pipe_cpu", "r_pipe_cpu", ".2f")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


def _has_hiredis() -> bool:
    try:
        import hiredis  # noqa: F401
        return True
    except ImportError:
        return False


if __name__ == "__main__":
    main()
