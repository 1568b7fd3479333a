"""The JVM's routing (``job.build_operator_input``): a partition's record keyed with
``contract.events.partition_key`` is routed by its key alone -- no parse of the record in
the JVM -- to the bucket its own fields would give; any other key, or none, routes by the
record's fields, as before. The worker checks a keyed record is the key's partition's
(``test_payload_decode.py``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from monitor.collector.build import event_key
from monitor.contract.events import parse_event, partition_key
from monitor.dev.synth import generate
from streaming import operator as op
from streaming.job import build_operator_input

pytestmark = pytest.mark.spark

BUCKETS = 8


def _routed(spark: Any, rows: list[tuple[bytes | None, bytes]]) -> dict[int, list[tuple[int, str]]]:
    """Offset -> sorted (bucket, owner field of the payload) of each record."""
    df = spark.createDataFrame(
        [(k, v, "events", 0, i) for i, (k, v) in enumerate(rows)],
        "key binary, value binary, topic string, partition int, offset long",
    )
    out: dict[int, list[tuple[int, str]]] = {}
    for r in build_operator_input(df, BUCKETS).collect():
        _, so, owner, *_ = r.payload.split(op.SEP)
        out.setdefault(int(so), []).append((r.bucket, owner))
    return {k: sorted(v) for k, v in out.items()}


def test_a_partitions_key_routes_its_record_where_its_fields_would(spark: Any) -> None:
    raws = [
        json.dumps(e, separators=(",", ":")).encode()
        for e in generate(150, 2, form="rounds", seed=3, collector_fields=True)
    ]
    raws += [json.dumps(e).encode() for e in generate(50, 1, seed=4) if e["kind"] == "replica"]
    keys = [event_key(parse_event(r)) for r in raws]
    by_key = _routed(spark, list(zip(keys, raws, strict=True)))
    by_fields = _routed(spark, [(None, r) for r in raws])
    assert len(by_key) == len(by_fields) == len(raws)
    n_keyed = 0
    for i, key in enumerate(keys):
        buckets = [b for b, _ in by_key[i]]
        assert buckets == [b for b, _ in by_fields[i]], raws[i][:200]
        if key.startswith(b"krm1/"):
            assert by_key[i] == [(buckets[0], op.RECORD_KEYED + key.decode())]
            n_keyed += 1
        else:  # topic and broker events: every bucket, as before
            assert len(buckets) == BUCKETS and by_key[i] == by_fields[i]
    assert n_keyed > 300


def test_any_other_key_routes_by_the_records_fields(spark: Any) -> None:
    e = next(x for x in generate(1, 1, form="rounds", seed=5) if x["kind"] == "partition")
    e = {**e, "cluster": "a/b"}  # a cluster with a slash: the key's last part, whole
    raw = json.dumps(e).encode()
    good = partition_key("a/b", e["topic"], e["partition"])
    p, t = e["partition"], e["topic"]
    others = [
        None,
        f"a/b/{t}/{p}",  # the key before
        f"krm1/x/{t}/a/b",
        f"krm1/-1/{t}/a/b",
        f"krm1/{p}/{t}",
        f"krm1/{p}//a/b",
        f"krm1/{p}/{t}/",
        f"krm1/{p}/{t}/a{op.SEP}b",
        f"krm1/{p}/{t}/" + "c" * op.MAX_KEY_BYTES,
        f"krm1/0{p}/{t}/a/b",  # the same partition, spelt otherwise: not refused
        f"krm1/ {p}/{t}/a/b",
    ]
    rows: list[tuple[bytes | None, bytes]] = [(good.encode(), raw)]
    rows += [(None if k is None else k.encode(), raw) for k in others]
    rows.append((good.encode()[:-1] + b"\xff", raw))  # a key not UTF-8
    others.append("(not UTF-8)")
    rows.append((good.encode(), raw[:-1] + b',"x":"\xff"}'))  # not UTF-8: dead, as before
    routed = _routed(spark, rows)
    (bucket, owner), = routed[0]  # fmt: skip
    assert owner == op.RECORD_KEYED + good
    for i in range(1, len(others) + 1):
        assert routed[i] == [(bucket, op.RECORD_OWNER)], others[i - 1]
    assert routed[len(rows) - 1] == [(op.DEAD_BUCKET, "f")]
