"""A batch of records applied to a cluster model, noting which partitions each touched.

What the Spark operator and ``monitor replay`` do with the records of a micro-batch, in
their one order: :meth:`ClusterModel.apply` of each in turn -- the same findings, the same
states -- with a note, per partition, of what it was before its first record of the batch
(the operator writes a partition's state row only when it says something new).

Its own module so that mypyc compiles it with the model (``monitor.model._native``): the
loop runs once per partition-round, and interpreted it was a third of a round's cost
outside the model's transition (``bench.operator_bench``). ``cluster`` stays interpreted
(its model is pickled through its ``__dict__``); the common record -- a partition's whole
round, of a topic not deleted -- is applied here directly, as :meth:`ClusterModel.apply`
would (:func:`monitor.model.partition.step_round`); every other record goes through it.
"""

from __future__ import annotations

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
    contexts = model.contexts
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
                tk = (meta.cluster, meta.topic)
                ctx = contexts.get(tk)
                if ctx is None:
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
