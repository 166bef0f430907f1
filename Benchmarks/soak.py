#!/usr/bin/env python3
"""The soak: a closed-loop load held for minutes against one server, sampled minute by minute.

What it answers is whether a server keeps its speed under sustained evictions, which a
benchmark of seconds cannot show: a cost that grows with uptime (a structure that never
shrinks, a chain walked on every call) shows up here as falling throughput and rising CPU
per request from one minute to the next.

The load (defaults): 16 connections x 8 requests in flight, 200,000 keys of 4 KiB, 3 gets to
1 set (`loadgen --op mixed --set-pct 25`), with the memory budget at 64 MiB, so most of the
key space lives only on disk (halcyond) or is evicted (Redis, `maxmemory` 64 MiB with
`allkeys-lru` and AOF everysec: an evicted key is a miss, which is what a user with more
data than memory gets from Redis).

Per minute it prints throughput, p99, server CPU per request (from /proc), RSS, open
descriptors, and for halcyond the journal records per set and the lifetime write-backs
per disk hit (from `cache.stats`). With --stack-depth it attaches gdb at every minute
boundary and reports the deepest stack of any daemon thread.

usage: Benchmarks/soak.py [--server halcyond|redis|both] [--minutes N] [--seconds-per-round S]
                          [--keys K] [--value-size B] [--conns C] [--pipeline P] [--set-pct N]
                          [--memory MiB] [--halcyond PATH] [--stack-depth] [--markdown]
Servers run on Unix sockets in a fresh temp folder; every server started is stopped on exit.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_seconds(pid):
    """User + system CPU seconds of every thread of `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def descriptors(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def deepest_stack(pid, limit=300):
    """The most frames any thread of `pid` has, by gdb; `limit` or more means at least that."""
    out = subprocess.run(
        ["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off", "-ex", f"thread apply all bt {limit}"],
        capture_output=True, text=True, timeout=120).stdout
    deepest, current = 0, 0
    for line in out.splitlines():
        if line.startswith("Thread "):
            deepest, current = max(deepest, current), 0
        m = re.match(r"#(\d+)\s", line)
        if m:
            current = int(m.group(1)) + 1
    return max(deepest, current)


def wait_for_socket(path, proc, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode} before listening")
        if os.path.exists(path):
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(path)
                return
            except OSError:
                pass
        time.sleep(0.05)
    raise SystemExit(f"no socket at {path} after {seconds} s")


def ask(path, request, complete):
    """Sends `request` on a new connection to the socket at `path` and reads until
    `complete(bytes so far)` says the reply is whole (or the server closes)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        s.sendall(request)
        buf = b""
        while not complete(buf):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return buf


class Halcyond:
    name = "halcyond"
    proto = "halcyon"

    def __init__(self, binary, folder, memory_mib):
        self.sock = os.path.join(folder, "h.sock")
        self.proc = subprocess.Popen(
            [binary, "--socket", self.sock, "--cache-dir", os.path.join(folder, "cache"),
             "--memory-limit", f"{memory_mib}MiB", "--log-level", "warning"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(folder, "halcyond.log"), "w"))
        wait_for_socket(self.sock, self.proc)

    def stats(self):
        buf = ask(self.sock, b'{"jsonrpc":"2.0","id":1,"method":"cache.stats"}\n', lambda b: b.endswith(b"\n"))
        result = json.loads(buf)["result"]
        journal = result.get("journal", {})
        return {
            "sets": result["sets"], "records": journal.get("records", 0),
            "writeBacks": result["extensionWriteBacks"], "diskHits": result["disk"]["hits"],
            "evictions": result["evictions"], "diskEntries": result["disk"]["entries"],
        }


class Redis:
    name = "redis"
    proto = "redis"

    def __init__(self, folder, memory_mib):
        self.sock = os.path.join(folder, "r.sock")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", self.sock, "--dir", folder, "--save", "",
             "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory", f"{memory_mib}mb",
             "--maxmemory-policy", "allkeys-lru", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_socket(self.sock, self.proc)

    def stats(self):
        def whole(buf):
            header, _, rest = buf.partition(b"\r\n")
            return header.startswith(b"$") and len(rest) >= int(header[1:])

        _, _, rest = ask(self.sock, b"INFO stats\r\n", whole).partition(b"\r\n")
        info = dict(line.split(":", 1) for line in rest.decode().splitlines() if ":" in line)
        return {"evictions": int(info["evicted_keys"])}


def loadgen_binary():
    return subprocess.run([os.path.join(HERE, "loadgen", "build.sh")], check=True, capture_output=True,
                          text=True).stdout.strip()


def parse_line(line):
    return {k: v for k, v in (item.split("=", 1) for item in line.split() if "=" in item)}


def soak(server, loadgen, args):
    base = [loadgen, "--proto", server.proto, "--socket", server.sock, "--keys", str(args.keys),
            "--value-size", str(args.value_size)]
    log(f"{server.name}: prefilling {args.keys} keys of {args.value_size} B")
    subprocess.run(base + ["--op", "get", "--requests", "1"], check=True, capture_output=True)
    rows = []
    before = server.stats()
    for minute in range(1, args.minutes + 1):
        cpu0 = cpu_seconds(server.proc.pid)
        out = subprocess.run(
            base + ["--op", "mixed", "--set-pct", str(args.set_pct), "--conns", str(args.conns), "--pipeline",
                    str(args.pipeline), "--no-prefill", "--warmup", "0", "--seconds", str(args.seconds_per_round)],
            capture_output=True, text=True)
        if out.returncode not in (0, 3):
            raise SystemExit(f"loadgen failed: {out.stderr}")
        cpu1 = cpu_seconds(server.proc.pid)
        line = parse_line(out.stdout.strip().splitlines()[-1])
        after = server.stats()
        requests = int(line["requests"])
        row = {
            "minute": minute, "rps": float(line["rps"]), "p99_ms": float(line["p99_us"]) / 1000,
            "cpu_us": (cpu1 - cpu0) * 1e6 / max(requests, 1), "rss_mib": rss_mib(server.proc.pid),
            "fds": descriptors(server.proc.pid), "errors": int(line["errors"]),
            "hit_pct": 100 * int(line["hits"]) / max(int(line["hits"]) + int(line["misses"]), 1),
            "evictions": after["evictions"] - before["evictions"],
        }
        if "sets" in after:
            sets = after["sets"] - before["sets"]
            hits = after["diskHits"] - before["diskHits"]
            row["records_per_set"] = (after["records"] - before["records"]) / max(sets, 1)
            row["writebacks_per_disk_hit"] = (after["writeBacks"] - before["writeBacks"]) / max(hits, 1)
            row["disk_entries"] = after["diskEntries"]
        if args.stack_depth:
            row["deepest_stack"] = deepest_stack(server.proc.pid)
        before = after
        rows.append(row)
        log(f"{server.name} minute {minute}: " + " ".join(
            f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items() if k != "minute"))
    return rows


def markdown(name, rows):
    cols = [("minute", "minute", "{}"), ("rps", "ops/s", "{:,.0f}"), ("p99_ms", "p99 ms", "{:.1f}"),
            ("cpu_us", "server CPU µs/req", "{:.1f}"), ("rss_mib", "RSS MiB", "{:.0f}"), ("fds", "fds", "{}"),
            ("hit_pct", "hits %", "{:.1f}"), ("evictions", "evictions", "{:,}"),
            ("records_per_set", "journal records/set", "{:.3f}"),
            ("writebacks_per_disk_hit", "write-backs/disk hit", "{:.4f}"),
            ("deepest_stack", "deepest stack", "{}")]
    cols = [c for c in cols if c[0] in rows[0]]
    lines = [f"{name}:", "", "| " + " | ".join(c[1] for c in cols) + " |",
             "|" + "---:|" * len(cols)]
    for row in rows:
        lines.append("| " + " | ".join(c[2].format(row[c[0]]) for c in cols) + " |")
    second, last = rows[min(1, len(rows) - 1)], rows[-1]
    lines += ["", f"last minute / minute 2: throughput {last['rps'] / second['rps']:.2f}x, "
                  f"CPU per request {last['cpu_us'] / second['cpu_us']:.2f}x", ""]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", choices=["halcyond", "redis", "both"], default="both")
    p.add_argument("--minutes", type=int, default=10)
    p.add_argument("--seconds-per-round", type=float, default=60, help="length of one sampled round (a 'minute')")
    p.add_argument("--keys", type=int, default=200_000)
    p.add_argument("--value-size", type=int, default=4096)
    p.add_argument("--conns", type=int, default=16)
    p.add_argument("--pipeline", type=int, default=8)
    p.add_argument("--set-pct", type=int, default=25)
    p.add_argument("--memory", type=int, default=64, help="memory budget in MiB for both servers")
    p.add_argument("--halcyond", default=os.path.join(ROOT, ".build", "release", "halcyond"))
    p.add_argument("--stack-depth", action="store_true", help="gdb: deepest thread stack at each round's end")
    args = p.parse_args()

    loadgen = loadgen_binary()
    folder = tempfile.mkdtemp(prefix="halcyon-soak-")
    servers = []

    def stop(*_):
        for s in servers:
            if s.proc.poll() is None:
                s.proc.send_signal(signal.SIGTERM)
                try:
                    s.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    s.proc.kill()
        shutil.rmtree(folder, ignore_errors=True)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        print(f"soak: {args.conns} conns x {args.pipeline} in flight, {args.keys} keys of {args.value_size} B, "
              f"{args.set_pct} % sets, memory {args.memory} MiB, {args.minutes} rounds of {args.seconds_per_round:g} s\n")
        kinds = ["halcyond", "redis"] if args.server == "both" else [args.server]
        for kind in kinds:
            sub = os.path.join(folder, kind)
            os.makedirs(sub)
            server = Halcyond(args.halcyond, sub, args.memory) if kind == "halcyond" else Redis(sub, args.memory)
            servers.append(server)
            rows = soak(server, loadgen, args)
            print(markdown(server.name, rows), flush=True)
            server.proc.send_signal(signal.SIGTERM)
            server.proc.wait(timeout=60)
    finally:
        stop()


if __name__ == "__main__":
    main()
