"""The exporter: families built from the state at scrape time, names as documented."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from monitor.dev.testing import T0, Timeline
from monitor.exporter import MetricsServer, ReplicationCollector, Snapshot
from monitor.model import ClusterModel, Finding
from monitor.query.replay import replay

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _scrape(snap: Snapshot, per_partition: str = "findings", now: float | None = None) -> str:
    clock = (lambda: now) if now is not None else (lambda: NOW_S)
    collector = ReplicationCollector(snap, per_partition, clock=clock)  # type: ignore[arg-type]
    return collector.render().decode()


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


#: The tests' wall clock (seconds): ten minutes after the scenarios start. The in-process
#: monitor detects the replayed findings then, and scrapes default to it.
NOW_S = T0 / 1000 + 600


def _load(*files: str) -> tuple[ClusterModel, Snapshot]:
    model, found = ClusterModel(), []
    snap = Snapshot(event_retention_s=10**9, clock=lambda: NOW_S)
    for name in files:
        found_here: list[Finding] = []
        replay((DATA / name).read_bytes().splitlines(), model, found_here.append, lambda n, r: None)
        found += found_here
    snap.update_from_model(model)
    snap.record_findings(found)
    snap.health.running = True
    return model, snap


def test_every_exported_name_is_documented_and_vice_versa() -> None:
    """docs/metrics.md and the exporter agree on the set of metric names."""
    _, snap = _load("unclean_election.jsonl", "follower_stuck_in_isr.jsonl")
    exported = {fam.name for fam in text_string_to_metric_families(_scrape(snap, "all"))}
    doc = (ROOT / "docs" / "metrics.md").read_text()
    documented = set(re.findall(r"^\| `(kafka_replication_\w+)`", doc, flags=re.M))
    documented = {n.removesuffix("_total") for n in documented if "collector_" not in n}
    assert exported == documented


def test_unclean_election_is_exported_with_its_numbers() -> None:
    """The partition that lost data is exported with its last event time and loss count."""
    _, snap = _load("unclean_election.jsonl")
    s = _samples(_scrape(snap))
    last = {
        lbl["kind"]: v
        for lbl, v in s["kafka_replication_finding_last_event_timestamp_seconds"]
        if lbl["topic"] == "unclean"
    }
    assert {"unclean_election", "committed_data_loss", "leader_election"} <= set(last)
    assert s["kafka_replication_partition_last_loss_offsets"] == [
        ({"cluster": "lab", "topic": "unclean", "partition": "0"}, 4000.0)
    ]
    assert ({"cluster": "lab", "topic": "unclean"}, 4000.0) in s[
        "kafka_replication_committed_offsets_lost_total"
    ]


def test_findings_an_admin_only_collection_cannot_give_are_exported() -> None:
    """Without replica samples (Admin API only) the kinds that need them say 1 in
    ``finding_unavailable`` -- not silence; with samples, 0."""
    for name, unavailable in (
        ("unclean_election_admin_only.jsonl", 1.0),
        ("unclean_election.jsonl", 0.0),
    ):
        _, snap = _load(name)
        s = _samples(_scrape(snap))
        got = {lab["kind"]: v for lab, v in s["kafka_replication_finding_unavailable"]}
        assert got == dict.fromkeys(
            ["follower_lag", "hw_lag", "log_divergence", "truncation_below_hw"], unavailable
        ), name
        (without,) = s["kafka_replication_partitions_without_replica_samples"]
        assert without[1] == (1.0 if unavailable else 0.0)


def test_recovered_partition_series_disappear() -> None:
    """With default cardinality a healed partition leaves no per-partition series behind."""
    tl = Timeline(topic="heal")
    tl.config(rf=3, min_isr=2)
    tl.meta(leader=1, epoch=0, replicas=[1, 2, 3], isr=[1])
    model, snap = ClusterModel(), Snapshot()
    for ev in tl.events:
        from monitor.contract.events import to_model, validate_event

        model.apply(to_model(validate_event(ev)))
    snap.update_from_model(model)
    before = _samples(_scrape(snap, now=T0 / 1000))
    assert any(
        lbl["kind"] == "under_min_isr"
        for lbl, _ in before["kafka_replication_finding_open_since_timestamp_seconds"]
    )
    assert "kafka_replication_partition_isr_size" in before
    tl2 = Timeline(topic="heal", start=T0 + 5000)
    tl2.meta(leader=1, epoch=0, replicas=[1, 2, 3], isr=[1, 2, 3])
    from monitor.contract.events import to_model, validate_event

    for ev in tl2.events:
        model.apply(to_model(validate_event(ev)))
    snap.update_from_model(model)
    after = _samples(_scrape(snap, now=T0 / 1000))
    assert "kafka_replication_finding_open_since_timestamp_seconds" not in after
    assert "kafka_replication_partition_isr_size" not in after
    zero = [
        v for lbl, v in after["kafka_replication_open_findings"] if lbl["kind"] == "under_min_isr"
    ]
    assert zero == [0.0]


def test_per_partition_all_includes_healthy_partitions() -> None:
    _, snap = _load("healthy_steady_state.jsonl")
    assert "kafka_replication_partition_high_watermark" not in _samples(_scrape(snap))
    hw = _samples(_scrape(snap, "all"))["kafka_replication_partition_high_watermark"]
    assert [lbl["topic"] for lbl, _ in hw] == ["healthy"]


def test_one_off_findings_expire_after_retention() -> None:
    _, snap = _load("unclean_election.jsonl")
    snap.event_retention_s = 3600
    fresh = _samples(_scrape(snap, now=T0 / 1000 + 600))
    stale = _samples(_scrape(snap, now=T0 / 1000 + 7200))
    assert "kafka_replication_finding_last_event_timestamp_seconds" in fresh
    assert "kafka_replication_finding_last_event_timestamp_seconds" not in stale


def test_monitor_up_reflects_freshness_and_running() -> None:
    _, snap = _load("healthy_steady_state.jsonl")
    newest = max(snap.health.newest_observed_at.values()) / 1000
    assert _samples(_scrape(snap, now=newest + 10))["kafka_replication_monitor_up"][0][1] == 1
    assert _samples(_scrape(snap, now=newest + 3600))["kafka_replication_monitor_up"][0][1] == 0
    snap.health.running = False
    assert _samples(_scrape(snap, now=newest + 10))["kafka_replication_monitor_up"][0][1] == 0


def test_metrics_server_binds_where_configured() -> None:
    """MetricsServer serves /metrics on the configured host and port, and stops cleanly."""
    _, snap = _load("unclean_election.jsonl")
    server = MetricsServer(snap, host="127.0.0.1", port=0)
    server.start()
    try:
        port = server.bound_port
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        assert b"kafka_replication_partitions" in body
    finally:
        server.stop()


def test_a_stamp_in_the_future_never_makes_telemetry_fresh() -> None:
    """A state row stamped an hour ahead (stored before the job rejected such stamps, or
    from a clock that jumped) is not the newest telemetry: the age stays that of the real
    rows, and a view 10 minutes old is not up."""
    _, snap = _load("healthy_steady_state.jsonl")
    now_ms = 1_800_000_000_000
    snap.health.saw("lab", now_ms - 600_000, now_ms)  # the real newest: 10 minutes old
    snap.health.saw("lab", now_ms + 3_600_000, now_ms)  # an hour ahead: not believed
    snap.health.saw("lab", now_ms - 900_000, now_ms)  # older than the newest: no change
    s = _samples(_scrape(snap, now=now_ms / 1000))
    assert s["kafka_replication_monitor_telemetry_age_seconds"] == [({"cluster": "lab"}, 600.0)]
    assert s["kafka_replication_monitor_up"][0][1] == 0


def test_an_in_process_snapshot_drops_what_its_model_forgot_and_keeps_other_models() -> None:
    """One snapshot fed from several models (the runbook's live test does): a topic one model
    forgot (deleted) leaves; another model's partitions stay."""
    from monitor.model import TopicDeleted

    model, snap = _load("unclean_election.jsonl")
    tl = Timeline(cluster="other", topic="kept")
    tl.meta(leader=1, epoch=0, replicas=[1], isr=[1], hw=5)
    other = ClusterModel()
    replay(tl.jsonl().splitlines(), other, lambda f: None, lambda n, r: None)
    snap.update_from_model(other)
    before = set(snap.partitions)
    (gone,) = [k for k in model.partitions]
    model.apply(TopicDeleted(gone[0], T0 + 10**9, gone[1]))
    snap.update_from_model(model)
    assert set(snap.partitions) == before - {gone}
    assert {k[1] for k in snap.partitions} == {k[1] for k in other.partitions}


def test_the_exporter_believes_stamps_as_the_job_is_configured() -> None:
    """The job's max_stamp_ahead_ms reaches the exporter: 10 s ahead is believed with the
    default (60 s), not by a job configured for 5 s."""
    now_ms = 1_800_000_000_000
    default, strict = Snapshot(), Snapshot(max_stamp_ahead_ms=5_000)
    for snap in (default, strict):
        snap.health.saw("lab", now_ms + 10_000, now_ms)
    assert default.health.newest_observed_at == {"lab": now_ms + 10_000}
    assert strict.health.newest_observed_at == {}


def test_build_info_says_the_installed_version() -> None:
    from importlib import metadata

    _, snap = _load("healthy_steady_state.jsonl")
    (info,) = _samples(_scrape(snap))["kafka_replication_build_info"]
    assert info == ({"version": metadata.version("kafka-replication-monitor")}, 1.0)
