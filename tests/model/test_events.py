"""The event records whose ``__init__`` is written out (``monitor.model.events``) take their
fields as the dataclass declares them: in order, with the declared defaults -- whichever
build runs them (the source, or the compiled model, whose classes check each value's type:
hence values of the right types, distinct per field)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from monitor.model.events import PartitionMeta, PartitionRound, ReplicaReport

WRITTEN_OUT = (PartitionMeta, ReplicaReport, PartitionRound)

_META = PartitionMeta("c", 1, "t", 0, 1, 2, (1, 2), (1,))
_SAMPLE = ReplicaReport("c", 1, "t", 0, 1, 100)
#: A value of the field's type for every field of those classes, all different.
SAMPLE_VALUES: dict[str, Any] = {
    "cluster": "cluster-a",
    "observed_at": 1_000,
    "topic": "topic-b",
    "partition": 7,
    "leader": 3,
    "leader_epoch": 11,
    "replicas": (3, 4, 5),
    "isr": (3, 4),
    "offline_replicas": (5,),
    "eligible_leader_replicas": (6,),
    "high_watermark": 120,
    "log_start_offset": 13,
    "epoch_start_offset": 110,
    "topic_id": "id-c",
    "adding_replicas": (8,),
    "removing_replicas": (9,),
    "broker": 4,
    "log_end_offset": 125,
    "fetch_lag": 2,
    "meta": _META,
    "samples": (_SAMPLE,),
}


def _values(cls: type) -> dict[str, Any]:
    names = [f.name for f in dataclasses.fields(cls)]
    missing = [n for n in names if n not in SAMPLE_VALUES]
    assert not missing, f"give SAMPLE_VALUES a value for {missing}"
    return {n: SAMPLE_VALUES[n] for n in names}


@pytest.mark.parametrize("cls", WRITTEN_OUT, ids=lambda c: c.__name__)
def test_positional_arguments_fill_the_fields_in_order(cls: type) -> None:
    values = _values(cls)
    made = cls(*values.values())
    assert {n: getattr(made, n) for n in values} == values


@pytest.mark.parametrize("cls", WRITTEN_OUT, ids=lambda c: c.__name__)
def test_keywords_fill_their_fields_and_omitted_ones_take_the_declared_defaults(
    cls: type,
) -> None:
    values = _values(cls)
    made = cls(**values)
    assert {n: getattr(made, n) for n in values} == values
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING]
    made = cls(*[values[f.name] for f in required])
    for f in fields[len(required) :]:
        assert getattr(made, f.name) == f.default, f.name


def test_records_compare_and_show_as_dataclasses() -> None:
    a = ReplicaReport("c", 1, "t", 0, 2, 100)
    assert a == ReplicaReport("c", 1, "t", 0, 2, 100, None, None, None)
    assert a != ReplicaReport("c", 1, "t", 0, 2, 101)
    assert repr(a).startswith("ReplicaReport(cluster='c', observed_at=1")


@pytest.mark.parametrize("cls", WRITTEN_OUT, ids=lambda c: c.__name__)
def test_records_copy_and_pickle(cls: type) -> None:
    made = cls(*_values(cls).values())
    assert copy.deepcopy(made) == made
    assert copy.copy(made) == made
    assert pickle.loads(pickle.dumps(made)) == made
