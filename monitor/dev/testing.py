"""Helpers for writing event sequences by hand (tests, scenarios, benchmarks).

>>> tl = Timeline(topic="orders")
>>> tl.meta(leader=1, epoch=0, replicas=[1, 2], isr=[1, 2], hw=0)["kind"]
'partition'
>>> tl.advance(5_000).replica(2, leo=10)["observed_at"] - T0
5000
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

#: A fixed start time (2023-11-14T22:13:20Z) so that scenario files are reproducible.
T0 = 1_700_000_000_000


class Timeline:
    """Builds contract events (as dicts) for one cluster, advancing a virtual clock."""

    def __init__(
        self, cluster: str = "lab", topic: str = "t", partition: int = 0, start: int = T0
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.now = start
        self.events: list[dict[str, Any]] = []

    def advance(self, ms: int) -> Timeline:
        self.now += ms
        return self

    def _emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        ev = {
            "schema_version": 1,
            "kind": kind,
            "cluster": self.cluster,
            "observed_at": self.now,
            **{k: v for k, v in fields.items() if v is not None},
        }
        self.events.append(ev)
        return ev

    def meta(
        self,
        leader: int | None,
        epoch: int,
        replicas: Sequence[int],
        isr: Sequence[int],
        hw: int | None = None,
        elr: Sequence[int] | None = None,
        topic: str | None = None,
        partition: int | None = None,
        epoch_start: int | None = None,
        topic_id: str | None = None,
        adding: Sequence[int] | None = None,
        removing: Sequence[int] | None = None,
    ) -> dict[str, Any]:
        ev = self._emit(
            "partition",
            topic_id=topic_id,
            adding_replicas=list(adding) if adding is not None else None,
            removing_replicas=list(removing) if removing is not None else None,
            topic=topic or self.topic,
            partition=self.partition if partition is None else partition,
            leader_epoch=epoch,
            replicas=list(replicas),
            isr=list(isr),
            high_watermark=hw,
            eligible_leader_replicas=list(elr) if elr is not None else None,
            epoch_start_offset=epoch_start,
        )
        ev["leader"] = leader  # explicit null when offline
        return ev

    def replica(
        self,
        broker: int,
        leo: int,
        hw: int | None = None,
        topic: str | None = None,
        partition: int | None = None,
    ) -> dict[str, Any]:
        return self._emit(
            "replica",
            topic=topic or self.topic,
            partition=self.partition if partition is None else partition,
            broker=broker,
            log_end_offset=leo,
            high_watermark=hw,
        )

    def config(
        self, rf: int, min_isr: int, unclean: bool = False, topic: str | None = None
    ) -> dict[str, Any]:
        return self._emit(
            "topic_config",
            topic=topic or self.topic,
            replication_factor=rf,
            min_insync_replicas=min_isr,
            unclean_leader_election_enable=unclean,
        )

    def deleted(self, topic: str | None = None, topic_id: str | None = None) -> dict[str, Any]:
        """The collector's word that a topic it knew is gone from a complete metadata read."""
        return self._emit("topic_deleted", topic=topic or self.topic, topic_id=topic_id)

    def broker(self, broker: int, alive: bool = True, **counters: Any) -> dict[str, Any]:
        """A broker report; ``counters``: e.g. ``unclean_elections_total=3``."""
        return self._emit("broker", broker=broker, alive=alive, **counters)

    def jsonl(self) -> str:
        return to_jsonl(self.events)


def to_jsonl(events: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
