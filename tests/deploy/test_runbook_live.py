"""Every PromQL query of the runbook, executed by the real Prometheus against the exporter.

Each alert's section of docs/runbook.md is read while its incident is on: the exporter
serves replayed incidents from tests/data, one cluster per section (named after the
section, e.g. ``cluster="under_min_isr"``), each cut where the section's alert is live
(``under_min_isr_and_recovery`` while the ISR is below min ISR, ``leader_flapping`` while
it flaps, ...) and moved to the wall clock so that "in the last day" queries see it.
Prometheus scrapes every second. The runbook's example labels (``cluster="lab",
topic="orders", partition="0", broker="3"``) become the section's incident's labels.

Then every ```promql block must evaluate without error and return data — except the few
named in ``EXPECTED_EMPTY``, each with its reason, which must really be empty. And every
selector of every query must name a metric that has series (the collector's, absent here,
one its registry has), labels that metric has and label values that exist: a misspelt
label or label value fails this test wherever it is, even in a query expected empty.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from monitor.dev.processes.prom import PrometheusProcess, free_port
from monitor.exporter import MetricsServer, Snapshot
from monitor.model import ClusterModel, Finding
from monitor.query.replay import replay
from tests.promql import matcher_problems

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
RUNBOOK = ROOT / "docs" / "runbook.md"


@dataclass(frozen=True)
class Incident:
    """A section's incident: an events file, cut at ``until_s`` after its first event
    (None: the whole file), and the labels that replace the runbook's examples."""

    scenario: str
    topic: str
    broker: int = 3
    until_s: float | None = None


#: Runbook section -> the incident its queries are read against.
INCIDENTS = {
    "offline": Incident("unclean_election", "unclean", broker=1, until_s=45),  # no leader
    "under_min_isr": Incident("under_min_isr_and_recovery", "minisr", until_s=10),  # ISR [1]
    "log_divergence": Incident("diverged_follower", "diverged", broker=2),
    "unclean_election": Incident("unclean_election", "unclean", broker=2),
    "committed_data_loss": Incident("unclean_election", "unclean", broker=2),
    "hw_regression": Incident("hw_regression", "hwreg"),
    # the truncated replica's LEO is below the HW until it catches up, 3 s in
    "truncation_below_hw": Incident("seed1_hw_truncation", "seed1", broker=1, until_s=3),
    "at_min_isr": Incident("follower_stuck_in_isr", "stuck"),
    "under_replicated": Incident("follower_stuck_in_isr", "stuck"),
    "isr_shrink": Incident("follower_stuck_in_isr", "stuck"),
    "follower_lag": Incident("follower_stuck_in_isr", "stuck"),
    "hw_lag": Incident("follower_stuck_in_isr", "stuck", until_s=55),  # before the shrink
    "stale_telemetry": Incident("broker_goes_silent", "silent"),
    "leader_flapping": Incident("leader_flapping", "flap", broker=1, until_s=130),
    "epoch_regression": Incident("epoch_regression", "recreated", broker=2),
    "election_unverified": Incident("election_without_evidence", "unknown", broker=3),
    "telemetry_inconsistent": Incident("impossible_samples_held", "spiky", broker=1),
    "unclean_election_counted": Incident("controller_counts_unclean_election", "counted", 1),
    "durability_risk": Incident("durability_misconfigurations", "minisr1"),
}

#: (section, query as in the runbook) -> why it returns nothing here. Every other query
#: must return data; these must not (the list stays true).
COLLECTOR = "no collector runs in this test: its /metrics target is a closed port"
EXPECTED_EMPTY = {
    ("stale_telemetry", "kafka_replication_collector_broker_up"): COLLECTOR,
    ("stale_telemetry", "increase(kafka_replication_collector_errors_total[10m])"): COLLECTOR,
    ("monitor_behind", "rate(kafka_replication_collector_events_produced_total[5m])"): COLLECTOR,
    ("collector_down", "time() - kafka_replication_collector_last_round_timestamp_seconds"): (
        COLLECTOR
    ),
    ("collector_down", "increase(kafka_replication_collector_errors_total[10m])"): COLLECTOR,
    ("collector_down", "kafka_replication_collector_round_duration_seconds"): COLLECTOR,
    ("collector_down", "kafka_replication_collector_broker_up"): COLLECTOR,
    ("election_unverified", "kafka_replication_collector_errors_total"): COLLECTOR,
    ("telemetry_inconsistent", "kafka_replication_collector_errors_total"): COLLECTOR,
    **{
        ("under_min_isr", q): "the under-min-ISR scenario has partition metadata only: no "
        "replica LEOs (so no follower lag)"
        for q in (
            'kafka_replication_follower_lag_seconds{cluster="lab", topic="orders", partition="0"}',
            'kafka_replication_follower_lag_offsets{cluster="lab", topic="orders", partition="0"}',
        )
    },
    (
        "durability_risk",
        "kafka_replication_partition_min_isr >= on (cluster, topic, partition) "
        "kafka_replication_partition_replicas",
    ): "the durability scenario has topic configs only, no partition telemetry; no "
    "partition of the other incidents has min ISR >= RF",
    ("durability_risk", "kafka_replication_partition_replicas == 1"): (
        "no replayed partition has RF 1 (the durability scenario's rf1 topic has no "
        "partition telemetry)"
    ),
}


