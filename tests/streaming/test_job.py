"""The stateful job over the seed scenarios equals ``monitor.replay``: it is wiring, not rules.

Each scenario becomes its own cluster (the files all say "lab"), is split into several
micro-batches (so state crosses batches), and runs through the whole job — derived
validation, bucketing and fan-out, transformWithStateInPandas with the per-bucket model,
the foreachBatch sinks — from a Kafka-shaped Parquet source. Ticks are switched off in both
(``tick_ms`` of an hour; the replay ticks only at its end), so the finding ids must be
identical — except the ``stale_telemetry`` the replay's final tick opens (the job has no
tick within the test); the job's own ticks are tested in ``test_silence``.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from monitor.model import ModelConfig
from streaming.config import ModelSettings, StreamingConfig
from streaming.job import BatchOutput, start
from streaming.job import parquet_source
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
    return StreamingConfig(
        checkpoint=str(tmp / "checkpoint"),
        store=str(tmp / "store"),
        trigger_seconds=0.5,
        tick_ms=T_HOUR,
        model=ModelSettings.from_model_config(model),
        jars=[],
        **kw,
    )


def _run(spark: Any, tmp: Path, batches: list[list[bytes]], cfg: StreamingConfig) -> tuple[list[dict[str, Any]], Any]:
    src_dir = tmp / "source"
    write_batches(src_dir, batches)
    seen: list[dict[str, Any]] = []

    def hook(out: BatchOutput) -> None:
        seen.extend(out.findings)

    job = start(spark, cfg, source=parquet_source(spark, str(src_dir)), hooks=[hook], write_kafka=False)
    run_to_idle(job)
    return seen, job


@pytest.mark.parametrize("buckets", [3])
def test_job_equals_replay_on_seed_scenarios(spark: Any, tmp_path: Path, buckets: int) -> None:
    groups: dict[tuple[tuple[str, Any], ...], list[Any]] = {}
    for sc in SCENARIOS:
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
