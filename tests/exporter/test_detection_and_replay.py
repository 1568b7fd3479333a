"""One-off findings page on when the monitor detected them, and the counters survive a
restart and a replayed batch (the job's store seeds them; a batch id counts once).

The store is written as the job writes it (``streaming.store.write_findings_locally``, a
``detected_at`` per row); the batches are fed to the real driver hook, ``JobExporter.hook``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from prometheus_client.parser import text_string_to_metric_families

from monitor.contract.store import (
    FINDING_COLUMNS,
    FINDINGS,
    LATER_FINDING_COLUMNS,
    finding_seq,
    finding_store_row,
    finding_store_rows,
)
from monitor.exporter.driver import JobExporter
from monitor.model import Finding, FindingKind, FindingState, Severity
from streaming.store import finding_schema, write_findings_locally

T1 = 1_800_000_000.0  # the first run's wall clock (s)
DETECTED = "kafka_replication_finding_last_detected_timestamp_seconds"
EVENT = "kafka_replication_finding_last_event_timestamp_seconds"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class _Rows:
    def collect(self) -> list[Any]:
        return []


@dataclass
class Batch:
    batch_id: int
    findings: list[dict[str, Any]]
    states: Any = field(default_factory=_Rows)
    stats: dict[str, int] = field(default_factory=dict)


def _event(kind: FindingKind, partition: int, at_s: float, **details: Any) -> dict[str, Any]:
    at = int(at_s * 1000)
    sev = Severity.INFO if kind == FindingKind.LEADER_ELECTION else Severity.CRITICAL
    f = Finding(kind, FindingState.EVENT, sev, "lab", "orders", partition, at, at, None, details)
    return f.to_dict()


def _samples(exp: JobExporter) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    text = exp.server.collector.render().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def _counters(exp: JobExporter) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    return {k: v for k, v in _samples(exp).items() if k.endswith("_total")}


def _one(samples: dict[tuple[tuple[str, str], ...], float], **labels: str) -> float:
    (value,) = [v for k, v in samples.items() if set(labels.items()) <= set(k)]
    return value


class Job:
    """The job's side: each batch's findings written to the store (detected at the run's
    wall clock), then the driver hook called -- the order of ``streaming.job``."""

    def __init__(self, store: Path, clock: Clock) -> None:
        self.store, self.clock = store, clock

    def run(self, exp: JobExporter, batch: Batch, write: bool = True) -> None:
        if write:
            detected = int(self.clock() * 1000)
            rows = finding_store_rows(batch.findings, batch.batch_id, detected)
            write_findings_locally(self.store, batch.batch_id, rows)
        exp.hook(batch)


def _batches() -> list[Batch]:
    return [
        Batch(
            7,
            [
                _event(FindingKind.LEADER_ELECTION, 0, T1 - 30),
                _event(FindingKind.UNCLEAN_ELECTION, 0, T1 - 30),
                _event(FindingKind.COMMITTED_DATA_LOSS, 0, T1 - 30, lost_count=300),
            ],
            stats={"accepted": 40, "dead_lettered": 1},
        ),
        Batch(
            8,
            [
                _event(FindingKind.LEADER_ELECTION, 1, T1 + 3),
                _event(FindingKind.COMMITTED_DATA_LOSS, 1, T1 + 3, lost_count=50),
                # a second loss on partition 0 in the same batch: the later one stays
                _event(FindingKind.COMMITTED_DATA_LOSS, 0, T1 + 2, lost_count=7),
            ],
            stats={"accepted": 25, "dead_lettered": 0},
        ),
    ]


def test_a_restart_replay_leaves_every_counter_unchanged(tmp_path: Path) -> None:
    """Batch 8 is written to the store, then the job dies before its checkpoint. The
    restarted exporter is seeded from the store; Spark runs batch 8 again: no counter
    moves, and no loss is detected again (its stored detection time stays). Batch 9 then
    counts as usual."""
    store = tmp_path / "store"
    clock = Clock(T1)
    job = Job(store, clock)
    first = JobExporter(str(store), port=0, clock=clock)
    b7, b8 = _batches()
    job.run(first, b7)
    clock.now += 5
    job.run(first, b8)
    before_crash = _counters(first)
    assert _one(before_crash["kafka_replication_committed_offsets_lost_total"]) == 357
    assert _one(before_crash["kafka_replication_finding_events_total"], kind="leader_election") == 2

    clock.now += 120  # the restart
    second = JobExporter(str(store), port=0, clock=clock)
    second.seed()
    seeded = _counters(second)
    for name in (
        "kafka_replication_committed_offsets_lost_total",
        "kafka_replication_finding_events_total",
    ):
        assert seeded[name] == before_crash[name], name
    detected_before = _samples(second)[DETECTED]

    job.run(second, b8, write=True)  # the replay rewrites its folder, as Spark does
    assert _counters(second) == seeded
    assert _samples(second)[DETECTED] == detected_before
    assert _one(detected_before, partition="1", kind="committed_data_loss") == T1 + 5
    # batch 7, the store's first, replayed history: detected at its event time
    assert _one(detected_before, partition="0", kind="unclean_election") == T1 - 30

    clock.now += 5
    job.run(second, Batch(9, [_event(FindingKind.COMMITTED_DATA_LOSS, 2, T1 + 128, lost_count=1)],
                          stats={"accepted": 3}))  # fmt: skip
    assert _one(_samples(second)[DETECTED], partition="2") == T1 + 130
    after = _counters(second)
    assert _one(after["kafka_replication_committed_offsets_lost_total"]) == 358
    assert _one(after["kafka_replication_monitor_events_processed_total"]) == 3


def test_a_batch_replayed_live_counts_once(tmp_path: Path) -> None:
    """The query restarted inside the same driver reruns its last batch: the same."""
    clock = Clock(T1)
    job = Job(tmp_path / "store", clock)
    exp = JobExporter(str(tmp_path / "store"), port=0, clock=clock)
    b7, _ = _batches()
    job.run(exp, b7)
    once = _counters(exp)
    detected = _samples(exp)[DETECTED]
    clock.now += 30
    job.run(exp, b7)
    assert _counters(exp) == once
    assert _samples(exp)[DETECTED] == detected
    assert _one(once["kafka_replication_monitor_events_processed_total"]) == 40


def _store_since(store: Path, since_s: float) -> None:
    """A store whose memory begins at ``since_s``: a finding detected then (batch 0)."""
    d = _event(FindingKind.LEADER_ELECTION, 9, since_s - 1)
    write_findings_locally(store, 0, [finding_store_row(d, int(since_s * 1000), finding_seq(0, 0))])


def test_the_detection_gauge_carries_the_detection_time_not_the_event_time(
    tmp_path: Path,
) -> None:
    """A loss that happened 20 minutes before the batch that brought it (the job was down,
    or behind; its store goes back an hour): the event gauge says when it happened, the
    detection gauge when the hook saw it -- the alert's `time() - detected < 900` fires
    for 15 minutes from now."""
    store = tmp_path / "store"
    _store_since(store, T1 - 3600)
    clock = Clock(T1)
    exp = JobExporter(str(store), port=0, clock=clock)
    exp.seed()
    exp.hook(Batch(3, [_event(FindingKind.COMMITTED_DATA_LOSS, 0, T1 - 1200, lost_count=5)]))
    s = _samples(exp)
    assert _one(s[EVENT], kind="committed_data_loss") == T1 - 1200
    assert _one(s[DETECTED], kind="committed_data_loss") == T1
    assert exp.hook_errors == 0


def test_history_replayed_into_a_new_store_does_not_page_again(tmp_path: Path) -> None:
    """A new store rebuilt from the events topic (an upgrade): its first batches replay
    events from before its memory began -- the old monitor paged those. They count as
    detected at their event time (a loss two hours old pages nothing, one two days old is
    past the retention; an election 10 minutes old pages its last 5 minutes, as before
    detection times existed); an event after the memory began pages from its detection,
    however late. A restart shows the same."""
    store = tmp_path / "store"
    clock = Clock(T1)
    job = Job(store, clock)
    exp = JobExporter(str(store), port=0, clock=clock)
    exp.seed()  # nothing there yet
    job.run(exp, Batch(0, [
        _event(FindingKind.COMMITTED_DATA_LOSS, 0, T1 - 7200, lost_count=9),
        _event(FindingKind.COMMITTED_DATA_LOSS, 4, T1 - 2 * 86400, lost_count=9),
        _event(FindingKind.UNCLEAN_ELECTION, 1, T1 - 600),
    ]))  # fmt: skip
    clock.now += 60
    job.run(exp, Batch(1, [
        _event(FindingKind.HW_REGRESSION, 2, T1 - 3600),  # still the replayed history
        _event(FindingKind.HW_REGRESSION, 3, T1 + 30),  # after the memory began
    ]))  # fmt: skip
    live = _samples(exp)[DETECTED]
    assert _one(live, partition="0") == T1 - 7200
    assert [k for k in live if ("partition", "4") in k] == []  # past the 24 h retention
    assert _one(live, partition="1") == T1 - 600
    assert _one(live, partition="2") == T1 - 3600
    assert _one(live, partition="3") == T1 + 60
    clock.now += 60
    restarted = JobExporter(str(store), port=0, clock=clock)
    restarted.seed()
    assert _samples(restarted)[DETECTED] == live


def _old_store(store: Path, batch_id: int, findings: list[dict[str, Any]]) -> None:
    """A findings folder written before the store kept ``detected_at`` and ``seq`` (no such
    columns)."""
    names = [n for n, _ in FINDING_COLUMNS if n not in LATER_FINDING_COLUMNS]
    schema = pa.schema([f for f in finding_schema() if f.name in names])
    rows = [
        dict(zip(names, finding_store_row(d, None, None)[: len(names)], strict=True))
        for d in findings
    ]
    folder = store / FINDINGS / f"batch_id={batch_id}"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema), folder / "part-00000.parquet")


def test_a_seeded_finding_keeps_its_stored_detection_time_or_its_event_time(
    tmp_path: Path,
) -> None:
    """After a restart: a stored detection time is shown as stored; a row from before the
    store kept them shows its event time -- never the restart's time, which would page
    every old loss again at an upgrade; a stored time beyond the clock's tolerance in the
    future is not believed (no detection series); a small skew is clamped to now."""
    store = tmp_path / "store"
    _store_since(store, T1 - 86400)
    _old_store(store, 1, [_event(FindingKind.UNCLEAN_ELECTION, 0, T1 - 7200)])
    write_findings_locally(
        store, 2, [finding_store_row(_event(FindingKind.COMMITTED_DATA_LOSS, 1, T1 - 3000,
                                                lost_count=4), int((T1 - 600) * 1000),
                                     finding_seq(2, 0))]
    )  # fmt: skip
    write_findings_locally(
        store,
        3,
        [
            finding_store_row(
                _event(FindingKind.HW_REGRESSION, 2, T1), int((T1 + 7200) * 1000), finding_seq(3, 0)
            ),
            finding_store_row(
                _event(FindingKind.HW_REGRESSION, 3, T1), int((T1 + 90) * 1000), finding_seq(3, 1)
            ),
        ],
    )
    exp = JobExporter(str(store), port=0, clock=Clock(T1 + 60))
    exp.seed()
    s = _samples(exp)
    assert _one(s[DETECTED], kind="unclean_election") == T1 - 7200
    assert _one(s[DETECTED], kind="committed_data_loss") == T1 - 600
    assert [v for k, v in s[DETECTED].items() if ("partition", "2") in k] == []
    assert _one(s[EVENT], partition="2") == T1
    assert _one(s[DETECTED], partition="3") == T1 + 60


def test_a_new_finding_under_an_old_batch_id_still_pages(tmp_path: Path) -> None:
    """Batch ids restart at 0 (a new checkpoint with the old store): the counters do not
    count those batches (they are at or below the store's newest), but a finding the
    monitor has not shown yet is detected -- a loss must page."""
    store = tmp_path / "store"
    clock = Clock(T1)
    job = Job(store, clock)
    first = JobExporter(str(store), port=0, clock=clock)
    for b in _batches():
        job.run(first, b)
    clock.now += 600
    second = JobExporter(str(store), port=0, clock=clock)
    second.seed()
    job.run(second, Batch(0, [_event(FindingKind.COMMITTED_DATA_LOSS, 5, T1 + 590, lost_count=1)]))
    assert _one(_samples(second)[DETECTED], partition="5") == T1 + 600


def test_a_file_uri_store_is_seeded(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_findings_locally(
        store,
        4,
        [
            finding_store_row(
                _event(FindingKind.UNCLEAN_ELECTION, 0, T1), int(T1 * 1000), finding_seq(4, 0)
            )
        ],
    )
    exp = JobExporter(store.as_uri(), port=0, clock=Clock(T1 + 1))
    exp.seed()
    assert _one(_samples(exp)[DETECTED], kind="unclean_election") == T1
    assert exp.snapshot.counted_batch == 4


def _state_only_store(store: Path) -> None:
    """A store with one partition's state row and no finding yet (a quiet cluster)."""
    from monitor.contract.state import PartitionView, ReplicaRow

    v = PartitionView(
        "lab", "orders", 0, 1, 4, (1,), (1, 2), 500, 500, 500, 0, 0, 2, False,
        (ReplicaRow(1, 500, 0, 0, 5, 5, True),), (), Severity.INFO, (), 0, 0,
        int((T1 - 7200) * 1000),
    )  # fmt: skip
    folder = store / "state" / "batch_id=3"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([v.to_row()]), folder / "part-00000.parquet")


