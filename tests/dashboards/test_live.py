"""Every dashboard query, executed by the real Prometheus against the exporter while it is
fed replayed incidents live (an unclean election that loses committed data, an ISR below
min ISR, a follower stuck in the ISR — tests/data): no query is rejected, and the key
panels (under min ISR, data loss, elections, HW against LEO) return data.

Modelled on tests/prometheus/test_runbook_live.py; the feed (dashboards/feed.py) moves the
incidents' timestamps to the wall clock, twice as fast, so the series move as they did.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from dashboards.feed import IncidentFeed, replayed_prometheus
from dashboards.generate import expressions, load
from dashboards.render import Window, expand, label_values_as_promql, query_range
from monitor.ops.prom import PrometheusProcess

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


def test_every_query_executes(live: tuple[PrometheusProcess, IncidentFeed, Window]) -> None:
    prom, _feed, win = live
    failures, with_data, total = [], 0, 0
    for variables in PER_TOPIC.values():
        for name, where, expr in _queries():
            total += 1
            try:
                with_data += _run(prom, win, expr, {**VARS, **variables}) > 0
            except Exception as e:
                failures.append(f"{name} {where}: {e}")
    assert failures == [], "\n".join(failures)
    print(f"{with_data} of {total} (query, topic) pairs returned data")
    assert with_data >= total // 2


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


def test_panels_show_the_incidents(
    live: tuple[PrometheusProcess, IncidentFeed, Window],
) -> None:
    """Not just 'some data': the values are the incidents' own."""
    prom, _feed, win = live
    v = {**VARS, "topic": "minisr", "partition": "0"}
    under = query_range(
        prom.url,
        expand(
            'max_over_time(kafka_replication_open_findings{cluster="$cluster", '
            'kind="under_min_isr"}[5m])',
            v,
        ),
        win.end,
        win.end,
        1,
    )
    assert float(under[0]["values"][-1][1]) >= 1  # the ISR was below min ISR at some point
    v = {**VARS, "topic": "unclean", "partition": "0"}
    lost = query_range(
        prom.url,
        expand(
            'sum(kafka_replication_committed_offsets_lost_total{cluster="$cluster", '
            'topic="$topic"})',
            v,
        ),
        win.end,
        win.end,
        1,
    )
    assert float(lost[0]["values"][-1][1]) > 0
    # The epoch annotation marks the unclean election's new epoch.
    drill = load()["partition-drilldown.json"]
    epoch = next(a for a in drill["annotations"]["list"] if "epoch" in a["name"].lower())
    assert _run(prom, win, epoch["expr"], v) > 0
