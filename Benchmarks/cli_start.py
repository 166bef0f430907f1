#!/usr/bin/env python3
"""What a shell script pays per call: `halcyon get k` against `redis-cli get k`, and
1,000 gets from a bash loop through `halcyon_open`'s coprocess against 1,000
`halcyon get` processes.

    Benchmarks/cli_start.py [--halcyon BIN] [--halcyond BIN] [--runs N]

Starts a private halcyond (default .build/release/halcyond, as scripts/start builds it)
and a private redis-server (no TCP, no persistence) on Unix sockets in a fresh /tmp
folder, stores `k` in both, then:

1. per call: starts each command RUNS times, alternating halcyon and redis-cli so that
   drift on a busy machine lands on both; wall time from spawn to reap, and the child's
   CPU (user + system, from wait4). Prints min/median/max and the median of the
   pairwise ratios.
2. shell loop: runs a bash script that does 1,000 `halcyon_get k` with the coprocess
   (`halcyon_open`) and one that does 1,000 without, alternating, 3 times each, and
   prints the medians and their ratio.

Installs nothing: needs redis-server and redis-cli (apt install redis-server).
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
from pathlib import Path
from typing import List, Tuple

REPO = Path(__file__).resolve().parent.parent


def spawn_timed(argv: List[str]) -> Tuple[float, float]:
    """Wall and CPU seconds of one run of argv (stdin and stdout /dev/null)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        start = time.perf_counter()
        pid = os.posix_spawnp(argv[0], argv, os.environ,
                              file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1)])
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - start
    finally:
        os.close(devnull)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{argv} exited with {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime


def spread(values: List[float], scale: float, unit: str) -> str:
    return (f"{statistics.median(values) * scale:.2f} {unit} "
            f"(min {min(values) * scale:.2f}, max {max(values) * scale:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--halcyon", default=str(REPO / ".build/release/halcyon"))
    parser.add_argument("--halcyond", default=str(REPO / ".build/release/halcyond"))
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    for tool in ("redis-server", "redis-cli", "bash"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing (apt install redis-server)")
    folder = tempfile.mkdtemp(prefix="hcli-", dir="/tmp")
    hsock, rsock = f"{folder}/h.sock", f"{folder}/r.sock"
    daemon = subprocess.Popen([args.halcyond, "--socket", hsock, "--cache-dir", f"{folder}/cache"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    redis = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", rsock, "--save", "",
                              "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            h = subprocess.run([args.halcyon, "--socket", hsock, "set", "k", "hello"], capture_output=True)
            r = subprocess.run(["redis-cli", "-s", rsock, "set", "k", "hello"], capture_output=True)
            if h.returncode == 0 and r.returncode == 0 and b"OK" in r.stdout:
                break
            time.sleep(0.1)
        else:
            sys.exit("the servers did not start")

        halcyon_get = [args.halcyon, "--socket", hsock, "get", "k"]
        redis_get = ["redis-cli", "-s", rsock, "get", "k"]
        for _ in range(5):  # warm the page cache for both binaries
            spawn_timed(halcyon_get)
            spawn_timed(redis_get)
        hw: List[float] = []
        hc: List[float] = []
        rw: List[float] = []
        rc: List[float] = []
        for _ in range(args.runs):
            wall, cpu = spawn_timed(halcyon_get)
            hw.append(wall)
            hc.append(cpu)
            wall, cpu = spawn_timed(redis_get)
            rw.append(wall)
            rc.append(cpu)
        ratios = [a / b for a, b in zip(hw, rw)]
        print(f"per call, {args.runs} alternating runs each:")
        print(f"  halcyon get k    wall {spread(hw, 1e3, 'ms')}, cpu {spread(hc, 1e3, 'ms')}")
        print(f"  redis-cli get k  wall {spread(rw, 1e3, 'ms')}, cpu {spread(rc, 1e3, 'ms')}")
        print(f"  wall ratio halcyon/redis-cli, median of pairs: {statistics.median(ratios):.2f}")

        library = REPO / "Clients/shell/halcyon.sh"
        body = 'for i in $(seq 1000); do halcyon_get k >/dev/null; done'
        scripts = {
            "coprocess": f'source "{library}"; halcyon_open || exit 9; {body}; halcyon_close',
            "processes": f'source "{library}"; {body}',
        }
        env = dict(os.environ, HALCYON_BIN=args.halcyon, HALCYON_SOCKET=hsock)
        times = {name: [] for name in scripts}  # type: ignore[var-annotated]
        for _ in range(3):
            for name, script in scripts.items():
                start = time.perf_counter()
                subprocess.run(["bash", "-c", script], env=env, check=True)
                times[name].append(time.perf_counter() - start)
        print("1,000 halcyon_get from a bash loop, 3 alternating runs each:")
        for name, values in times.items():
            print(f"  {name:10} {spread(values, 1, 's')}")
        print(f"  processes/coprocess: {statistics.median(times['processes']) / statistics.median(times['coprocess']):.1f}x")
    finally:
        for proc in (daemon, redis):
            proc.terminate()
            proc.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
