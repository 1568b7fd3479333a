"""Synthetic telemetry that follows the watermark rules, with injected faults.

For benchmarks and soak tests: ``generate()`` yields contract events (dicts) for a cluster
of ``partitions`` partitions (RF 3) in collection rounds, in time order. Each round has, per
partition, the leader's replica report, the two followers' reports (a few offsets behind,
sampled a little later) and the metadata (ISR, epoch, HW). Faults, drawn per partition and
round with probability ``fault_rate``, are stalls (a follower stops fetching, is dropped from
the ISR, then catches up and rejoins) and clean leader elections; every fault injected is
recorded in ``SynthStats`` so a test can match findings against it.

>>> stats = SynthStats()
>>> events = list(generate(partitions=4, rounds=2, stats=stats))
>>> len(events), stats.events
(45, 45)
"""

from __future__ import annotations

import base64
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from monitor.dev.rounds import sample_of
from monitor.dev.testing import T0


@dataclass
class SynthStats:
    events: int = 0
    stalls: int = 0
    elections: int = 0
    injected: list[tuple[str, str, int, int]] = field(default_factory=list)


@dataclass
class _P:
    replicas: tuple[int, int, int]
    leader_idx: int = 0
    epoch: int = 0
    leo: int = 0
    stalled: int = -1  # index of the stalled follower, or -1
    stall_leo: int = 0
    stall_rounds: int = 0
    out_of_isr: bool = False


def generate(
    partitions: int,
    rounds: int,
    *,
    brokers: int = 6,
    topics: int = 0,
    interval_ms: int = 5_000,
    rate_per_round: int = 500,
    fault_rate: float = 0.0,
    lag_rounds: int = 7,
    cluster: str = "synth",
    seed: int = 0,
    start: int = T0,
    stats: SynthStats | None = None,
    form: str = "replica",
    idle_fraction: float = 0.0,
    collector_fields: bool = False,
) -> Iterator[dict[str, Any]]:
    """Yield events round by round. ``topics`` defaults to one topic per 100 partitions.

    ``form``: ``"replica"``, a partition's round as its three ``replica`` events then its
    ``partition`` event; ``"rounds"``, one round record (the ``partition`` event carrying
    the same three samples, each with its own stamp: :mod:`monitor.dev.rounds`).

    ``idle_fraction``: this share of the partitions (every partition whose index mod 100 is
    below ``100 x idle_fraction``) takes no writes after the first round: its offsets stop,
    its followers are caught up, no fault is injected there -- what many partitions of a
    large fleet look like between two rounds.

    ``collector_fields``: the fields the collector sends beside these, as it sends them --
    each topic's ``topic_id``, ``offline_replicas`` (``[]``), each replica's
    ``log_start_offset`` and each follower's ``fetch_lag`` (its leader's log end minus its
    own) -- so that a benchmark reads records of the collector's size and shape. They change
    no finding here: no topic is recreated, no replica is offline, and the lags are the log
    ends' differences.

    A stall lasts ``lag_rounds + 3`` rounds: after ``lag_rounds`` (the ISR drops the follower
    only then, as Kafka does after replica.lag.time.max.ms) the follower is out of the ISR.
    """
    rng = random.Random(seed)
    idle_below = round(100 * idle_fraction)
    stats = stats if stats is not None else SynthStats()
    n_topics = topics or max(1, partitions // 100)
    names = [f"topic-{i:05d}" for i in range(n_topics)]
    # A topic id as Kafka prints one: 22 characters of URL-safe base64 (16 bytes).
    ids = [base64.urlsafe_b64encode(i.to_bytes(16, "big")).decode()[:22] for i in range(n_topics)]
    parts: list[_P] = []
    for i in range(partitions):
        first = i % brokers
        parts.append(_P(replicas=(first, (first + 1) % brokers, (first + 2) % brokers)))

    def ev(kind: str, t: int, **fields: Any) -> dict[str, Any]:
        stats.events += 1
        return {"schema_version": 1, "kind": kind, "cluster": cluster, "observed_at": t, **fields}

    for name in names:
        yield ev(
            "topic_config",
            start,
            topic=name,
            replication_factor=3,
            min_insync_replicas=2,
            unclean_leader_election_enable=False,
        )
    for r in range(rounds):
        t = start + r * interval_ms
        for b in range(brokers):
            yield ev("broker", t, broker=b, alive=True)
        for i, p in enumerate(parts):
            topic, pid = names[i % n_topics], i // n_topics
            idle = i % 100 < idle_below
            if fault_rate and not idle and p.stalled < 0 and rng.random() < fault_rate:
                if rng.random() < 0.5:
                    p.stalled = rng.choice([x for x in range(3) if x != p.leader_idx])
                    p.stall_leo, p.stall_rounds = p.leo, 0
                    stats.stalls += 1
                    stats.injected.append(("stall", topic, pid, t))
                else:
                    p.leader_idx = (p.leader_idx + 1) % 3
                    p.epoch += 1
                    stats.elections += 1
                    stats.injected.append(("election", topic, pid, t))
            p.leo += 0 if idle and r else rate_per_round
            leader = p.replicas[p.leader_idx]
            extra: dict[str, Any] = {"log_start_offset": 0} if collector_fields else {}
            samples = [
                ev(
                    "replica",
                    t,
                    topic=topic,
                    partition=pid,
                    broker=leader,
                    log_end_offset=p.leo,
                    **extra,
                )
            ]
            isr = list(p.replicas)
            if p.stalled >= 0:
                p.stall_rounds += 1
                if p.stall_rounds > lag_rounds:
                    p.out_of_isr = True
                if p.stall_rounds > lag_rounds + 3:
                    p.stalled, p.out_of_isr = -1, False
            for idx in range(3):
                if idx == p.leader_idx:
                    continue
                if idx == p.stalled:
                    leo = p.stall_leo
                    if p.out_of_isr:
                        isr.remove(p.replicas[idx])
                else:
                    leo = p.leo if idle else p.leo - rng.randint(0, 5)
                if collector_fields:
                    extra = {"log_start_offset": 0, "fetch_lag": p.leo - leo}
                samples.append(
                    ev(
                        "replica",
                        t + 50 + idx * 20,
                        topic=topic,
                        partition=pid,
                        broker=p.replicas[idx],
                        log_end_offset=leo,
                        **extra,
                    )
                )
            # HW: the leader's LEO a fetch round back, held down by a stalled in-ISR follower.
            holding = p.stalled >= 0 and not p.out_of_isr
            committed = min(p.leo - 5, p.stall_leo) if holding else p.leo - (0 if idle else 5)
            if form == "rounds":
                stats.events -= len(samples)  # records, not the events they carry
                more: dict[str, Any] = {"replica_samples": [sample_of(x, t + 200) for x in samples]}
            else:
                yield from samples
                more = {}
            if collector_fields:
                more = {"topic_id": ids[i % n_topics], "offline_replicas": [], **more}
            yield ev(
                "partition",
                t + 200,
                topic=topic,
                partition=pid,
                leader=leader,
                leader_epoch=p.epoch,
                replicas=list(p.replicas),
                isr=isr,
                high_watermark=max(0, committed),
                **more,
            )
