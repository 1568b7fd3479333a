"""A findings topic of six partitions: every consumer sees a condition open before it
resolves (issue 20).

Findings used to be keyed by id, and a condition's ``open`` and ``resolved`` have two ids:
on a topic of several partitions they landed in two partitions, and a consumer could read
the resolve first. Keyed by subject (``Finding.subject_key``), both are in one partition,
in the order the job wrote them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from monitor.dev.lab.admin import create_topic
from streaming.job import start
from tests.scenarios import SCENARIOS
from tests.streaming.e2e import SHIFT_MS, kafka_config
from tests.streaming.helpers import renamed
from tests.streaming.kafka_io import produce_events, publish_times, read_all

pytestmark = [pytest.mark.spark, pytest.mark.lab]

#: Scenarios whose conditions open and resolve (several subjects each).
NAMES = [
    "under_min_isr_and_recovery",
    "broker_goes_silent",
    "follower_stuck_in_isr",
    "leader_flapping",
    "reassignment_replaces_every_replica",
    "unclean_election",
]


def test_open_before_resolve_in_every_partition(spark: Any, kafka_lab: Any, tmp_path: Path) -> None:
    boot = kafka_lab.bootstrap_servers
    topics = {r: f"{r}-subject-{tmp_path.name[-12:]}" for r in ("events", "findings", "deadletter")}
    for role, name in topics.items():
        create_topic(boot, name, partitions=6 if role == "findings" else 3)
    records = [
        line
        for n in NAMES
        for line in renamed(
            next(s for s in SCENARIOS if s.name == n).path.read_bytes().splitlines(),
            n,
            shift_ms=SHIFT_MS,
        )
    ]
    produce_events(boot, topics["events"], records, publish_times(records))
    job = start(spark, kafka_config(tmp_path, boot, topics))
    try:
        job.drain(timeout_s=300)
    finally:
        job.stop()

    written = read_all(boot, topics["findings"])
    assert len({r.partition for r in written}) >= 3  # the subjects spread over partitions
    resolves = 0
    for part in {r.partition for r in written}:
        seen_open: set[tuple[Any, ...]] = set()
        for r in sorted((r for r in written if r.partition == part), key=lambda r: r.offset):
            f = json.loads(r.value)
            condition = (
                f["cluster"], f["topic"], f["partition"], f["broker"], f["kind"], f["opened_at"]
            )  # fmt: skip
            if f["state"] == "open":
                seen_open.add(condition)
            elif f["state"] == "resolved":
                resolves += 1
                assert condition in seen_open, f"partition {part}: resolved before open: {f}"
    assert resolves >= 5, resolves
