"""The Spark schema and SQL validation derived from ``monitor.contract.events`` agree with pydantic.

pydantic (``monitor.contract.events.parse_event``) is the contract; ``streaming.schema.validate`` is
its translation into Spark SQL. Every record here — the seed scenario files, hand-picked
hostile records and about 1,800 hypothesis-generated mutations of valid events
(derandomized: the same ones on every run) — must get the same verdict from both, the
Spark reason must name the field pydantic names first, and every record must be either
accepted or rejected (in = accepted + dead-lettered).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from monitor.contract.events import parse_event
from streaming import schema as S
from tests.streaming.schema_cases import (
    BASES,
    BROKER,
    CONFIG,
    PARTITION,
    PARTITION_ROUND,
    REPLICA,
    compare,
    scenario_records,
    spark_verdicts,
    with_tail,
)

pytestmark = pytest.mark.spark

#: A valid sample (replica_samples item) as JSON text.
SAMPLE = '{"broker":1,"log_end_offset":5}'


def samples(raw: str) -> bytes:
    """The round record with its ``replica_samples`` replaced by raw JSON text (a duplicate
    key after the valid list: the last one counts, for both readers)."""
    return with_tail(PARTITION_ROUND, ',"replica_samples":' + raw)


#: Round records (lists of nested models): every way an item or the list can be wrong, and
#: the valid edge cases.
ROUND_HOSTILE: list[bytes] = [
    samples("5"),
    samples('"x"'),
    samples("{}"),
    samples(SAMPLE),  # an object, not a list of them
    samples("[null]"),
    samples(f"[{SAMPLE},null]"),
    samples("[5]"),
    samples('["x"]'),
    samples("[[1]]"),
    samples("[true]"),
    samples("[{}]"),
    samples(f"[{SAMPLE},{{}},5]"),  # the first bad item is reported
    samples('[{"log_end_offset":5}]'),
    samples('[{"broker":1}]'),
    samples('[{"broker":null,"log_end_offset":5}]'),
    samples('[{"broker":1,"log_end_offset":-1}]'),
    samples('[{"broker":1,"log_end_offset":9223372036854775808}]'),
    samples('[{"broker":1,"log_end_offset":9223372036854775807}]'),
    samples('[{"broker":2147483648,"log_end_offset":5}]'),
    samples('[{"broker":-1,"log_end_offset":5}]'),
    samples('[{"broker":1,"log_end_offset":"5"}]'),
    samples('[{"broker":1,"log_end_offset":5.0}]'),
    samples('[{"broker":1,"log_end_offset":5e0}]'),
    samples('[{"broker":true,"log_end_offset":5}]'),
    samples('[{"broker":1,"log_end_offset":[5]}]'),
    samples('[{"broker":1,"log_end_offset":5,"fetch_lag":-1}]'),
    samples('[{"broker":1,"log_end_offset":5,"fetch_lag":"1"}]'),
    samples('[{"broker":1,"log_end_offset":5,"observed_at":-1}]'),
    samples('[{"broker":1,"log_end_offset":5,"observed_at":null,"high_watermark":null}]'),
    samples('[{"broker":1,"log_end_offset":5,"x":{"y":{"broker":"z"}}}]'),  # unknown: ignored
    samples('[{"broker":1,"log_end_offset":5,"x":"}"}]'),
    samples('[{"broker":1,"log_end_offset":5,"x":""broker":-1}"}]'),
    samples('[{"broker":1,"log_end_offset":5,"x":NaN}]'),
    samples('[{"broker":1,"log_end_offset":5,"Broker":-7}]'),
    samples('[{"broker":1,"log_end_offset":5,"broker":null}]'),  # duplicates: the last counts
    samples('[{"broker":null,"log_end_offset":5,"broker":1}]'),
    samples('[{"broker":"x","log_end_offset":5,"broker":1}]'),
    samples('[{"broker":1,"log_end_offset":5,"broker":"x"}]'),
    samples("[" + ",".join([SAMPLE] * 1025) + "]"),
    samples("[" + ",".join([SAMPLE] * 1024) + "]"),
    samples("[" + ",".join(['{"broker":1,"log_end_offset":-5}'] * 1025) + "]"),
    samples("[]"),
    samples("null"),
    with_tail(PARTITION_ROUND, ',"replica_samples":null,"replica_samples":[{}]'),
    with_tail(PARTITION, ',"replica_samples":[null],"x":{}'),
    with_tail(PARTITION, ',"replica_samples":[null]'),  # no '}' but the event's own
    with_tail(PARTITION, ',"replica_samples":[null,null]'),
    json.dumps(PARTITION_ROUND).encode() + b"{}",
    json.dumps(PARTITION_ROUND).encode() + b" }",
    # another kind: an unknown key, ignored whatever it holds
    with_tail(BROKER, ',"replica_samples":[null]'),
    with_tail(BROKER, ',"replica_samples":[{"broker":-1}]'),
    with_tail(REPLICA, ',"replica_samples":5'),
]

HOSTILE: list[bytes] = [
    b"",
    b"   ",
    b"\n",
    b"not json",
    b"{",
    b'{"kind":"broker"',
    b"[1]",
    b"5",
    b'"x"',
    b"null",
    b"{}",
    b"\xff\xfe",
    b'{"kind":"broker","cluster":"\xc3"}',
    b'{"kind":"x"}',
    b'{"kind":5}',
    b'{"kind":null}',
    b'{"kind":["broker"]}',
    b'{"schema_version":2,"kind":"broker"}',
    b"\xef\xbb\xbf" + json.dumps(BROKER).encode(),  # UTF-8 BOM
    json.dumps(BROKER).encode() + b" x",
    json.dumps(BROKER).encode() + b" {}",
    json.dumps(BROKER).encode() + b"\n",
    # after the object, what may follow a nested object's closing brace (found by the round
    # records: the VARIANT path took these for valid)
    *(json.dumps(BROKER).encode() + t for t in (b"}", b" }", b",{}", b"][{}", b"]", b"}}")),
    with_tail(BROKER, ',"x":"{"') + b"}",  # a brace in a string balances the count
    with_tail(BROKER, ',"broker":"5"'),
    with_tail(BROKER, ',"broker":5.0'),
    with_tail(BROKER, ',"broker":1e0'),
    with_tail(BROKER, ',"broker":-1'),
    with_tail(BROKER, ',"broker":2147483648'),
    with_tail(BROKER, ',"broker":99999999999999999999999'),
    with_tail(BROKER, ',"broker":null'),
    with_tail(BROKER, ',"broker":true'),
    with_tail(BROKER, ',"alive":1'),
    with_tail(BROKER, ',"alive":"true"'),
    with_tail(BROKER, ',"alive":null'),
    with_tail(BROKER, ',"broker":2'),  # duplicate key: the last one wins in both
    with_tail(BROKER, ',"broker":"x"'),  # duplicate key, last one invalid
    with_tail(BROKER, ',"schema_version":true'),
    with_tail(BROKER, ',"schema_version":1.0'),
    with_tail(BROKER, ',"schema_version":1e0'),
    with_tail(BROKER, ',"schema_version":"1"'),
    with_tail(BROKER, ',"schema_version":false'),
    with_tail(BROKER, ',"schema_version":1.5'),
    # Past DECIMAL(38,18): the cast used to fail the whole query (found by the
    # generated-records test in CI).
    *(
        json.dumps(BROKER, separators=(",", ":"))
        .replace('"schema_version":1', f'"schema_version":{v}')
        .encode()
        for v in ("-1180591620717411303424", "1180591620717411303424.5", "1e400")
    ),
    with_tail(BROKER, ',"unclean_elections_total":-5'),
    with_tail(BROKER, ',"unclean_elections_total":9223372036854775807'),
    with_tail(BROKER, ',"unclean_elections_total":9223372036854775808'),
    with_tail(BROKER, ',"x":NaN'),
    with_tail(BROKER, ',"x":[NaN,-Infinity,Infinity]'),
    with_tail(BROKER, ',"x":"NaN"'),
    with_tail(BROKER, ',"broker":NaN'),
    with_tail(BROKER, ',"x":"\\ud800"'),
    with_tail(BROKER, ',"x":"\\ud83d\\ude00"'),
    with_tail(BROKER, ',"cluster":"\\ud83d\\ude00"'),
    with_tail(BROKER, ',"x":01'),
    with_tail(BROKER, ",\"x\":'a'"),
    with_tail(BROKER, ',"x":1.5e400'),
    with_tail(BROKER, ',"x":{"y":{"z":[1,{"w":"}"}]}}'),
    with_tail(BROKER, ',"x":"} x"'),
    with_tail(BROKER, ',"x":' + "[" * 200 + "]" * 200),
    with_tail(BROKER, ',"x":' + "[" * 201 + "]" * 201),
    with_tail(BROKER, ',"x":' + '{"a":' * 199 + "1" + "}" * 199),
    with_tail(BROKER, ',"x":' + '{"a":' * 200 + "1" + "}" * 200),
    with_tail(BROKER, ',"x":' + "[" * 1200 + "]" * 1200),
    with_tail(BROKER, ',"cluster":"' + "é" * 256 + '"'),
    with_tail(BROKER, ',"cluster":"' + "é" * 257 + '"'),
    with_tail(BROKER, ',"cluster":""'),
    with_tail(BROKER, ',"x":"' + "a" * 1_000_000 + '"'),
    with_tail(PARTITION, ',"topic":"t\\n"'),
    with_tail(PARTITION, ',"topic":"a b"'),
    with_tail(PARTITION, ',"topic":"' + "t" * 250 + '"'),
    with_tail(PARTITION, ',"topic":"' + "t" * 249 + '"'),
    with_tail(PARTITION, ',"topic":"ü"'),
    with_tail(PARTITION, ',"replicas":[1,"x",5.5]'),
    with_tail(PARTITION, ',"replicas":[1,null]'),
    with_tail(PARTITION, ',"replicas":[]'),
    with_tail(PARTITION, ',"replicas":[null]'),
    with_tail(PARTITION, ',"replicas":[-1]'),
    with_tail(PARTITION, ',"replicas":"1,2"'),
    with_tail(PARTITION, ',"replicas":' + json.dumps(list(range(1025)))),
    with_tail(PARTITION, ',"replicas":' + json.dumps(list(range(1024)))),
    with_tail(PARTITION, ',"leader":null'),
    with_tail(PARTITION, ',"offline_replicas":null'),
    with_tail(PARTITION, ',"eligible_leader_replicas":null'),
    with_tail(PARTITION, ',"eligible_leader_replicas":[2]'),
    with_tail(PARTITION, ',"high_watermark":null'),
    with_tail(PARTITION, ',"high_watermark":-1'),
    with_tail(PARTITION, ',"partition":2147483648'),
    json.dumps({k: v for k, v in PARTITION.items() if k != "leader"}).encode(),
    json.dumps(
        {k: v for k, v in PARTITION.items() if k not in ("leader", "isr", "topic")}
    ).encode(),
    json.dumps({"kind": "partition"}).encode(),  # every field missing: "... and N more"
    json.dumps({k: "x" for k in PARTITION} | {"kind": "partition"}).encode(),
    json.dumps({k: v for k, v in REPLICA.items() if k != "broker"}).encode(),
    with_tail(REPLICA, ',"log_end_offset":"12"'),
    with_tail(CONFIG, ',"replication_factor":0'),
    with_tail(CONFIG, ',"replication_factor":1025'),
    with_tail(CONFIG, ',"unclean_leader_election_enable":0'),
    *ROUND_HOSTILE,
]


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


def test_scenario_files_agree(spark: Any) -> None:
    records = scenario_records()
    assert len(records) > 1000
    compare(spark, records)
    assert all(S.python_reason(r) is None for r in records)


def test_hostile_records_agree(spark: Any) -> None:
    compare(spark, HOSTILE)
    # The contract's own reasons appear in the Spark reason verbatim where both are simple.
    sp = dict(zip(HOSTILE, spark_verdicts(spark, HOSTILE), strict=True))
    assert sp[with_tail(BROKER, ',"broker":"5"')] == "broker: Input should be a valid integer"
    assert sp[b'{"kind":"x"}'] == "kind: unknown kind 'x'"
    assert sp[with_tail(PARTITION, ',"topic":"t\\n"')] == (
        "topic: String should match pattern '^[a-zA-Z0-9._-]+$'"
    )
    assert str(sp[json.dumps({"kind": "partition"}).encode()]).endswith("more")
    # Lists of models: pydantic's own words where it reports one error.
    # (not: a number past 2**63-1, "less than or equal to" for pydantic and "a valid integer"
    # here; jiter's words for invalid JSON)
    single = [
        r
        for r in ROUND_HOSTILE
        if (p := S.python_reason(r))
        and "; " not in p
        and not p.startswith("invalid JSON")
        and b"9223372036854775808" not in r
    ]
    assert len(single) > 15
    assert [sp[r] for r in single] == [S.python_reason(r) for r in single]
    assert sp[samples("[null]")] == "replica_samples.0: Input should be an object"
    assert sp[samples('[{"log_end_offset":5}]')] == "replica_samples.0.broker: field required"
    assert sp[samples(f"[{SAMPLE},{{}},5]")] == "replica_samples.1.broker: field required"
    assert sp[samples("5")] == "replica_samples: Input should be a valid array"
    assert sp[samples('[{"broker":-1,"log_end_offset":5}]')] == (
        "replica_samples.0.broker: Input should be greater than or equal to 0"
    )


def test_reason_fields_names_the_top_level_field() -> None:
    assert S.reason_fields(
        "replica_samples.0.broker: field required; replica_samples.1: Input should be an "
        "object; isr.2: x; topic: y; invalid JSON: z"
    ) == ["replica_samples", "replica_samples", "isr", "topic"]


def test_reasons_show_a_few_dozen_characters_of_a_value(spark: Any) -> None:
    """A reason names the problem; it never copies the offending value (issue 20: a 5 MB
    ``kind`` made a 5 MB reason, and a dead letter no producer could send). pydantic and
    Spark word it the same; the linear scans take tokens and trailing text of any length."""
    records = [
        b'{"kind":"' + b"k" * 100_000 + b'"}',
        with_tail(BROKER, ',"schema_version":"' + "v" * 1000 + '"'),
        b'{"kind":[' + b",".join([b"1"] * 10_000) + b"]}",
        b'{"kind":{"a":"' + b"x" * 1000 + b'"}}',
        b"[" + b",".join([b"NaN"] * 40_000) + b"]",
        json.dumps(BROKER).encode() + b" " * 100_000 + b"x",
    ]
    compare(spark, records)
    sp = spark_verdicts(spark, records)
    assert sp == [S.python_reason(r) for r in records[:4]] + sp[4:]
    assert all(r is not None and len(r) < 300 for r in sp), [r and r[:400] for r in sp]
    assert sp[0] == f"kind: unknown kind '{'k' * 32}'... (100000 characters)"
    assert sp[2:4] == ["kind: unknown kind a list", "kind: unknown kind an object"]
    assert sp[4:] == ["event: Input should be an object", "invalid JSON: trailing characters"]


def test_typed_columns_match_to_model(spark: Any) -> None:
    """Accepted rows carry exactly the values pydantic parses (defaults included)."""
    records = [json.dumps(b).encode() for b in BASES] + [
        with_tail(PARTITION, ',"eligible_leader_replicas":[2],"offline_replicas":[3]')
    ]
    df = spark.createDataFrame([(i, r) for i, r in enumerate(records)], "i long, value binary")
    rows = {r.i: r.asDict(recursive=True) for r in S.validate(df).collect()}
    assert PARTITION_ROUND in BASES
    for i, raw in enumerate(records):
        ev = parse_event(raw)
        row = rows[i]
        assert row["reason"] is None
        for name, value in ev.model_dump().items():
            if name == "schema_version":
                continue
            assert row[name] == value, (name, row[name], value)


# --- generated records --------------------------------------------------------------------

_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-3, max_value=3000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["5", "1", "orders", "a b", "t\n", "", "partition", "broker", "x" * 300]),
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _mutate_samples(draw: st.DrawFn, base: dict[str, Any]) -> None:
    """Break (or not) one item of ``replica_samples`` (given to any kind that lacks it)."""
    items: Any = base.get("replica_samples")
    if not isinstance(items, list):
        items = base["replica_samples"] = copy.deepcopy(PARTITION_ROUND["replica_samples"])
    action = draw(st.sampled_from(["drop", "replace", "add", "item", "non-object"]))
    i = draw(st.integers(0, max(0, len(items) - 1)))
    item = items[i] if items else None
    if action in ("drop", "replace") and isinstance(item, dict) and item:
        key = draw(st.sampled_from(sorted(item)))
        if action == "drop":
            item.pop(key)
        else:
            item[key] = draw(_json_values)
    elif action == "add" and isinstance(item, dict):
        item[draw(st.sampled_from(["broker", "fetch_lag", "observed_at", "x"]))] = draw(
            _json_values
        )
    elif action == "item":
        items.append({"broker": draw(st.integers(-1, 3)), "log_end_offset": draw(_json_values)})
    elif items:
        items[i] = draw(_json_scalars | st.lists(_json_scalars, max_size=2))


@st.composite
def _records(draw: st.DrawFn) -> bytes:
    base = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["drop", "replace", "add", "kind", "list", "samples"]))
        keys = sorted(base)
        if action == "drop" and keys:
            base.pop(draw(st.sampled_from(keys)))
        elif action == "replace" and keys:
            base[draw(st.sampled_from(keys))] = draw(_json_values)
        elif action == "add":
            base[draw(st.text(min_size=1, max_size=8))] = draw(_json_values)
        elif action == "kind":
            base["kind"] = draw(st.sampled_from([*S.KINDS, "nope", 1]))
        elif action == "list":
            base[draw(st.sampled_from(["replicas", "isr", "offline_replicas"]))] = draw(
                st.lists(st.integers(-2, 2**31), max_size=5)
            )
        elif action == "samples":
            _mutate_samples(draw, base)
    return json.dumps(base, ensure_ascii=draw(st.booleans())).encode()


#: Each example is one Spark job over a batch of 60-80 generated records: 24 examples are
#: about 1,700 records, each batch a mix of valid ones and ones broken in every way
#: _records knows (batches that are not -- Hypothesis tries the simplest, all-valid one
#: first -- are drawn again). Batches of 200-250 overran Hypothesis's per-example choice
#: budget 9 times in 10 (97 of 105 drawn were thrown away), and on a loaded CI machine the
#: redraws tripped its "input generation is slow" health check. derandomize: the same
#: examples on every run and machine (no hidden seed, no example database), so a failure
#: here is a failure there too.
GENERATED_EXAMPLES = 24


@settings(
    max_examples=GENERATED_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(records=st.lists(_records(), min_size=60, max_size=80))
def test_generated_records_agree(spark: Any, records: list[bytes]) -> None:
    valid = sum(1 for r in records if S.python_reason(r) is None)
    assume(10 <= valid <= len(records) - 10)  # both verdicts, in every batch compared
    compare(spark, records)
