"""A bounded /metrics: per-partition series for at most ``max_partitions`` partitions,
chosen by severity then age and sticky; the rest counted per topic; the lock held only to
copy the snapshot. (Figures: bench/exporter_bench.py, docs/benchmarks.md.)"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.contract.state import OpenFinding, PartitionView, ReplicaRow
from monitor.exporter import ReplicationCollector, Snapshot
from monitor.exporter.driver import apply_global_conditions
from monitor.model import Finding, FindingKind, FindingState, Severity

NOW_S = 1_800_000_000.0
NOW_MS = int(NOW_S * 1000)
W, C = Severity.WARNING, Severity.CRITICAL


def _view(topic: str, partition: int, *opens: tuple[str, Severity, int]) -> PartitionView:
    """A partition led by broker 1 (RF 3, ISR {1}) with open conditions (kind, severity,
    opened seconds before now)."""
    return PartitionView(
        "lab", topic, partition, 1, 4, (1,), (1, 2, 3), 500, 500, 500, 0, 0, 2, False,
        tuple(ReplicaRow(b, 500, 0, 0, NOW_MS, NOW_MS, b == 1) for b in (1, 2, 3)),
        tuple(OpenFinding(k, s, NOW_MS - ago * 1000, None, {}) for k, s, ago in opens),
        max((s for _, s, _ in opens), default=Severity.INFO), (), 0, 0, NOW_MS,
    )  # fmt: skip


def _snap(*views: PartitionView) -> Snapshot:
    snap = Snapshot(clock=lambda: NOW_S)
    snap.update_partitions(views)
    snap.health.running = True
    return snap


def _families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        out.setdefault(fam.name, [])
        for s in fam.samples:
            out[fam.name].append((s.labels, s.value))
    return out


class Scraper:
    def __init__(self, snap: Snapshot, max_partitions: int, per_partition: str = "findings"):
        self.collector = ReplicationCollector(
            snap,
            per_partition,  # type: ignore[arg-type]
            clock=lambda: NOW_S,
            max_partitions=max_partitions,
        )

    def scrape(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        return _families(self.collector.render().decode())

    def exported(self) -> set[str]:
        """``topic/partition`` of the partitions with per-partition series."""
        fams = self.scrape()
        return {
            f"{lbl['topic']}/{lbl['partition']}"
            for name in (
                "kafka_replication_finding_open_since_timestamp_seconds",
                "kafka_replication_finding_last_detected_timestamp_seconds",
                "kafka_replication_partition_isr_size",
            )
            for lbl, _ in fams.get(name, [])
            if lbl.get("partition")
        }


def _capped(fams: dict[str, list[tuple[dict[str, str], float]]]) -> dict[tuple[str, ...], float]:
    return {
        (lbl["topic"], lbl["kind"], lbl["severity"]): v
        for lbl, v in fams["kafka_replication_partitions_capped"]
    }


def test_the_limit_keeps_the_most_severe_then_the_oldest_and_counts_the_rest() -> None:
    snap = _snap(
        _view("a", 0, ("under_replicated", W, 9000)),  # the oldest, but a warning
        _view("a", 1, ("offline", C, 100)),
        _view("a", 2, ("under_min_isr", C, 300)),
        _view("b", 0, ("under_min_isr", C, 200)),
        _view("b", 1, ("under_min_isr", C, 50), ("stale_telemetry", W, 40)),
    )
    s = Scraper(snap, max_partitions=3)
    fams = s.scrape()
    assert s.exported() == {"a/2", "b/0", "a/1"}
    assert _capped(fams) == {
        ("a", "under_replicated", "warning"): 1,
        ("b", "under_min_isr", "critical"): 1,
        ("b", "stale_telemetry", "warning"): 1,
    }
    assert fams["kafka_replication_partitions_exported"] == [({"cluster": "lab"}, 3.0)]
    assert fams["kafka_replication_monitor_partition_series_limit"] == [({}, 3.0)]
    # The aggregates still count every partition.
    opens = {lbl["kind"]: v for lbl, v in fams["kafka_replication_open_findings"] if v}
    assert opens == {"under_replicated": 1, "offline": 1, "under_min_isr": 3, "stale_telemetry": 1}


def test_the_set_is_sticky_while_its_partitions_stay_in_trouble() -> None:
    """A partition with series keeps them while it is in trouble: an older critical
    partition arriving later does not take its place (its page would resolve and fire
    again); it gets a place when one frees up."""
    a0, a1 = _view("a", 0, ("under_min_isr", C, 100)), _view("a", 1, ("under_min_isr", C, 200))
    snap = _snap(a0, a1)
    s = Scraper(snap, max_partitions=2)
    assert s.exported() == {"a/0", "a/1"}
    older = _view("b", 0, ("under_min_isr", C, 5000))
    snap.update_partitions([older])
    for _ in range(3):
        assert s.exported() == {"a/0", "a/1"}
    assert _capped(s.scrape()) == {("b", "under_min_isr", "critical"): 1}
    snap.update_partitions([_view("a", 0)])  # a/0 recovers: its place goes to b/0
    assert s.exported() == {"a/1", "b/0"}
    assert _capped(s.scrape()) == {}


def test_a_more_severe_partition_takes_the_place_of_a_less_severe_one() -> None:
    """Severity before stickiness: a new critical partition displaces the youngest
    warning one (a ticket's series, not a page's); a critical one is never displaced."""
    snap = _snap(
        _view("a", 0, ("at_min_isr", W, 500)),
        _view("a", 1, ("at_min_isr", W, 100)),
    )
    s = Scraper(snap, max_partitions=2)
    assert s.exported() == {"a/0", "a/1"}
    snap.update_partitions([_view("b", 0, ("offline", C, 10))])
    assert s.exported() == {"a/0", "b/0"}
    assert _capped(s.scrape()) == {("a", "at_min_isr", "warning"): 1}
    snap.update_partitions([_view("b", 1, ("offline", C, 10))])
    assert s.exported() == {"b/0", "b/1"}
    snap.update_partitions([_view("c", 0, ("offline", C, 99_999))])
    assert s.exported() == {"b/0", "b/1"}


def _event(kind: FindingKind, topic: str, partition: int, ago_s: int) -> Finding:
    at = NOW_MS - ago_s * 1000
    sev = Severity.CRITICAL if kind != FindingKind.LEADER_ELECTION else Severity.INFO
    return Finding(kind, FindingState.EVENT, sev, "lab", topic, partition, at, at, None, {})


def test_a_loss_in_the_alert_window_ranks_as_critical_and_is_counted_past_the_limit() -> None:
    """A one-off finding detected in the last 15 minutes ranks by its severity and, past
    the limit, is counted (the roll-up alert pages on it); an older one ranks as info."""
    snap = _snap(_view("a", 0, ("under_replicated", W, 50)))
    snap.record_findings([_event(FindingKind.LEADER_ELECTION, "b", 0, 10)], NOW_MS - 10_000)
    snap.record_findings([_event(FindingKind.COMMITTED_DATA_LOSS, "c", 0, 10)], NOW_MS - 5_000)
    s = Scraper(snap, max_partitions=1)
    assert s.exported() == {"c/0"}
    warning, election = ("a", "under_replicated", "warning"), ("b", "leader_election", "info")
    assert _capped(s.scrape()) == {warning: 1, election: 1}
    s0 = Scraper(snap, max_partitions=0)
    assert _capped(s0.scrape()) == {
        warning: 1,
        election: 1,
        ("c", "committed_data_loss", "critical"): 1,
    }
    # 20 minutes later the loss no longer pages: it ranks as info, and is not counted.
    later = ReplicationCollector(snap, clock=lambda: NOW_S + 1200, max_partitions=0)
    assert _capped(_families(later.render().decode())) == {warning: 1}


def test_staleness_is_rolled_up_per_broker_and_topic() -> None:
    views = [_view("a", p, ("stale_telemetry", W, 100)) for p in range(5)]
    views.append(_view("b", 0, ("stale_telemetry", W, 100)))
    fams = Scraper(_snap(*views), max_partitions=2).scrape()
    brokers = {lbl["broker"]: v for lbl, v in fams["kafka_replication_broker_stale_partitions"]}
    assert brokers == {"1": 6.0, "2": 0.0, "3": 0.0}  # all led by broker 1
    topics = {
        lbl["topic"]: v
        for lbl, v in fams["kafka_replication_topic_open_findings"]
        if lbl["kind"] == "stale_telemetry"
    }
    assert topics == {"a": 5.0, "b": 1.0}


def test_every_broker_with_replicas_has_broker_up() -> None:
    """``broker_up`` for each broker holding replicas: 1 while it has never been silent
    (the job hears of a silent broker only from its ``stale_telemetry``), 0 while that is
    open -- found by the stranger's test: with no broker ever silent there was no series,
    and the dashboards' and the offline alert's "brokers up" read nothing."""
    snap = _snap(_view("a", 0))
    silent = {"cluster": "lab", "kind": "stale_telemetry", "severity": "warning", "at": 5,
              "opened_at": 5, "state": "open", "topic": None, "partition": None, "broker": 3,
              "details": {"alive": False}}  # fmt: skip
    apply_global_conditions(snap, [Finding.from_dict(silent)])
    fams = Scraper(snap, max_partitions=10).scrape()
    up = {lbl["broker"]: v for lbl, v in fams["kafka_replication_broker_up"]}
    assert up == {"1": 1.0, "2": 1.0, "3": 0.0}


def test_the_series_of_a_storm_are_bounded() -> None:
    """2,000 partitions all stale and under min ISR, a limit of 100: per-partition label
    sets for 100 partitions, the rest counted."""
    views = [
        _view(f"t{p % 20}", p, ("stale_telemetry", W, p), ("under_min_isr", C, p + 5))
        for p in range(2000)
    ]
    s = Scraper(_snap(*views), max_partitions=100)
    fams = s.scrape()
    assert len(s.exported()) == 100
    assert sum(_capped(fams).values()) == 2 * 1900
    per_partition = {
        (lbl["topic"], lbl["partition"])
        for samples in fams.values()
        for lbl, _ in samples
        if lbl.get("partition")
    }
    assert len(per_partition) == 100
    # the oldest under_min_isr first
    assert {p for _, p in per_partition} == {str(p) for p in range(1900, 2000)}


def test_per_partition_none_renders_only_the_alerts_series() -> None:
    snap = _snap(_view("a", 0, ("under_min_isr", C, 10)))
    fams = Scraper(snap, max_partitions=10, per_partition="none").scrape()
    assert fams["kafka_replication_finding_open_since_timestamp_seconds"]
    assert fams["kafka_replication_partition_isr_size"] == []


class _WatchedLock:
    """The snapshot's lock, recording whether it is held."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.held = False
        self.takes = 0

    def __enter__(self) -> None:
        self._lock.acquire()
        self.held = True
        self.takes += 1

    def __exit__(self, *exc: object) -> None:
        self.held = False
        self._lock.release()


