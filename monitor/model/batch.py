"""A batch of records applied to a cluster model, noting which partitions each touched,
and which of those say something new.

What the Spark operator does with the records of a micro-batch, in their one order:
:meth:`ClusterModel.apply` of each in turn -- the same findings, the same states -- with a
note, per partition, of what it was before its first record of the batch
(:func:`apply_noting`); then the partitions whose state row to write (:func:`rows_to_write`):
those whose shape changed (:meth:`PartitionState.shape`), and the others at their refresh
instants (:func:`refresh_due`).

Its own module so that mypyc compiles it with the model (``monitor.model._native``): the
loop runs once per partition-round (``bench.operator_bench``, alternated with the loop
interpreted in ``streaming.operator``: the ``apply`` phase 12.5 -> 10.1 µs a round, the
rows chosen 2.8 -> 1.9; docs/benchmarks.md). ``cluster`` stays interpreted (its model is
pickled through its ``__dict__``). The common record -- a round of a partition the model
holds, no topic deleted lately -- is what ``ClusterModel._apply_round`` then does:
:func:`monitor.model.partition.step_round` in the topic's context. Every other record
goes through :meth:`ClusterModel.apply`; ``tests/model/test_round_step.py`` holds the
two equal on every scenario and stream.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from monitor.model import partition as part
from monitor.model.cluster import ClusterModel, PartitionKey
from monitor.model.events import (
    ModelRecord,
    PartitionMeta,
    PartitionRound,
    ReplicaReport,
    TopicConfigReport,
)
from monitor.model.findings import Finding
from monitor.model.state import PartitionState


def apply_noting(
    model: ClusterModel,
    records: list[ModelRecord],
    touched: dict[PartitionKey, object],
    new: object,
    topic_config: Callable[[TopicConfigReport], list[Finding]],
    found: list[Finding],
) -> None:
    """Apply ``records`` to ``model`` in order; their findings appended to ``found``.

    ``touched``: a partition's key -> what it was just before its first record since
    ``touched`` was empty: ``(its shape, its last_seen)`` (:meth:`PartitionState.shape`),
    or ``new`` where it was not in the model yet. ``topic_config`` applies a topic's
    settings (the caller notes the partitions they re-judge)."""
    partitions = model.partitions
    deleted = model.deleted
    for ev in records:
        kind = type(ev)
        if kind is PartitionRound:
            assert isinstance(ev, PartitionRound)
            meta = ev.meta
            pk = (meta.cluster, meta.topic, meta.partition)
            state = partitions.get(pk)
            if pk not in touched:
                touched[pk] = new if state is None else (state.shape(), state.last_seen)
            if state is None or deleted:
                fs = model.apply(ev)  # a new partition, or a topic deleted lately
            else:
                ctx = model.context(meta.cluster, meta.topic)
                fs = part.step_round(state, ev.samples, meta, ctx)
        elif kind is PartitionMeta or kind is ReplicaReport:
            assert isinstance(ev, PartitionMeta | ReplicaReport)
            pk = (ev.cluster, ev.topic, ev.partition)
            if pk not in touched:
                prior = partitions.get(pk)
                touched[pk] = new if prior is None else (prior.shape(), prior.last_seen)
            fs = model.apply(ev)
        elif kind is TopicConfigReport:
            assert isinstance(ev, TopicConfigReport)
            fs = topic_config(ev)
        else:
            fs = model.apply(ev)
        if fs:
            found.extend(fs)


def refresh_due(key: PartitionKey, before_ms: int, now_ms: int, period_ms: int) -> bool:
    """Whether one of partition ``key``'s refresh instants fell in ``(before_ms, now_ms]``.

    The times are the partition's own telemetry time (its ``last_seen`` before and after
    the batch): so a stored row's ``updated_at`` is never more than ``period_ms`` behind
    the partition's newest telemetry, and a replay writes the same rows. Each partition's
    instants are ``period_ms`` apart, offset by a hash of its topic and number: the
    refreshes of idle partitions spread over the period instead of all coming in the same
    round. ``before_ms`` < 0 (nothing seen before) or ``period_ms`` <= 0: due.

    >>> period = 60_000  # 30 s of telemetry: about half the partitions are due
    >>> sum(refresh_due(("c", "t", p), 0, 30_000, period) for p in range(1000)) in range(400, 600)
    True
    >>> all(refresh_due(("c", "t", p), 0, period, period) for p in range(100))
    True
    """
    if period_ms <= 0 or before_ms < 0:
        return True
    offset = (zlib.crc32(key[1].encode()) + key[2] * 40_503) % period_ms
    return (now_ms + offset) // period_ms != (before_ms + offset) // period_ms


def rows_to_write(
    partitions: dict[PartitionKey, PartitionState],
    touched: dict[PartitionKey, object],
    period_ms: int,
    states: dict[PartitionKey, PartitionState | None],
    newest: dict[str, int],
) -> list[PartitionState]:
    """The states of the touched partitions (``touched``, as :func:`apply_noting` noted
    them; a marker of one item -- new, re-judged -- for one whose row is written whatever
    it says) whose row says something new: its shape changed, or one of its refresh
    instants passed (:func:`refresh_due`; ``period_ms`` <= 0: every one).

    Fills ``states`` with each touched partition's state, in the order first touched
    (one forgotten since -- its topic deleted -- is left out), and ``newest`` with each
    cluster's newest telemetry among them."""
    written: list[PartitionState] = []
    for k, before in touched.items():
        ps = partitions.get(k)
        if ps is None:
            continue
        states[k] = ps
        seen = ps.last_seen
        if seen > newest.get(k[0], -1):
            newest[k[0]] = seen
        if period_ms <= 0 or ps.open or not isinstance(before, tuple) or len(before) != 2:
            written.append(ps)
            continue
        shape, was_seen = before
        # The refresh first: it needs no shape (a quarter of the partitions at a 30 s
        # cadence and the default 120 s period).
        if (
            not isinstance(was_seen, int)
            or refresh_due(k, was_seen, seen, period_ms)
            or ps.shape() != shape
        ):
            written.append(ps)
    return written
