#!/usr/bin/env python3
"""Per-cell ratios of a halcyond build to its baseline from compare.sh's raw runs.

usage: Benchmarks/baseline_ratios.py REPORT.md [REPORT.md ...]

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
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from typing import Dict, List, Tuple

Cell = Tuple[str, int, int, int]


def runs(path: str) -> Dict[Tuple[Cell, str], List[Tuple[float, float]]]:
    """(cell, server) -> [(requests/s, CPU µs per request)] in the order they ran."""
    out: Dict[Tuple[Cell, str], List[Tuple[float, float]]] = defaultdict(list)
    with open(path, encoding="utf-8") as f:
        for line in f:
            start = line.find("proto=")
            if start < 0:
                continue
            fields = dict(x.split("=", 1) for x in line[start:].split() if "=" in x)
            if "server" not in fields or "server_cpu_us" not in fields:
                continue
            cell = (fields["op"], int(fields["conns"]), int(fields["pipeline"]), int(fields["value"]))
            out[(cell, fields["server"])].append((float(fields["rps"]), float(fields["server_cpu_us"])))
    return out


def main(paths: List[str]) -> int:
    if not paths:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    new: Dict[Cell, List[Tuple[float, float]]] = defaultdict(list)
    base: Dict[Cell, List[Tuple[float, float]]] = defaultdict(list)
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
        rps_of_medians = med(r for r, _ in new[cell]) / med(r for r, _ in base[cell])
        cpu_of_medians = med(c for _, c in new[cell]) / med(c for _, c in base[cell])
        ratios = [r for r, _ in pairs[cell]]
        q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [min(ratios), 0, max(ratios)]
        print(f"| {op} {conns}×{pipeline} {value} B | {len(ratios)} | {rps_of_medians:.3f} | {med(ratios):.3f} | "
              f"{q[0]:.3f}–{q[2]:.3f} | {cpu_of_medians:.3f} | {med(c for _, c in pairs[cell]):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
