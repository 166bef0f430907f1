#!/usr/bin/env python3
"""Per-cell ratios of a halcyond build to its baseline, or to its peers, from compare.sh's raw runs.

usage: Benchmarks/baseline_ratios.py REPORT.md [REPORT.md ...]
       Benchmarks/baseline_ratios.py --peers RAW [CELL ...]

Reads the `proto=… server=…` lines compare.sh keeps in each report (or its log) and, for
every cell (op, conns, pipeline, value) that ran both `halcyon` and `halcyonb`, prints:

- the ratio of the two medians (what compare.sh's tables show), for requests/s and for
  server CPU per request;
- the median of the paired ratios: run i of the build over run i of the baseline. compare.sh
  runs the two within seconds of each other in every repeat, so a pair shares the machine's
  state of the moment (other tenants of the host, frequency), and the paired median moves
  less from run to run than the ratio of medians does;
- the interquartile range of the paired requests/s ratios, the spread a single pair has.

Several reports are pooled: their runs are paired within each report and the pairs put
together.

--peers: for the cells named (`op conns pipeline`, value 100 B; every cell with a peer when
none is named), in that order, the paired ratios of `halcyon` to Redis (`redisaof` where the
cell ran it, else `redis`) and to memcached: run i of halcyond over run i of the peer, which
ran in the same repeat, medians over the repeats, for server CPU per request, requests/s
and p99 latency. The machine's speed moves between phases of a run; a pair shares its
phase, where the medians of two servers may come from different ones. compare.sh writes
this table under its floor section.
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from typing import Dict, List, Tuple

Cell = Tuple[str, int, int, int]


Run = Tuple[float, float, float]


def runs(path: str) -> Dict[Tuple[Cell, str], List[Run]]:
    """(cell, server) -> [(requests/s, CPU µs per request, p99 µs)] in the order they ran."""
    out: Dict[Tuple[Cell, str], List[Run]] = defaultdict(list)
    with open(path, encoding="utf-8") as f:
        for line in f:
            start = line.find("proto=")
            if start < 0:
                continue
            fields = dict(x.split("=", 1) for x in line[start:].split() if "=" in x)
            if "server" not in fields or "server_cpu_us" not in fields:
                continue
            cell = (fields["op"], int(fields["conns"]), int(fields["pipeline"]), int(fields["value"]))
            out[(cell, fields["server"])].append(
                (float(fields["rps"]), float(fields["server_cpu_us"]), float(fields.get("p99_us", "nan"))))
    return out


def peers(path: str, names: List[str]) -> int:
    """The --peers table (see the module's doc)."""
    found = runs(path)
    med = statistics.median
    if names:
        cells = [(n.split()[0], int(n.split()[1]), int(n.split()[2]), 100) for n in names]
    else:
        cells = sorted({cell for cell, server in found if server == "halcyon"})
    print("| op | load | repeats | CPU/redis | rate/redis | p99/redis | CPU/memcached | rate/memcached |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    shown = 0
    for cell in cells:
        ours = found.get((cell, "halcyon"), [])
        redis = found.get((cell, "redisaof")) or found.get((cell, "redis"), [])
        memcached = found.get((cell, "memcached"), [])
        if not ours or not redis:
            continue

        def paired(other: List[Run], field: int) -> str:
            if not other:
                return "–"
            return f"{med(a[field] / b[field] for a, b in zip(ours, other)):.2f}"

        op, conns, pipeline, _ = cell
        label = "9 get : 1 set" if op == "mixed" else op
        print(f"| {label} | {conns}×{pipeline} | {min(len(ours), len(redis))} | {paired(redis, 1)} | "
              f"{paired(redis, 0)} | {paired(redis, 2)} | {paired(memcached, 1)} | {paired(memcached, 0)} |")
        shown += 1
    return 0 if shown else 1


def main(paths: List[str]) -> int:
    if paths[:1] == ["--peers"] and len(paths) >= 2:
        return peers(paths[1], paths[2:])
    if not paths:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    new: Dict[Cell, List[Run]] = defaultdict(list)
    base: Dict[Cell, List[Run]] = defaultdict(list)
    pairs: Dict[Cell, List[Tuple[float, float]]] = defaultdict(list)
    for path in paths:
        found = runs(path)
        for (cell, server), values in found.items():
            if server != "halcyon" or (cell, "halcyonb") not in found:
                continue
            other = found[(cell, "halcyonb")]
            new[cell] += values
            base[cell] += other
            pairs[cell] += [(a[0] / b[0], a[1] / b[1]) for a, b in zip(values, other)]
    if not pairs:
        print("no cell ran both halcyon and halcyonb", file=sys.stderr)
        return 1
    print("| cell | pairs | new/base rps, medians | new/base rps, paired | paired IQR | "
          "new/base CPU, medians | new/base CPU, paired |")
    print("|---|---:|---:|---:|---|---:|---:|")
    for cell in sorted(pairs):
        op, conns, pipeline, value = cell
        med = statistics.median
        rps_of_medians = med(r for r, _, _ in new[cell]) / med(r for r, _, _ in base[cell])
        cpu_of_medians = med(c for _, c, _ in new[cell]) / med(c for _, c, _ in base[cell])
        ratios = [r for r, _ in pairs[cell]]
        q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [min(ratios), 0, max(ratios)]
        print(f"| {op} {conns}×{pipeline} {value} B | {len(ratios)} | {rps_of_medians:.3f} | {med(ratios):.3f} | "
              f"{q[0]:.3f}–{q[2]:.3f} | {cpu_of_medians:.3f} | {med(c for _, c in pairs[cell]):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