def test_a_scrape_renders_outside_the_snapshot_lock() -> None:
    """The lock is taken once, for the copy; every family is built without it (a batch
    hook is never blocked by a render)."""
    snap = _snap(*(_view("a", p, ("under_min_isr", C, 10)) for p in range(50)))
    lock = _WatchedLock()
    snap.lock = lock  # type: ignore[assignment]
    collector = ReplicationCollector(snap, clock=lambda: NOW_S)
    held_while_building: list[bool] = []
    build = collector._families

    def watched(*args: object) -> object:
        held_while_building.append(lock.held)
        return build(*args)  # type: ignore[arg-type]

    collector._families = watched  # type: ignore[method-assign]
    collector.render()
    assert held_while_building == [False]
    assert lock.takes == 1


@pytest.mark.prometheus
def test_the_page_is_valid_exposition(promtool: str) -> None:
    """promtool lints the rendered page (format, help texts, counter names)."""
    views: Iterable[PartitionView] = [
        _view('we"ird\\topic', 0, ("under_min_isr", C, 10)),
        _view("a", 1, ("follower_lag", W, 10)),
    ]
    snap = _snap(*views)
    snap.record_findings([_event(FindingKind.COMMITTED_DATA_LOSS, "a", 1, 10)])
    page = ReplicationCollector(snap, clock=lambda: NOW_S, max_partitions=1).render()
    out = subprocess.run(
        [promtool, "check", "metrics"], input=page, capture_output=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    fams = _families(page.decode())
    assert {lbl["topic"] for lbl, _ in fams["kafka_replication_topic_open_findings"]} == {
        'we"ird\\topic',
        "a",
    }
