"""A condition opened and resolved at the same instant reads back resolved.

Found by the short soak in CI (2026-11-29): broker 2 paused, the collector's round stalled
23 s on the Admin API, and the job's tick opened ``stale_telemetry`` for every broker at
its clock; the round's samples then arrived, stamped before that clock, and resolved it --
at the open's instant (``Emitter.condition`` never stamps a resolve before its open). The
findings topic had the open, then the resolve. But the store was read back ordered by
``at`` and then id, and for broker 1 the resolve's id sorts first: the job, restarted a
few seconds later, seeded its exporter with the condition open, and the alert fired for 15
minutes. The findings below are that pair, byte for byte (their ids are the soak's).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.contract.events import to_model, validate_event
from monitor.contract.store import finding_seq, finding_store_row, finding_store_rows
from monitor.dev.testing import T0, Timeline
from monitor.exporter.driver import JobExporter
from monitor.model import (
    ClusterModel,
    Finding,
    FindingKind,
    FindingState,
    ModelConfig,
    Severity,
    finding_order,
)
from monitor.query.store import StoreReader
from streaming.store import compact_findings, write_findings_locally
from streaming.storefs import Location

AT = 1_795_915_732_340
SEEN = 1_795_915_706_963


def _stale(state: FindingState, details: dict[str, object]) -> Finding:
    return Finding(
        FindingKind.STALE_TELEMETRY, state, Severity.WARNING, "lab", None, None, AT, AT, 1,
        details,
    )  # fmt: skip


OPEN = _stale(FindingState.OPEN, {"alive": True, "last_seen_at": SEEN, "silent_for_ms": 25377})
RESOLVED = _stale(
    FindingState.RESOLVED,
    {"alive": True, "last_seen_at": SEEN, "silent_for_ms": 28042, "open_for_ms": 0},
)


def _store(tmp_path: Path, seq: bool = True) -> Path:
    """The pair in two batches; ``seq=False``: as stored before the column (the stamps
    alone order them then)."""
    store = tmp_path / "store"
    for batch_id, f, detected in ((10, OPEN, AT + 600), (11, RESOLVED, AT + 6000)):
        row = finding_store_row(f.to_dict(), detected, finding_seq(batch_id, 0) if seq else None)
        write_findings_locally(store, batch_id, [row])
    return store


def test_the_pair_is_the_soaks_and_its_ids_sort_the_wrong_way() -> None:
    assert (OPEN.id, RESOLVED.id) == ("c79ea47377e5fc1f587b", "17977be65b0be96a8083")
    assert RESOLVED.id < OPEN.id  # what ordering by (at, id) got wrong
    assert sorted([RESOLVED, OPEN], key=finding_order) == [OPEN, RESOLVED]


@pytest.mark.parametrize("seq", [True, False])
@pytest.mark.parametrize("compacted", [False, True])
def test_the_store_reads_the_condition_resolved(tmp_path: Path, compacted: bool, seq: bool) -> None:
    store = _store(tmp_path, seq)
    if compacted:  # the folded file is written in the same order
        assert compact_findings(Location.of(str(store)), 11, horizon_ms=0) == 2
        assert len(list((store / "findings").glob("batch_id=*"))) == 1
    reader = StoreReader(store)
    assert [f.state for f in reader.all_findings()] == [FindingState.OPEN, FindingState.RESOLVED]
    assert [r["state"] for r in reader.broker_conditions()] == ["resolved"]


def test_a_restarted_exporter_seeded_from_the_store_shows_no_open_condition(
    tmp_path: Path,
) -> None:
    exporter = JobExporter(str(_store(tmp_path)), port=0)
    exporter.seed()
    assert exporter.snapshot.brokers[("lab", 1)].open == ()


def _silent_broker(sample_at: int, tick_at: int) -> list[list[Finding]]:
    """Broker 1's ``stale_telemetry`` (silent for 30 s: open) over three calls of the model:
    a tick at +100 s opens it (silent since +0); a sample of ``sample_at`` resolves it (at
    +100 s: never before the open); a tick at ``tick_at`` opens it again when that sample
    is more than 30 s old by then. The findings of each call."""
    tl = Timeline()
    model = ClusterModel(ModelConfig(stale_after_ms=30_000))
    tl.broker(1)
    first = [f for e in tl.events for f in model.apply(to_model(validate_event(e)))]
    first += model.tick(T0 + 100_000)
    tl.advance(sample_at)
    second = model.apply(to_model(validate_event(tl.broker(1))))
    third = model.tick(T0 + tick_at)
    return [first, second, third]


def _stored(tmp_path: Path, batches: list[list[Finding]]) -> Path:
    """The batches' findings written as the job writes them, from batch 5 on."""
    store = tmp_path / "store"
    for batch_id, fs in enumerate(batches, start=5):
        write_findings_locally(
            store, batch_id, finding_store_rows([f.to_dict() for f in fs], batch_id, T0)
        )
    return store


