"""The Grafana dashboard (Packaging/grafana/halcyon-dashboard.json) against a running
daemon: every metric name its panels' PromQL uses, and every label value it matches
exactly, must be one that `halcyon metrics` prints, so the dashboard cannot drift from the
daemon. The daemon runs with ``--upstream`` on a real ``redis-server``, so the upstream
series are printed too."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Dict, List, Set, Tuple

from conftest import REPO, Daemon
from test_upstream import wait_until

DASHBOARD = REPO / "Packaging" / "grafana" / "halcyon-dashboard.json"

#: PromQL's keywords and the aggregation modifiers: words that are not metric names.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
            "offset", "inf", "nan"}
#: Labels Prometheus adds when it scrapes (the daemon does not print them).
SCRAPE_LABELS = {"instance", "job"}


def expressions(dashboard: Dict[str, object]) -> List[Tuple[str, str]]:
    """(panel title, expr) of every target of every panel, rows' panels included."""
    found: List[Tuple[str, str]] = []

    def walk(panels: List[Dict[str, object]]) -> None:
        for panel in panels:
            for target in panel.get("targets", []):  # type: ignore[attr-defined]
                found.append((str(panel.get("title")), target["expr"]))
            walk(panel.get("panels", []))  # type: ignore[arg-type]
    walk(dashboard["panels"])  # type: ignore[arg-type]
    return found


def metric_names(expr: str) -> Tuple[Set[str], List[Tuple[str, str, str]]]:
    """The metric names an expression reads, and its exact label matchers as (metric,
    label, value). Strings, label matchers, range selectors, grouping lists and function
    names are not metric names."""
    matchers: List[Tuple[str, str, str]] = []
    for metric, body in re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}", expr):
        for label, op, value in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"', body):
            if op == "=" and label not in SCRAPE_LABELS:
                matchers.append((metric, label, value))
    stripped = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    stripped = re.sub(r"\{[^}]*\}", " ", stripped)
    stripped = re.sub(r"\[[^\]]*\]", " ", stripped)
    stripped = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", stripped)
    names = set()
    for match in re.finditer(r"(?<![A-Za-z0-9_:.$])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?", stripped):
        word, call = match.group(1), match.group(2)
        if call or word.lower() in KEYWORDS:
            continue
        names.add(word)
    return names, matchers


def printed_series(text: str) -> Dict[str, Set[Tuple[str, str]]]:
    """Sample name → the (label, value) pairs seen on it, from the exposition text."""
    series: Dict[str, Set[Tuple[str, str]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{([^}]*)\})?\s", line)
        assert match, f"unreadable exposition line: {line!r}"
        pairs = set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', match.group(3) or ""))
        series.setdefault(match.group(1), set()).update(pairs)
    return series


def test_the_name_extraction_sees_what_a_query_reads() -> None:
    names, matchers = metric_names(
        'histogram_quantile(0.99, sum by (le, method) (rate(a_bucket{instance=~"$i",tier="memory"}[$__rate_interval])))'
        ' / on(instance) group_left sum without (x) (b_total offset 5m) + 1 - c > bool 0')
    assert names == {"a_bucket", "b_total", "c"}
    assert matchers == [("a_bucket", "tier", "memory")]


def test_every_metric_the_dashboard_reads_is_one_the_daemon_prints(
        upstream_host: Tuple[Daemon, object], halcyon_bin: str) -> None:
    daemon, _ = upstream_host
    dashboard = json.loads(DASHBOARD.read_text())

    def scrape() -> Dict[str, Set[Tuple[str, str]]]:
        done = subprocess.run([halcyon_bin, "--socket", daemon.socket, "metrics"], capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr
        series = printed_series(done.stdout.decode())
        return series if "halcyon_upstream_up" in series else {}
    # The upstream's series come once the daemon has sampled its upstream.
    printed = wait_until("the upstream's series in halcyon metrics", scrape, 20)
    queries = expressions(dashboard)
    assert len(queries) >= 20
    unknown = []
    for title, expr in queries:
        names, matchers = metric_names(expr)
        assert names, f"{title}: no metric in {expr}"
        unknown += [f"{title}: {name}" for name in sorted(names) if name not in printed]
        unknown += [f"{title}: {metric}{{{label}=\"{value}\"}}" for metric, label, value in matchers
                    if (label, value) not in printed.get(metric, set())]
    assert unknown == [], "the dashboard reads series the daemon does not print:\n" + "\n".join(unknown)


def test_the_dashboard_covers_what_an_operator_watches() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "halcyon-overview"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    text = " ".join(expr for _, expr in expressions(dashboard))
    for needed in ["halcyon_request_duration_seconds_count", "halcyon_request_duration_seconds_bucket",
                   "halcyon_cache_hits_total", "halcyon_cache_misses_total", "halcyon_cache_bytes",
                   "halcyon_cache_limit_bytes", "halcyon_cache_evictions_total", "halcyon_journal_unwritten_bytes",
                   "halcyon_write_backlog", "halcyon_upstream_up"]:
        assert needed in text, needed
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