def runbook_queries() -> list[tuple[str, str]]:
    """(section, query) of each ```promql block, comment lines dropped."""
    out: list[tuple[str, str]] = []
    section = ""
    text = RUNBOOK.read_text()
    for m in re.finditer(r"^## (.+?)$|^```promql\n(.*?)```", text, flags=re.S | re.M):
        if m.group(1) is not None:
            section = m.group(1).strip()
            continue
        lines = [ln for ln in m.group(2).splitlines() if ln.strip() and not ln.startswith("#")]
        if lines:
            out.append((section, "\n".join(lines)))
    return out


def concrete(section: str, query: str) -> str:
    """The query with the runbook's example labels replaced by the section's incident's."""
    incident = INCIDENTS.get(section)
    if incident is None:
        return query
    return (
        query.replace('cluster="lab"', f'cluster="{section}"')
        .replace('topic="orders"', f'topic="{incident.topic}"')
        .replace('broker="3"', f'broker="{incident.broker}"')
    )


def _events(section: str, incident: Incident, end_ms: int) -> list[str]:
    """The incident's events as cluster ``section``, cut at ``until_s`` and moved so that
    the cut lands at ``end_ms``."""
    lines = (DATA / f"{incident.scenario}.jsonl").read_text().splitlines()
    events = [json.loads(ln) for ln in lines if ln.strip()]
    t0 = min(e["observed_at"] for e in events)
    cut = t0 + incident.until_s * 1000 if incident.until_s is not None else None
    if cut is not None:
        events = [e for e in events if e["observed_at"] <= cut]
    last = cut if cut is not None else max(e["observed_at"] for e in events)
    for e in events:
        e["cluster"] = section
        e["observed_at"] = end_ms - int(last - e["observed_at"])
    return [json.dumps(e) for e in events]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    snap = Snapshot()
    end_ms = int(time.time() * 1000) - 2000
    for section, incident in INCIDENTS.items():
        model, found = ClusterModel(), list[Finding]()
        stats = replay(_events(section, incident, end_ms), model, found.append, lambda n, r: None)
        assert stats.rejected == 0, f"{section}: {stats.summary()}"
        snap.update_from_model(model)
        snap.record_findings(found)
        snap.health.events_processed += stats.accepted
    snap.health.running = True
    snap.health.last_batch_at = time.time()
    snap.health.input_lag_records = 0
    port = free_port()
    server = MetricsServer(snap, port=port, per_partition="all")
    # partitions_capped: a second job's exporter (another cluster's monitor) whose limit
    # is one partition, with three under min ISR: two are past the limit.
    capped, capped_port, model = Snapshot(), free_port(), ClusterModel()
    for topic in ("orders", "payments", "audit"):
        inc = Incident("under_min_isr_and_recovery", topic, until_s=10)
        lines = [
            ln.replace('"topic": "minisr"', f'"topic": "{topic}"')
            for ln in _events("partitions_capped", inc, end_ms)
        ]
        replay(lines, model, lambda f: None, lambda n, r: None)
    capped.update_from_model(model)
    capped.health.running = True
    second = MetricsServer(capped, port=capped_port, max_partitions=1)
    second.start()
    prom = PrometheusProcess(
        tmp_path_factory.mktemp("prometheus"),
        # Both exporters in the monitor's scrape job (the file names one target; this
        # string substitution makes it two).
        exporter=f'127.0.0.1:{port}", "127.0.0.1:{capped_port}',
        # No collector here: a closed port, not the default one (another run's collector
        # may be listening there).
        collector=f"127.0.0.1:{free_port()}",
        alertmanager=f"127.0.0.1:{free_port()}",
        scrape_interval="1s",
        evaluation_interval="1s",
    )
    server.start()
    try:
        prom.start()
        # Three samples of the exporter, so that rate()/increase()/deriv() have a window.
        deadline = time.monotonic() + 60
        while not prom.query("count_over_time(kafka_replication_monitor_up[1m]) >= 3"):
            assert time.monotonic() < deadline, "Prometheus did not scrape the exporter 3 times"
            time.sleep(0.5)
        yield prom
    finally:
        prom.stop()
        server.stop()
        second.stop()


def test_runbook_has_queries() -> None:
    queries = runbook_queries()
    assert len(queries) >= 20
    sections = {s for s, _ in queries}
    assert set(INCIDENTS) <= sections, f"no such runbook sections: {set(INCIDENTS) - sections}"
    stale = set(EXPECTED_EMPTY) - set(queries)
    assert not stale, f"EXPECTED_EMPTY names queries the runbook no longer has: {stale}"


def test_every_runbook_query_executes(prometheus: PrometheusProcess) -> None:
    """No runbook query is rejected by Prometheus; each returns data for its section's
    incident, except those of EXPECTED_EMPTY; every label and label value a query names
    is one the metric's series carry."""
    failures: list[str] = []
    for section, query in runbook_queries():
        q = concrete(section, query)
        where = f"[{section}] {q!r}"
        try:
            result = prometheus.query(q)
        except Exception as e:
            failures.append(f"{where}: {e}")
            continue
        reason = EXPECTED_EMPTY.get((section, query))
        if reason is None and not result:
            failures.append(f"{where}: no data")
        if reason is not None and result:
            failures.append(f"{where}: returns data, but EXPECTED_EMPTY says {reason!r}")
        failures += [f"{where}: {p}" for p in matcher_problems(prometheus, q)]
    assert failures == [], "\n".join(failures)
