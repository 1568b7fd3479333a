"""The Spark schema derived from ``monitor.contract.events``: every field of every kind, with
the type its constraints call for (``streaming.schema``). The records' own validation is
:mod:`streaming.records`' (``test_records.py``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streaming import schema as S
from tests.streaming.record_cases import BROKER, PARTITION_ROUND, with_tail


def test_struct_is_derived_from_the_contract() -> None:
    """Every field of every kind is in the struct with the type its constraints call for."""
    names = {f.name: f.dataType.simpleString() for f in S.EVENT_STRUCT.fields}
    for kind, model in S.MODELS.items():
        for field in model.model_fields:
            if field not in ("kind", "schema_version"):
                assert field in names, (kind, field)
    assert names["partition"] == "int"  # le=INT32_MAX -> int
    assert names["observed_at"] == "bigint"
    assert names["replicas"] == "array<int>"
    assert names["topic"] == "string"
    assert names["alive"] == "boolean"
    # a list of nested models: a struct of the model's fields, in model order
    assert names["replica_samples"] == (
        "array<struct<broker:int,log_end_offset:bigint,log_start_offset:bigint,"
        "high_watermark:bigint,fetch_lag:bigint,observed_at:bigint>>"
    )
    assert set(S.KINDS) == {"partition", "replica", "topic_config", "topic_deleted", "broker"}
    topic = next(r for r in S.RULES["partition"] if r.name == "topic")
    assert topic.scalar.pattern == "^[a-zA-Z0-9._-]+$" and topic.scalar.max_length == 249


def test_the_typed_struct_has_every_field_once_and_a_corrupt_flag() -> None:
    """What the ceiling's typed ``from_json`` reads (``bench.spark_bench --mode ceiling``):
    ``kind``, every field of every kind once, with the event struct's types."""
    typed = [(f.name, f.dataType.simpleString()) for f in S.TYPED_STRUCT.fields]
    assert typed[0] == ("kind", "string") and typed[-1] == ("_corrupt", "string")
    assert len({n for n, _ in typed}) == len(typed) == len(S.ALL_FIELDS) + 1
    event = {f.name: f.dataType.simpleString() for f in S.EVENT_STRUCT.fields}
    assert all(event[n] == t for n, t in typed[1:-1] if n in event)


@pytest.mark.spark
def test_typed_struct_reads_a_round_record_and_flags_what_it_cannot(spark: Any) -> None:
    """Strict JSON, as the collector writes it: a round record's values, typed; a record
    Jackson cannot read strictly (a ``NaN`` token) flagged corrupt."""
    records = [json.dumps(PARTITION_ROUND).encode(), with_tail(BROKER, ',"x":NaN')]
    df = spark.createDataFrame([(i, r) for i, r in enumerate(records)], "i long, value binary")
    rows = df.orderBy("i").select(S.typed_struct("value").alias("p")).collect()
    good, bad = (r.p.asDict(recursive=True) for r in rows)
    assert good["_corrupt"] is None and good["topic"] == PARTITION_ROUND["topic"]
    assert [s["log_end_offset"] for s in good["replica_samples"]] == [12, 11, 9]
    assert bad["_corrupt"] is not None
