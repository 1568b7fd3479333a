"""Every dashboard query, executed by the real Prometheus against the exporter while it is
fed replayed incidents live (an unclean election that loses committed data, an ISR below
min ISR, a follower stuck in the ISR — tests/data): no query is rejected; every (query,
topic) pair returns data except those ``EXPECTED_EMPTY`` names with a reason; every label
and label value a query names exists; and the key panels show the values the incidents
are known to produce (4000 offsets lost, one unclean election, ISR 3 -> 1 -> 3, ...).

Modelled on tests/prometheus/test_runbook_live.py; the feed (dashboards/feed.py) moves the
incidents' timestamps to the wall clock, twice as fast, so the series move as they did.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from dashboards.generate import expressions, load
from monitor.dev.feed import IncidentFeed, replayed_prometheus
from monitor.dev.panels import Window, expand, label_values_as_promql, query_range
from monitor.dev.processes.prom import PrometheusProcess
from tests.promql import matcher_problems

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(300)]

# Concrete values for the single-valued variables, ".*" for the "All" of the multi ones.
VARS = {"datasource": "prometheus", "cluster": "lab", "broker": ".*"}
PER_TOPIC = {
    "unclean": {"topic": "unclean", "partition": "0"},
    "minisr": {"topic": "minisr", "partition": "0"},
    "stuck": {"topic": "stuck", "partition": "0"},
}


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[PrometheusProcess, IncidentFeed, Window]]:
    with replayed_prometheus(tmp_path_factory.mktemp("prometheus")) as (prom, feed):
        start = time.time()
        assert feed.done.wait(120), "the incidents did not finish playing"
        time.sleep(4)  # the last state is scraped and the rules evaluated
        yield prom, feed, Window(start, time.time(), 1.0)


def _queries() -> list[tuple[str, str, str]]:
    out = []
    for name, d in load().items():
        for where, expr in expressions(d):
            out.append((name, where, expr))
    return out


def _run(prom: PrometheusProcess, win: Window, expr: str, variables: dict[str, str]) -> int:
    if expr.startswith("label_values("):
        expr = label_values_as_promql(expr)
    res = query_range(prom.url, expand(expr, variables, win.step), win.start, win.end, win.step)
    return sum(len(s["values"]) for s in res)


#: (dashboard, where, topic) -> why that query has no data for that topic's incident.
#: Every other (query, topic) pair must return data; these must not (the list stays true).
NO_LOSS = "only the unclean topic has an election, an epoch change or a loss"
NO_REPLICAS = "the under-min-ISR scenario has partition metadata only, no replica LEOs"
EXPECTED_EMPTY = {
    **{
        ("elections-and-data-loss.json", f"panel {panel!r} A", topic): NO_LOSS
        for panel in (
            "Committed offsets lost",
            "Committed offsets lost, by topic",
            "Partitions with a recent election or loss",
            "Last election / loss per partition",
            "Offsets lost by the last loss",
        )
        for topic in ("minisr", "stuck")
    },
    **{
        ("partition-drilldown.json", where, topic): NO_LOSS
        for where in ("panel 'Last loss' A", "annotation 'Leader epoch changes'")
        for topic in ("minisr", "stuck")
    },
    **{
        ("partition-drilldown.json", where, "minisr"): NO_REPLICAS
        for where in (
            'panel "HW and each replica\'s LEO" B',
            "panel 'Follower lag (offsets)' A",
            "panel 'Follower lag (seconds)' A",
        )
    },
}


def test_every_query_executes(live: tuple[PrometheusProcess, IncidentFeed, Window]) -> None:
    """Every (query, topic) pair returns data, except those EXPECTED_EMPTY names; every
    label and label value a query names is one its metric's series carry."""
    prom, _feed, win = live
    failures, seen = [], set()
    for topic, variables in PER_TOPIC.items():
        for name, where, expr in _queries():
            key = (name, where, topic)
            seen.add(key)
            reason = EXPECTED_EMPTY.get(key)
            try:
                n = _run(prom, win, expr, {**VARS, **variables})
            except Exception as e:
                failures.append(f"{name} {where} [{topic}]: {e}")
                continue
            if reason is None and n == 0:
                failures.append(f"{name} {where} [{topic}]: no data")
            if reason is not None and n > 0:
                failures.append(f"{name} {where} [{topic}]: data, but EXPECTED_EMPTY: {reason}")
            if topic == "unclean":  # the labels do not depend on the topic
                q = expand(expr, {**VARS, **variables}, win.step)
                if q.startswith("label_values("):
                    q = label_values_as_promql(q)
                failures += [f"{name} {where}: {p}" for p in matcher_problems(prom, q)]
    stale = set(EXPECTED_EMPTY) - seen
    assert not stale, f"EXPECTED_EMPTY names queries the dashboards no longer have: {stale}"
    assert failures == [], "\n".join(failures)