def test_a_store_older_than_the_outage_pages_a_late_loss(tmp_path: Path) -> None:
    """The job was down 20 minutes; its store goes back further, though it never held a
    detection time (rows from before they were kept, or no finding at all yet): the loss
    that happened during the outage is no history -- it pages from its detection."""
    old, quiet = tmp_path / "old", tmp_path / "quiet"
    _old_store(old, 1, [_event(FindingKind.UNCLEAN_ELECTION, 0, T1 - 7200)])
    _state_only_store(quiet)
    for store in (old, quiet):
        exp = JobExporter(str(store), port=0, clock=Clock(T1))
        exp.seed()
        exp.hook(Batch(4, [_event(FindingKind.COMMITTED_DATA_LOSS, 1, T1 - 1200, lost_count=2)]))
        assert _one(_samples(exp)[DETECTED], partition="1") == T1, store


def test_history_replayed_by_a_new_checkpoint_into_an_old_store_does_not_page_again(
    tmp_path: Path,
) -> None:
    """A new checkpoint on an old store (``streaming.storefs.pair``: it continues after the
    store's batches) replays the events topic from its start: the store remembers since
    long ago, but what the new checkpoint reads from before it began (the pairing's
    ``since``) is history the old job already paged. A loss after it pages from its
    detection, however late."""
    import json

    from monitor.contract.store import STORE_PAIR

    store = tmp_path / "store"
    _store_since(store, T1 - 30 * 86400)  # the old job's findings, a month back
    (store / STORE_PAIR).write_text(json.dumps({"pair": "p", "since": int(T1 * 1000)}))
    clock = Clock(T1 + 60)
    exp = JobExporter(str(store), port=0, clock=clock)
    exp.seed()
    exp.hook(Batch(5, [
        _event(FindingKind.COMMITTED_DATA_LOSS, 0, T1 - 7200, lost_count=9),  # replayed
        _event(FindingKind.COMMITTED_DATA_LOSS, 1, T1 + 30, lost_count=9),  # since: new
    ]))  # fmt: skip
    live = _samples(exp)[DETECTED]
    assert _one(live, partition="0") == T1 - 7200  # past the 15 minutes: pages nothing
    assert _one(live, partition="1") == T1 + 60