def _reads_back_open(store: Path, emitted: list[Finding]) -> None:
    """The reader gives the findings back as emitted, the condition open; so does a
    restarted exporter seeded from the store."""
    reader = StoreReader(store)
    assert reader.all_findings() == emitted
    assert [r["state"] for r in reader.broker_conditions()] == ["open"]
    exporter = JobExporter(str(store), port=0)
    exporter.seed()
    assert [o.kind for o in exporter.snapshot.brokers[("lab", 1)].open] == ["stale_telemetry"]


@pytest.mark.parametrize("compacted", [False, True])
def test_a_clock_that_goes_back_reads_back_in_the_jobs_order(
    tmp_path: Path, compacted: bool
) -> None:
    """The tick clock goes back: the batch of the +50 s sample, a backlog's, ticks at its
    newest event plus the catch-up slack, +90 s -- silent for 40 s, open again, at an
    instant before the first open. The stamps put the reopen (+90 s) before the open and
    resolve (+100 s): read back by them, the condition looked resolved, and a restarted
    exporter had it closed while the broker was silent. The rows' ``seq`` (the job's output
    order) gives it back."""
    batches = _silent_broker(sample_at=50_000, tick_at=90_000)
    emitted = [f for b in batches for f in b]
    assert [(f.state, f.at - T0) for f in emitted] == [
        (FindingState.OPEN, 100_000),
        (FindingState.RESOLVED, 100_000),
        (FindingState.OPEN, 90_000),
    ]
    assert sorted(emitted, key=finding_order) != emitted  # the stamps alone cannot
    store = _stored(tmp_path, batches)
    if compacted:
        assert compact_findings(Location.of(str(store)), 7, horizon_ms=0) == 3
    _reads_back_open(store, emitted)


def test_a_reopen_that_repeats_the_opens_id_is_kept(tmp_path: Path) -> None:
    """A tick clock that stands still: the batch of the +30 s sample (a backlog's: its
    newest event and so its tick clock are the first batch's) ticks at +100 s again and
    opens the condition at the very instant -- and id -- of the first open (the id hashes
    the stamps). Kept once per id, the store read the condition resolved, and a restarted
    exporter closed a live alert (found by review). A compaction past the retention keeps
    the reopen: no resolve after it."""
    first, second, third = _silent_broker(sample_at=30_000, tick_at=100_000)
    emitted = first + second + third
    assert [f.state for f in emitted] == [
        FindingState.OPEN,
        FindingState.RESOLVED,
        FindingState.OPEN,
    ]
    assert emitted[0].id == emitted[2].id
    store = _stored(tmp_path, [first, second + third])
    _reads_back_open(store, emitted)
    # Past the retention, only what is still open stays.
    assert compact_findings(Location.of(str(store)), 6, horizon_ms=T0 + 1) == 1
    assert StoreReader(store).all_findings() == emitted[2:]
    assert [r["state"] for r in StoreReader(store).broker_conditions()] == ["open"]
