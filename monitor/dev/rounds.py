"""Round records from replica-event streams, for the equivalence tests and benchmarks.

A collector sends a partition's round as one ``partition`` event carrying its replicas'
samples (``replica_samples``, :mod:`monitor.contract.events`); older collectors, recordings
and the scenario files in ``tests/data`` send one ``replica`` event per sample. The two forms
mean the same events (:func:`monitor.model.order.unfold`); :func:`fold` turns the second
form into the first, so every scenario can be replayed both ways.

>>> evs = [
...     {"kind": "replica", "cluster": "c", "topic": "t", "partition": 0, "broker": 1,
...      "observed_at": 5, "log_end_offset": 9, "schema_version": 1},
...     {"kind": "partition", "cluster": "c", "topic": "t", "partition": 0,
...      "observed_at": 6, "schema_version": 1},
... ]
>>> [e["kind"] for e in fold(evs)], fold(evs)[0]["replica_samples"]
(['partition'], [{'broker': 1, 'log_end_offset': 9, 'observed_at': 5}])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from monitor.contract.events import AnyEvent, PartitionEvent, ReplicaEvent

#: The fields of a ``replica`` event a sample keeps (``observed_at`` only when it differs
#: from the round's).
SAMPLE_FIELDS = ("broker", "log_end_offset", "log_start_offset", "high_watermark", "fetch_lag")


def _key(ev: dict[str, Any]) -> tuple[Any, Any, Any]:
    return (ev.get("cluster"), ev.get("topic"), ev.get("partition"))


def sample_of(replica: dict[str, Any], round_at: int) -> dict[str, Any]:
    """The ``replica_samples`` item saying what a ``replica`` event says."""
    sample = {f: replica[f] for f in SAMPLE_FIELDS if replica.get(f) is not None}
    if replica["observed_at"] != round_at:
        sample["observed_at"] = replica["observed_at"]
    return sample


def fold(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stream with each partition's ``replica`` events carried by its next ``partition``
    event (at that event's place in the stream), where that says the same thing.

    A collection round reads the exporter pages (every sample stamped with the round's
    start), then the metadata (a later stamp): its records lie between the two stamps. So a
    partition's waiting replica events are folded into its next partition event when they
    share one stamp, no later than the partition event's, and every event between the first
    of them and the partition event carries one of the two stamps -- a replay that releases
    events by time then applies the same events in the same order. Otherwise (replica
    events of rounds without metadata, a stream of another shape) they stay as they are.
    Events that are not valid enough to tell (no kind, no stamp) are left alone.
    """
    out: list[dict[str, Any] | None] = []
    pending: dict[tuple[Any, Any, Any], list[int]] = {}
    for ev in events:
        kind = ev.get("kind")
        at = ev.get("observed_at")
        if kind not in ("replica", "partition") or not isinstance(at, int):
            out.append(ev)
            continue
        if kind == "replica":
            pending.setdefault(_key(ev), []).append(len(out))
            out.append(ev)
            continue
        waiting = pending.pop(_key(ev), [])
        if waiting and "replica_samples" not in ev:
            stamps = {out[i]["observed_at"] for i in waiting}  # type: ignore[index]
            between = (e for e in out[waiting[0] :] if e is not None)
            if (
                len(stamps) == 1
                and min(stamps) <= at
                and all(
                    e.get("observed_at") in stamps or e.get("observed_at") == at for e in between
                )
            ):
                samples = []
                for i in waiting:
                    r = out[i]
                    assert r is not None
                    samples.append(sample_of(r, at))
                    out[i] = None
                ev = {**ev, "replica_samples": samples}
        out.append(ev)
    return [e for e in out if e is not None]


def unfold_events(events: Iterable[AnyEvent]) -> list[ReplicaEvent]:
    """The ``replica`` events a stream says: its own, and each round record's samples as the
    ``replica`` events they mean (the record's topic and partition, the sample's stamp, else
    the record's) -- the contract-level reading of :func:`monitor.model.order.unfold`."""
    out: list[ReplicaEvent] = []
    for e in events:
        if isinstance(e, ReplicaEvent):
            out.append(e)
        elif isinstance(e, PartitionEvent):
            out.extend(
                ReplicaEvent(
                    schema_version=1,
                    kind="replica",
                    cluster=e.cluster,
                    observed_at=e.observed_at if s.observed_at is None else s.observed_at,
                    topic=e.topic,
                    partition=e.partition,
                    **s.model_dump(exclude={"observed_at"}),
                )
                for s in e.replica_samples or ()
            )
    return out
