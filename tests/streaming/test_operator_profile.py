"""The operator's profile (``MONITOR_STREAMING_PROFILE``) as ``bench.spark_bench`` reads it:
a line per bucket and micro-batch, summed over the batches after the first, with how each
bucket's state was loaded -- the figure that tells a cached run from one that reloaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.operator_bench import profile_phases
from monitor.dev.synth import generate
from monitor.model import ModelConfig
from streaming import operator as op
from tests.streaming.helpers import bucket_payloads, run_bucket

BUCKETS = 2


def _run(batches: list[list[bytes]], scope: str) -> list[int]:
    """Each batch through one processor call per bucket (as a worker runs them); the
    records each batch handed to the operator."""
    settings = op.OperatorSettings(
        buckets=BUCKETS, tick_ms=3_600_000, catchup_slack_ms=10_000, model=ModelConfig(),
        cache_scope=scope,
    )  # fmt: skip
    stores: dict[int, dict[str, Any]] = {b: {} for b in range(BUCKETS)}
    offset, handed = 0, []
    for i, batch in enumerate(batches):
        per_bucket = bucket_payloads(batch, BUCKETS, offset)
        offset += len(batch)
        handed.append(sum(len(p) for p in per_bucket.values()))
        for b, payloads in per_bucket.items():
            run_bucket(settings, stores[b], b, payloads, 1_000_000 + i)
    return handed


def test_the_profile_sums_the_batches_after_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "profile.txt"
    monkeypatch.setenv("MONITOR_STREAMING_PROFILE", str(path))
    records = [json.dumps(d).encode() for d in generate(200, 3, form="rounds", seed=1)]
    # the topic settings with the first round, then a batch per round
    batches = [records[: len(records) // 3], records[len(records) // 3 : 2 * len(records) // 3]]
    batches.append(records[len(batches[0]) + len(batches[1]) :])
    handed = _run(batches, scope="profile-test")

    applied, phases, loads, saves = profile_phases(path.read_text(), skip_batches=1)
    assert applied == handed[1] + handed[2]
    # the worker kept each bucket it wrote: every later load is a hit, and each batch of
    # whole rounds is stored as its input
    assert loads == {"hit": 2 * BUCKETS}
    assert saves == {"replay": 2 * BUCKETS}
    assert {"order", "apply", "save", "load"} <= set(phases)
    assert all(v >= 0 for v in phases.values())

    applied, _, loads, saves = profile_phases(path.read_text(), skip_batches=0)
    assert applied == sum(handed)
    assert loads == {"new": BUCKETS, "hit": 2 * BUCKETS}
    assert saves == {"snapshot": BUCKETS, "replay": 2 * BUCKETS}
