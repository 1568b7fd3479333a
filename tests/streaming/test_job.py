"""The stateful job over the seed scenarios equals the replay: it is wiring, not rules.

Each scenario becomes its own cluster (the files all say "lab"), is split into several
micro-batches (so state crosses batches), and runs through the whole job — derived
validation, bucketing and fan-out, transformWithStateInPandas with the per-bucket model,
the foreachBatch sinks — from a Kafka-shaped Parquet source. Ticks are switched off in both
(``tick_ms`` of an hour; the replay ticks only at its end), so the finding ids must be
identical — except the ``stale_telemetry`` the replay's final tick opens (the job has no
tick within the test); the job's own ticks are tested in ``test_silence``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from monitor.dev.rounds import fold
from monitor.model import ModelConfig
from streaming.config import StreamingConfig
from streaming.job import BatchOutput, parquet_source, start
from tests.golden import check_golden
from tests.scenarios import SCENARIOS
from tests.streaming.helpers import (
    event_driven,
    renamed,
    run_to_idle,
    split,
    write_batches,
)

pytestmark = pytest.mark.spark

T_HOUR = 3_600_000


def _config(tmp: Path, model: ModelConfig, **kw: Any) -> StreamingConfig:
    kw.setdefault("store", str(tmp / "store"))
    return StreamingConfig(
        # read from Parquet, not Kafka: the connection is never used
        kafka={"bootstrap_servers": "127.0.0.1:9"},
        checkpoint=str(tmp / "checkpoint"),
        trigger_seconds=0.5,
        tick_ms=T_HOUR,
        model=model,
        jars=[],
        **kw,
    )


def _run(
    spark: Any, tmp: Path, batches: list[list[bytes]], cfg: StreamingConfig
) -> tuple[list[dict[str, Any]], Any]:
    src_dir = tmp / "source"
    write_batches(src_dir, batches)
    seen: list[dict[str, Any]] = []

    def hook(out: BatchOutput) -> None:
        seen.extend(out.findings)

    job = start(
        spark, cfg, source=parquet_source(spark, str(src_dir)), hooks=[hook], write_kafka=False
    )
    run_to_idle(job)
    return seen, job


def _as_round_records(records: list[bytes]) -> list[bytes]:
    """The records with replica events carried by round records (monitor.dev.rounds)."""
    folded = fold([json.loads(r) for r in records])
    assert len(folded) < len(records)
    return [json.dumps(e, separators=(",", ":")).encode() for e in folded]


@pytest.mark.parametrize("form", ["replica_events", "round_records"])
def test_job_equals_replay_on_seed_scenarios(spark: Any, tmp_path: Path, form: str) -> None:
    """Both forms of a round (a replica event per sample, or one round record per partition)
    give the replay's findings and the same golden file."""
    buckets = 3
    golden: list[str] = []
    groups: dict[tuple[tuple[str, Any], ...], list[Any]] = {}
    # A scenario with a stamp ahead of its time needs record times (a Kafka source's) for
    # the job to reject it: test_kafka.py runs it through Kafka.
    for sc in (s for s in SCENARIOS if not s.rejects):
        groups.setdefault(tuple(sorted(sc.config.items())), []).append(sc)
    for gi, (key, scenarios) in enumerate(groups.items()):
        model = ModelConfig(**dict(key))
        records: list[bytes] = []
        expected: list[str] = []
        for sc in scenarios:
            recs = renamed(sc.path.read_bytes().splitlines(), sc.name)
            records.extend(recs)
            # The replay ticks once, at its end (tick_ms of 10**15); the job (timer an hour
            # away) has no tick: leave out what that final tick found.
            expected.extend(f.id for f in event_driven(recs, model))
        if form == "round_records":
            records = _as_round_records(records)
        # Interleave nothing: scenarios are consecutive; split into 4 micro-batches.
        tmp = tmp_path / f"group{gi}"
        cfg = _config(tmp, model, buckets=buckets)
        seen, job = _run(spark, tmp, split(records, 4), cfg)
        got = [f["id"] for f in seen]
        assert Counter(got) == Counter(expected), (
            f"group {key}: missing {sorted(set(expected) - set(got))[:10]}, "
            f"extra {[f for f in seen if f['id'] not in set(expected)][:5]}"
        )
        assert job.counters.accepted == len(records)
        assert job.counters.dead_lettered == 0
        golden += sorted(json.dumps(f, sort_keys=True) + "\n" for f in seen)
    # Every finding the job wrote, with every detail: unchanged unless a commit says why.
    check_golden("job_findings.jsonl", "".join(golden))


