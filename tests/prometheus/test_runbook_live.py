"""Every PromQL query of the runbook, executed by the real Prometheus against the exporter.

The exporter serves the state of replayed incidents (an unclean election, a follower stuck
in the ISR, an ISR below min ISR); Prometheus scrapes it every second; each ```promql block
of docs/runbook.md must then evaluate without error, and the ones about those incidents
must return data.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.exporter import MetricsServer, Snapshot
from monitor.model import ClusterModel, Finding
from monitor.ops.prom import PrometheusProcess, free_port
from monitor.replay import replay

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ["unclean_election", "follower_stuck_in_isr", "under_min_isr_and_recovery"]


def runbook_queries() -> list[str]:
    text = (ROOT / "docs" / "runbook.md").read_text()
    blocks = re.findall(r"```promql\n(.*?)```", text, flags=re.S)
    queries = []
    for block in blocks:
        lines = [ln for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]
        if lines:
            queries.append("\n".join(lines))
    return queries


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    model, snap, found = ClusterModel(), Snapshot(event_retention_s=10**10), []
    for name in SCENARIOS:
        path = ROOT / "tests" / "data" / f"{name}.jsonl"
        fs: list[Finding] = []
        replay(path.read_bytes().splitlines(), model, fs.append, lambda n, r: None)
        found += fs
    snap.update_from_model(model)
    snap.record_findings(found)
    snap.health.running = True
    port = free_port()
    server = MetricsServer(snap, port=port, per_partition="all")
    prom = PrometheusProcess(
        tmp_path_factory.mktemp("prometheus"),
        exporter=f"127.0.0.1:{port}",
        scrape_interval="1s",
        evaluation_interval="1s",
    )
    server.start()
    try:
        prom.start()
        deadline = time.monotonic() + 60
        while not prom.query('kafka_replication_partitions{cluster="lab"}'):
            assert time.monotonic() < deadline, "Prometheus never scraped the exporter"
            time.sleep(0.5)
        time.sleep(3)  # a few samples, so rate()/increase() windows have data
        yield prom
    finally:
        prom.stop()
        server.stop()


def test_runbook_has_queries() -> None:
    assert len(runbook_queries()) >= 20


def test_every_runbook_query_executes(prometheus: PrometheusProcess) -> None:
    """No runbook query is rejected by Prometheus; most return data for the incidents."""
    failures, with_data = [], 0
    queries = runbook_queries()
    for q in queries:
        try:
            if prometheus.query(q):
                with_data += 1
        except Exception as e:
            failures.append(f"{q!r}: {e}")
    assert failures == [], "\n".join(failures)
    print(f"{with_data} of {len(queries)} runbook queries returned data")
    assert with_data >= len(queries) // 4
