"""A batch applied by :func:`monitor.model.batch.apply_noting` is the batch applied record
by record with ``ClusterModel.apply``.

Every scenario, property stream and simulated cluster goes through it in
``tests/model/test_round_step.py`` (and compiled against the source in
``tests/model/test_native.py``); here, the records it must not take its short path for.
"""

from __future__ import annotations

import copy
from typing import Any

from monitor.model import ClusterModel, PartitionMeta, PartitionRound, ReplicaReport
from monitor.model.events import TopicDeleted
from tests.model.test_round_step import _noted


def _round(t_samples: int, t_meta: int, topic_id: str) -> PartitionRound:
    meta = PartitionMeta("c", t_meta, "t", 0, 1, 3, (1, 2, 3), (1, 2, 3), topic_id=topic_id)
    return PartitionRound(
        meta, tuple(ReplicaReport("c", t_samples, "t", 0, b, 100 + t_meta) for b in (1, 2, 3))
    )


def _both(model: ClusterModel, batch: list[Any]) -> tuple[list[str], list[str]]:
    reference = copy.deepcopy(model)
    one_by_one = [f"{f.kind}:{f.state}@{f.at}" for ev in batch for f in reference.apply(ev)]
    found = _noted(model, batch)  # also checks what it noted of each partition
    assert repr(model.partitions) == repr(reference.partitions)
    return [f"{f.kind}:{f.state}@{f.at}" for f in found], one_by_one


def test_a_round_of_a_topic_deleted_and_recreated_goes_through_the_model() -> None:
    """The topic deleted at 20 and listed again at 30 under a new id; a later round
    carries a sample stamped before the deletion (the old incarnation's, from a slow
    broker): the model ignores it (``ClusterModel.apply``), where the round's short path
    would count it a late sample of the new incarnation."""
    model = ClusterModel()
    found, expected = _both(
        model, [_round(10, 10, "AAAAAAAAAAAAAAAAAAAAAA"), TopicDeleted("c", 20, "t")]
    )
    assert found == expected
    found, expected = _both(model, [_round(30, 30, "BBBBBBBBBBBBBBBBBBBBBB")])
    assert found == expected and "topic_recreated:event@30" in found
    late = _round(40, 40, "BBBBBBBBBBBBBBBBBBBBBB")
    late.samples[2].observed_at = 15  # before the deletion
    found, expected = _both(model, [late])
    assert found == expected
    assert model.partitions[("c", "t", 0)].late_events == 0