@pytest.mark.parametrize(
    ("dashboard", "panel", "topic"),
    [
        ("cluster-overview.json", "Under min ISR", "minisr"),
        ("cluster-overview.json", "Unclean elections", "unclean"),
        ("cluster-overview.json", "Committed offsets lost", "unclean"),
        ("elections-and-data-loss.json", "Elections (cumulative)", "unclean"),
        ("elections-and-data-loss.json", "Committed offsets lost, by topic", "unclean"),
        ("elections-and-data-loss.json", "Last election / loss per partition", "unclean"),
        ("partition-drilldown.json", "HW and each replica's LEO", "unclean"),
        ("partition-drilldown.json", "ISR size against min ISR", "minisr"),
        ("partition-drilldown.json", "Follower lag (offsets)", "stuck"),
        ("broker-view.json", "Sole-ISR partitions", "unclean"),
    ],
)
def test_key_panels_return_data(
    live: tuple[PrometheusProcess, IncidentFeed, Window], dashboard: str, panel: str, topic: str
) -> None:
    prom, _feed, win = live
    d = load()[dashboard]
    p = next(p for p in d["panels"] if p.get("title") == panel)
    variables = {**VARS, **PER_TOPIC[topic]}
    for t in p["targets"]:
        assert _run(prom, win, t["expr"], variables) > 0, f"{panel} {t['refId']}: no data"


def _series(
    prom: PrometheusProcess, win: Window, dashboard: str, where: str, topic: str
) -> list[float]:
    """The values over the window of the one series of a panel target or annotation."""
    expr = dict(expressions(load()[dashboard]))[where]
    res = query_range(
        prom.url,
        expand(expr, {**VARS, **PER_TOPIC[topic]}, win.step),
        win.start,
        win.end,
        win.step,
    )
    assert len(res) == 1, f"{dashboard} {where} [{topic}]: {len(res)} series, not 1: {res}"
    return [float(v) for _, v in res[0]["values"]]


#: (dashboard, where, topic) -> (the smallest, the largest, the last) value the incidents
#: give it: the unclean election (one, with one data-loss finding) loses exactly the 4000
#: committed offsets [1000, 5000) and moves the leader epoch 4 -> 5 (offline) -> 6; the
#: minisr partition's ISR (RF 3, min ISR 2) falls to 1 for one round and recovers. The
#: loss and event counters exist from the loss on, so they never show 0.
EXACT = {
    ("cluster-overview.json", "panel 'Committed offsets lost' A", "unclean"): (4000, 4000, 4000),
    ("elections-and-data-loss.json", "panel 'Committed offsets lost, by topic' A", "unclean"): (
        4000,
        4000,
        4000,
    ),
    ("partition-drilldown.json", "panel 'Last loss' A", "unclean"): (4000, 4000, 4000),
    ("cluster-overview.json", "panel 'Unclean elections' A", "unclean"): (1, 1, 1),
    ("elections-and-data-loss.json", "panel 'Data-loss findings' A", "unclean"): (1, 1, 1),
    ("partition-drilldown.json", "panel 'Leader and leader epoch' B", "unclean"): (4, 6, 6),
    ("cluster-overview.json", "panel 'Under min ISR' A", "minisr"): (0, 1, 0),
    ("partition-drilldown.json", "panel 'ISR size against min ISR' A", "minisr"): (1, 3, 3),
    ("partition-drilldown.json", "panel 'ISR size against min ISR' B", "minisr"): (2, 2, 2),
    ("partition-drilldown.json", "panel 'ISR size against min ISR' C", "minisr"): (3, 3, 3),
}


@pytest.mark.parametrize(("dashboard", "where", "topic"), list(EXACT))
def test_panels_show_the_incidents(
    live: tuple[PrometheusProcess, IncidentFeed, Window], dashboard: str, where: str, topic: str
) -> None:
    """Not just 'some data': the values are the incidents' own, exactly."""
    prom, _feed, win = live
    values = _series(prom, win, dashboard, where, topic)
    assert (min(values), max(values), values[-1]) == EXACT[(dashboard, where, topic)], values


def test_epoch_annotation_marks_the_unclean_election(
    live: tuple[PrometheusProcess, IncidentFeed, Window],
) -> None:
    """The epoch annotation marks the unclean election's epoch changes (4 -> 5 -> 6)."""
    prom, _feed, win = live
    values = _series(
        prom, win, "partition-drilldown.json", "annotation 'Leader epoch changes'", "unclean"
    )
    assert values and all(v > 0 for v in values)