def test_silence_opens_stale_telemetry_without_new_events(spark: Any, tmp_path: Path) -> None:
    """The processing-time timer ticks buckets that receive nothing: silence is a finding."""
    from monitor.dev.testing import Timeline

    now = int(time.time() * 1000)
    tl = Timeline(cluster="quiet", topic="q", start=now)
    tl.config(rf=3, min_isr=2)
    tl.broker(1)
    tl.meta(leader=1, epoch=0, replicas=[1, 2, 3], isr=[1, 2, 3], hw=10)
    tl.replica(1, leo=10)
    records = [json.dumps(e).encode() for e in tl.events]
    model = ModelConfig(stale_after_ms=2_000)
    cfg = _config(tmp_path, model, buckets=2).model_copy(
        update={"tick_ms": 500, "catchup_slack_ms": 0}
    )
    write_batches(tmp_path / "source", [records])
    seen: list[dict[str, Any]] = []
    job = start(
        spark,
        cfg,
        source=parquet_source(spark, str(tmp_path / "source")),
        hooks=[lambda out: seen.extend(out.findings)],
        write_kafka=False,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            stale = {(f["topic"], f["broker"]) for f in seen if f["kind"] == "stale_telemetry"}
            if {("q", None), (None, 1)} <= stale:
                break
            assert job.query.exception() is None, job.query.exception()
            time.sleep(0.5)
    finally:
        job.stop()
    stale_open = [f for f in seen if f["kind"] == "stale_telemetry" and f["state"] == "open"]
    assert {(f["topic"], f["partition"], f["broker"]) for f in stale_open} == {
        ("q", 0, None),
        (None, None, 1),
    }, seen
    # Each opened exactly once, though several ticks ran (one bucket owns broker 1).
    assert len(stale_open) == 2
    assert all(f["details"]["silent_for_ms"] > 2_000 for f in stale_open)


def test_late_and_duplicate_events_change_nothing(spark: Any, tmp_path: Path) -> None:
    """A batch of duplicates and of older (late) samples produces no finding and no state."""
    from monitor.dev.testing import Timeline

    tl = Timeline(cluster="dup", topic="d")
    tl.config(rf=3, min_isr=2)
    for i in range(6):
        tl.meta(leader=1, epoch=0, replicas=[1, 2, 3], isr=[1, 2, 3], hw=100 * i)
        tl.replica(1, leo=100 * i + 5)
        tl.replica(2, leo=100 * i + 3)
        tl.replica(3, leo=100 * i + 2)
        tl.advance(5_000)
    first = [json.dumps(e).encode() for e in tl.events]
    # Late: the first samples again, but with LEOs and HWs far lower (would read as
    # truncation / HW regression if applied), and exact duplicates of the last round.
    late = []
    for e in tl.events[:8]:
        bad = dict(e)
        if "log_end_offset" in bad:
            bad["log_end_offset"] = 0
        if "high_watermark" in bad:
            bad["high_watermark"] = 0
        late.append(json.dumps(bad).encode())
    dups = first[-4:] * 2
    cfg = _config(tmp_path, ModelConfig(), buckets=2)
    seen, job = _run(spark, tmp_path, [first, first[-4:] + dups, late], cfg)
    expected = [f.id for f in event_driven(first, ModelConfig())]
    assert Counter(f["id"] for f in seen) == Counter(expected), seen
    assert job.counters.duplicates >= 4  # exact duplicates within the second batch
    assert job.counters.accepted == len(first) + len(first[-4:]) + len(dups) + len(late)


def test_a_query_that_ended_before_reading_its_source_is_not_drained(
    spark: Any, tmp_path: Path
) -> None:
    """A query that is no longer active without having read its source is a failure, even
    when Spark recorded no error (a standalone cluster's job once died that way and
    ``monitor stream --once`` said "0 events accepted", exit 0)."""
    sc = next(s for s in SCENARIOS if s.name == "unclean_election")
    write_batches(tmp_path / "source", split(sc.path.read_bytes().splitlines(), 4))
    job = start(
        spark,
        _config(tmp_path, ModelConfig()),
        source=parquet_source(spark, str(tmp_path / "source")),
        write_kafka=False,
    )
    job.query.stop()  # ended before its first batch, without an error
    assert job.query.exception() is None
    with pytest.raises(RuntimeError, match="ended by itself before reading its source"):
        job.drain(timeout_s=60)


def test_the_spark_ui_is_off_and_cannot_kill(spark: Any) -> None:
    """Spark's UI binds every interface and, with kill enabled, lets anyone who reaches it
    cancel the batch's stage -- which stops the query (issue 20). The job's session has no
    UI; one turned on through ``spark_conf`` still cannot kill."""
    conf = spark.sparkContext.getConf()
    assert spark.sparkContext.uiWebUrl is None
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.ui.killEnabled") == "false"


def test_a_new_checkpoint_on_an_old_store_writes_newer_batches(spark: Any, tmp_path: Path) -> None:
    """A job started on a new checkpoint (an upgrade that changes the state) and the old
    store continues after the store's last batch: its rows are the newest, so the runbook
    and the exporter read the new job's state, not the old one's (issue 20)."""
    from monitor.query.store import StoreReader
    from streaming.storefs import StorePairError

    sc = next(s for s in SCENARIOS if s.name == "under_min_isr_and_recovery")
    records = renamed(sc.path.read_bytes().splitlines(), sc.name)
    first = _config(tmp_path / "a", ModelConfig(), store=str(tmp_path / "store"))
    _, job = _run(spark, tmp_path / "a", split(records, 3), first)
    job.stop()
    old_batches = sorted(
        int(p.name.split("=")[1]) for p in (tmp_path / "store" / "state").iterdir()
    )
    second = _config(tmp_path / "b", ModelConfig(), store=str(tmp_path / "store"))
    _, job = _run(spark, tmp_path / "b", split(records[: len(records) // 2], 2), second)
    job.stop()
    batches = sorted(int(p.name.split("=")[1]) for p in (tmp_path / "store" / "state").iterdir())
    new = [b for b in batches if b not in old_batches]
    assert new and min(new) == max(old_batches) + 1, (old_batches, batches)
    # The current state is the second job's (it read half the scenario).
    [cur] = StoreReader(tmp_path / "store").current()
    assert cur["batch_id"] in new
    # And the first checkpoint no longer writes into that store.
    with pytest.raises(StorePairError):
        start(spark, first, source=parquet_source(spark, str(tmp_path / "a" / "source")))
