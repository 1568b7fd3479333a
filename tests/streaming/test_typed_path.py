"""The typed hot path of ``streaming.schema.validate`` never accepts what pydantic refuses.

A record is accepted on the typed path (a typed ``from_json``) only when cheap checks prove
that Spark's typed reading cannot differ from pydantic's verdict; every other record takes
the VARIANT path. Spark's typed reader is lenient where pydantic is strict (a number read
into a string field, a null read like an absent key, invalid UTF-8 replaced, trailing values
and lone surrogates ignored ...): each group of records below is a trap that the typed path
would fall into without one guard of ``streaming.schema.typed_ok_sql``. Every trap record is
invalid to pydantic; the tests check that the typed path refuses each one (so removing its
guard fails the test) and that the full validation still agrees with pydantic. Valid
records the typed path must keep (so that the guards are not simply refusing everything)
are checked too, and the VARIANT path must give them the same columns. Round records (a
``partition`` event with ``replica_samples``, a list of nested models) take the typed path
too: one record per partition per round.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from monitor.contract.events import parse_event
from monitor.dev.rounds import fold
from streaming import schema as S
from tests.streaming.schema_cases import (
    BROKER,
    CONFIG,
    PARTITION,
    PARTITION_ROUND,
    REPLICA,
    compare,
    scenario_records,
    with_tail,
)
from tests.streaming.test_schema import HOSTILE

pytestmark = pytest.mark.spark


def _dump(ev: dict[str, Any], **kw: Any) -> bytes:
    return json.dumps(ev, separators=(",", ":"), **kw).encode()


def _replace(ev: dict[str, Any], key: str, raw_value: str) -> bytes:
    """``ev`` with ``key``'s value replaced by raw JSON text (kept in place)."""
    marker = "__raw__"
    text = json.dumps({**ev, key: marker}, separators=(",", ":"))
    return text.replace(json.dumps(marker), raw_value).encode()


def _samples(raw_items: str, tail: str = "") -> bytes:
    """The round record with raw JSON text for ``replica_samples``, then ``tail`` inside."""
    return _replace(PARTITION_ROUND, "replica_samples", raw_items)[:-1] + tail.encode() + b"}"


#: A valid sample (replica_samples item) as JSON text.
SAMPLE = '{"broker":1,"log_end_offset":5}'


#: guard of ``typed_ok_sql`` -> records that only this guard keeps off the typed path.
TRAPS: dict[str, list[bytes]] = {
    # The typed reader reads any token into a string field: 5 -> "5", true -> "true",
    # [1] -> "[1]", 1.5e400 -> '"Infinity"'; all of them fit the topic pattern or the
    # cluster's length bounds.
    "string field holds a JSON string": [
        _replace(BROKER, "cluster", "5"),
        _replace(BROKER, "cluster", "-5"),
        _replace(BROKER, "cluster", "true"),
        _replace(BROKER, "cluster", "false"),
        _replace(BROKER, "cluster", "[1]"),
        _replace(BROKER, "cluster", "1.5e400"),
        _replace(PARTITION, "topic", "5"),
        _replace(PARTITION, "topic", "-1"),
        _replace(PARTITION, "topic", "1e3"),
        _replace(PARTITION, "topic", "true"),
        _replace(REPLICA, "topic", "12.5"),
        _replace(CONFIG, "topic", "99999999999999999999999"),
        # duplicate keys: the last one counts, for both readers
        with_tail(BROKER, ',"cluster":7'),
        with_tail(PARTITION, ',"topic":["a"]'),
    ],
    # A field that failed to convert is null (or keeps an earlier duplicate's value) and
    # only the corrupt-record column says so.
    "no corrupt field": [
        with_tail(REPLICA, ',"high_watermark":"5"'),
        with_tail(REPLICA, ',"high_watermark":5.0'),
        with_tail(REPLICA, ',"fetch_lag":true'),
        with_tail(REPLICA, ',"log_start_offset":9223372036854775808'),
        with_tail(PARTITION, ',"leader":2147483648'),
        with_tail(PARTITION, ',"eligible_leader_replicas":[1.0]'),
        with_tail(PARTITION, ',"eligible_leader_replicas":"1"'),
        with_tail(BROKER, ',"active_controller":1'),
        with_tail(BROKER, ',"under_replicated_partitions":""'),
        with_tail(BROKER, ',"broker":"5"'),  # duplicate: the earlier valid 1 stays in the struct
        with_tail(BROKER, ',"alive":"true"'),
        with_tail(CONFIG, ',"replication_factor":3.0'),
        # a list of models: any item but an object or null, any field not its own type
        _samples("5"),
        _samples('"x"'),
        _samples(SAMPLE),
        _samples("[5]"),
        _samples('["x"]'),
        _samples("[[1]]"),
        _samples("[true]"),
        _samples(f"[{SAMPLE},5]"),
        _samples('[{"broker":"1","log_end_offset":5}]'),
        _samples('[{"broker":true,"log_end_offset":5}]'),
        _samples('[{"broker":2147483648,"log_end_offset":5}]'),
        _samples('[{"broker":1,"log_end_offset":5.0}]'),
        _samples('[{"broker":1,"log_end_offset":9223372036854775808}]'),
        _samples('[{"broker":1,"log_end_offset":""}]'),
        _samples('[{"broker":1,"log_end_offset":5,"fetch_lag":"1"}]'),
        _samples('[{"broker":1,"log_end_offset":5,"fetch_lag":[1]}]'),
        _samples('[{"broker":1,"log_end_offset":5,"broker":"x"}]'),  # duplicate: the last
    ],
    # The typed reader keeps a JSON null item (a null struct) and reads a field's JSON null
    # like its absence. Each record here has a '}' in the right place for the brace count
    # (the sample list's size counts the null item): only the item checks refuse them.
    "every item an object with its required fields": [
        _samples("[null]", ',"x":{}'),
        _samples(f"[{SAMPLE},null]", ',"x":"}"'),
        _dump({**PARTITION, "replica_samples": [None]}) + b"{}",  # and a trailing value
        _dump({**PARTITION, "replica_samples": [None, None]}) + b" {}}",
        _samples("[{}]"),
        _samples('[{"log_end_offset":5}]'),
        _samples('[{"broker":1}]'),
        _samples('[{"broker":null,"log_end_offset":5}]'),
        _samples('[{"broker":1,"log_end_offset":5,"broker":null}]'),
        _samples(f'[{SAMPLE},{{"broker":2,"log_end_offset":null,"fetch_lag":0}}]'),
    ],
    # JSON null and an absent key both read as null: only an absent key is valid for a
    # defaulted, non-nullable field (offline_replicas: default [], null refused).
    "null only where absent is valid": [
        with_tail(PARTITION, ',"offline_replicas":null'),
        with_tail(PARTITION, ',"offline\\u005freplicas":null'),  # the same key, escaped
        with_tail(PARTITION, ',"offline_\\u0072eplicas":null'),
    ],
    "required field present": [
        with_tail(BROKER, ',"broker":null'),
        with_tail(BROKER, ',"alive":null'),
        with_tail(REPLICA, ',"log_end_offset":null'),
        with_tail(PARTITION, ',"replicas":null'),
        with_tail(BROKER, ',"schema_version":null'),
        _dump({k: v for k, v in BROKER.items() if k != "alive"}),
        _dump({k: v for k, v in PARTITION.items() if k != "isr"}),
        _dump({k: v for k, v in CONFIG.items() if k != "schema_version"}),
    ],
    # The typed reader keeps null items of an array of integers.
    "no null list item": [
        with_tail(PARTITION, ',"replicas":[1,null]'),
        with_tail(PARTITION, ',"isr":[null]'),
        with_tail(PARTITION, ',"offline_replicas":[null,2]'),
        with_tail(PARTITION, ',"eligible_leader_replicas":[null]'),
    ],
    "contract constraints": [
        with_tail(BROKER, ',"broker":-1'),
        with_tail(PARTITION, ',"partition":-1'),
        with_tail(PARTITION, ',"replicas":[1,-1]'),
        with_tail(PARTITION, ',"replicas":' + json.dumps(list(range(1025)))),
        with_tail(CONFIG, ',"replication_factor":0'),
        with_tail(CONFIG, ',"min_insync_replicas":1025'),
        with_tail(REPLICA, ',"log_end_offset":-1'),
        with_tail(BROKER, ',"cluster":""'),
        with_tail(BROKER, ',"cluster":"' + "c" * 257 + '"'),
        with_tail(PARTITION, ',"topic":"a b"'),
        with_tail(PARTITION, ',"topic":"t\\n"'),
        with_tail(PARTITION, ',"topic":""'),
        with_tail(BROKER, ',"schema_version":2'),
        with_tail(BROKER, ',"kind":"nope"'),
        _samples('[{"broker":-1,"log_end_offset":5}]'),
        _samples(f'[{SAMPLE},{{"broker":1,"log_end_offset":-1}}]'),
        _samples('[{"broker":1,"log_end_offset":5,"fetch_lag":-1}]'),  # nullable, present
        _samples('[{"broker":1,"log_end_offset":5,"observed_at":-1,"fetch_lag":null}]'),
        _samples(f'[{SAMPLE},{{"broker":1,"log_end_offset":5,"high_watermark":-9}}]'),
    ],
    # Invalid bytes become U+FFFD for the typed reader.
    "valid UTF-8": [
        _dump(BROKER)[:-1] + b',"cluster":"a\xff"}',
        _dump(BROKER)[:-1] + b',"x":"\xc3"}',
        _dump(BROKER)[:-1] + b',"x":"\xed\xa0\x80"}',  # a surrogate, UTF-8 encoded (CESU)
    ],
    # The typed reader stops after the first value; pydantic refuses what follows.
    "as many closing braces as objects read, the last character": [
        _dump(BROKER) + b" x",
        _dump(BROKER) + b" 5",
        _dump(BROKER) + b'"x"',
        _dump(BROKER) + b" {}",
        _dump(BROKER) + b'{"kind":"x"}',
        _dump(PARTITION_ROUND) + b"}",
        _dump(PARTITION_ROUND) + b" {}",
        _dump(PARTITION_ROUND) + b",{}",
        _dump(PARTITION_ROUND) + b'{"replica_samples":[]}',
        # a kind without a list of models counts one brace, whatever list it holds
        _dump({**BROKER, "replica_samples": [None, None]}) + b"}}",
        _dump({**BROKER, "replica_samples": [{}]}) + b"{}",
    ],
    # Jackson allows 1000 levels, jiter 200.
    "not nested beyond jiter's limit": [
        with_tail(BROKER, ',"x":' + "[" * 201 + "]" * 201),
        with_tail(BROKER, ',"x":' + "[" * 600 + "]" * 600),
    ],
    # Jackson skips a lone surrogate escape in an unknown field; jiter refuses it.
    "no surrogate escape": [
        with_tail(BROKER, ',"x":"\\ud800"'),
        with_tail(BROKER, ',"x":"a\\uDBFFb"'),
        with_tail(BROKER, ',"\\udc00":1'),
    ],
}

#: Valid records the typed path must accept (each guard must let these through).
TYPED_OK: list[bytes] = [
    _dump(BROKER),
    _dump(PARTITION),
    _dump(REPLICA),
    _dump(CONFIG),
    json.dumps(PARTITION, indent=1).encode()[:-2] + b"}",  # whitespace and newlines inside
    _dump({**BROKER, "cluster": "zürich"}),  # json.dumps writes \u00fc
    _dump({**BROKER, "cluster": "zürich"}, ensure_ascii=False),
    _dump({**BROKER, "cluster": 'a"b\\c/d\te'}),
    _dump({**PARTITION, "leader": None, "high_watermark": None, "offline_replicas": []}),
    _dump({**PARTITION, "eligible_leader_replicas": None}),
    _dump({**PARTITION, "eligible_leader_replicas": [], "replicas": [], "isr": []}),
    _dump({**PARTITION, "topic": "__consumer_offsets"}),
    _dump({**REPLICA, "fetch_lag": None, "log_start_offset": 0, "high_watermark": 2**63 - 1}),
    _dump({**BROKER, "active_controller": None, "unclean_elections_total": 5}),
    _dump({**BROKER, "broker": 2, "x": 1.5e300, "y": [1, "a", None], "z": True}),
    with_tail(BROKER, ',"x":1.5e400,"y":99999999999999999999999,"z":"NaN"'),
    with_tail(BROKER, ',"broker":7'),  # duplicate key, both valid: the last one
    with_tail(BROKER, ',"cluster":"q"'),
    with_tail(BROKER, ',"Cluster":5,"CLUSTER":null'),  # other keys (names are case-sensitive)
    with_tail(BROKER, ',"broker":-0'),
    with_tail(BROKER, ',"x":' + "[" * 150 + "]" * 150),
    _dump({**PARTITION, "replicas": list(range(200)), "isr": list(range(200))}),  # > 401 bytes
    # round records
    _dump(PARTITION_ROUND),
    json.dumps(PARTITION_ROUND, indent=1).encode(),
    json.dumps(PARTITION_ROUND, indent="\t").encode()[:-2] + b"\r\n}",
    _dump({**PARTITION_ROUND, "replica_samples": []}),
    _dump({**PARTITION_ROUND, "replica_samples": None}),
    _dump({**PARTITION_ROUND, "replica_samples": [{"broker": 0, "log_end_offset": 0}]}),
    _dump(
        {
            **PARTITION_ROUND,
            "replica_samples": [
                {
                    "broker": 2**31 - 1,
                    "log_end_offset": 2**63 - 1,
                    "log_start_offset": 2**63 - 1,
                    "high_watermark": 0,
                    "fetch_lag": 2**63 - 1,
                    "observed_at": 0,
                }
            ]
            * 3,
        }
    ),
    _samples(f"[{SAMPLE},{SAMPLE},{SAMPLE},{SAMPLE},{SAMPLE},{SAMPLE},{SAMPLE}]"),
    # unknown keys in an item (names are case-sensitive), whatever they hold but objects
    _samples('[{"broker":1,"log_end_offset":5,"Broker":7,"x":[1,"a",null,[]],"y":"]"}]'),
    _samples('[{"broker":null,"log_end_offset":5,"broker":3}]'),  # duplicate: the last
    _samples(f'[{SAMPLE},{{"broker":2,"log_end_offset":9,"fetch_lag":null,"fetch_lag":4}}]'),
    # an unknown key of another kind: ignored by pydantic, one brace for the kind
    _dump({**BROKER, "replica_samples": [None]}),
]

#: Valid records the typed path refuses (unproven spellings): the VARIANT path accepts them.
VARIANT_ONLY: list[bytes] = [
    _dump(BROKER) + b"\n",
    b" " + _dump(BROKER),
    _replace(BROKER, "schema_version", "1.0"),
    _replace(BROKER, "schema_version", "true"),
    _dump({**BROKER, "cluster": "5"}),  # a genuine string that looks like a coerced number
    _dump({**BROKER, "cluster": "true"}),
    _dump({**PARTITION, "topic": "0-orders"}),
    _dump({**BROKER, "cluster": "\U0001f600"}),  # a surrogate pair escape
    with_tail(BROKER, ',"x":"NaN","y":NaN'),
    with_tail(BROKER, ',"x":{"y":1}'),
    with_tail(PARTITION, ',"x":"offline_replicas"'),
    with_tail(PARTITION, ',"x":"\\u00e9"'),  # no offline_replicas, and a \u escape
    # round records: another object, a '}' in a string, an earlier list, too many brackets
    _dump(PARTITION_ROUND) + b"\n",
    _samples('[{"broker":1,"log_end_offset":5,"x":{"y":1}}]'),
    _samples('[{"broker":1,"log_end_offset":5,"x":"}"}]'),
    _samples(f"[{SAMPLE}]", ',"x":{}'),
    _samples(f"[{SAMPLE}]", ',"replica_samples":null'),
    _samples(f"[{SAMPLE}]", ',"replica_samples":null,"replica_samples":[' + SAMPLE + "]"),
    _dump({**BROKER, "replica_samples": [{"broker": 1}]}),
    _samples("[" + ",".join([SAMPLE] * 1024) + "]"),  # past the depth check's bracket count
]


@pytest.fixture(params=["true", "false"], ids=["partial-results", "no-partial-results"])
def partial_results(spark: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """Both values of ``spark.sql.json.enablePartialResults`` (what a failed field reads as)."""
    key = "spark.sql.json.enablePartialResults"
    before = spark.conf.get(key)
    spark.conf.set(key, request.param)
    try:
        yield request.param
    finally:
        spark.conf.set(key, before)


def _typed_flags(spark: Any, records: list[bytes]) -> list[bool]:
    """Whether the typed path accepts each record."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(i, r) for i, r in enumerate(records)], "i long, value binary")
    flags = (
        df.select("i", "value", S.typed_struct("value").alias("p"))
        .select("i", F.expr(S.typed_ok_sql("value")).alias("ok"))
        .collect()
    )
    by_i = {row.i: row.ok for row in flags}
    return [by_i[i] for i in range(len(records))]


@pytest.mark.parametrize("guard", sorted(TRAPS))
def test_typed_path_refuses_trap(spark: Any, partial_results: str, guard: str) -> None:
    records = TRAPS[guard]
    for r in records:
        assert S.python_reason(r) is not None, f"not a trap, pydantic accepts {r[:100]!r}"
    accepted = [r for r, ok in zip(records, _typed_flags(spark, records), strict=True) if ok]
    assert not accepted, f"{guard}: the typed path accepts {accepted[:3]!r}"
    compare(spark, records)


def test_typed_path_accepts_the_common_records(spark: Any, partial_results: str) -> None:
    for r in TYPED_OK:
        assert S.python_reason(r) is None, r
    refused = [r for r, ok in zip(TYPED_OK, _typed_flags(spark, TYPED_OK), strict=True) if not ok]
    assert not refused, f"the typed path refuses valid records {refused[:3]!r}"
    compare(spark, TYPED_OK)


def test_variant_only_records_still_accepted(spark: Any) -> None:
    for r in VARIANT_ONLY:
        assert S.python_reason(r) is None, r
    assert not any(_typed_flags(spark, VARIANT_ONLY))
    compare(spark, VARIANT_ONLY)


def test_typed_path_never_accepts_a_hostile_record(spark: Any, partial_results: str) -> None:
    """None of the schema tests' hostile records that pydantic refuses is typed-accepted."""
    refused = [r for r in HOSTILE if S.python_reason(r) is not None]
    accepted = [r for r, ok in zip(refused, _typed_flags(spark, refused), strict=True) if ok]
    assert not accepted, f"the typed path accepts {accepted[:3]!r}"


def test_scenario_and_synthetic_records_take_the_typed_path(spark: Any) -> None:
    """What the collector and the generator write is accepted on the typed path, all of it:
    as replica events, and folded into round records (one record per partition per round)."""
    from monitor.dev.synth import generate

    synth = [_dump(e) for e in generate(300, 2, fault_rate=0.01, seed=3)]
    events = [json.loads(r) for r in scenario_records() + synth]
    rounds = [_dump(e) for e in fold(events) if "replica_samples" in e]
    assert len(rounds) > 300
    # the benchmarks' input: round records with the fields the collector sends
    shaped = [
        _dump(e)
        for e in generate(100, 2, fault_rate=0.05, seed=3, form="rounds", collector_fields=True)
    ]
    assert sum(b'"fetch_lag"' in r and b'"offline_replicas":[]' in r for r in shaped) >= 200
    records = scenario_records() + synth + rounds + shaped
    flags = _typed_flags(spark, records)
    refused = [r for r, ok in zip(records, flags, strict=True) if not ok]
    assert not refused, f"{len(refused)} of {len(records)} refused, e.g. {refused[:2]!r}"


def test_both_paths_give_the_same_columns(spark: Any) -> None:
    """A valid record gives the same event columns on the typed and the VARIANT path."""
    typed = [r for r in TYPED_OK if not r.endswith(b"\n")]
    variant = [r + b"\n" for r in typed]  # trailing whitespace: valid, VARIANT path only
    assert all(_typed_flags(spark, typed)) and not any(_typed_flags(spark, variant))
    records = typed + variant
    df = spark.createDataFrame([(i, r) for i, r in enumerate(records)], "i long, value binary")
    rows = {row.i: row.asDict(recursive=True) for row in S.validate(df).collect()}
    for i, raw in enumerate(typed):
        a, b = rows[i], rows[i + len(typed)]
        for row in (a, b):
            row.pop("i"), row.pop("value")
        assert a == b, raw
        assert a["reason"] is None
        ev = parse_event(raw)
        for name, value in ev.model_dump().items():
            if name != "schema_version":
                assert a[name] == value, (raw, name)


def test_validate_refuses_a_session_without_the_required_settings(spark: Any) -> None:
    """The legacy empty-string setting would make "" read as null for int/bool/array fields
    with no corrupt flag: ``"high_watermark": ""`` would pass the typed path as absent."""
    key = "spark.sql.legacy.json.allowEmptyString.enabled"
    trap = with_tail(REPLICA, ',"high_watermark":""')
    assert S.python_reason(trap) is not None
    df = spark.createDataFrame([(0, trap)], "i long, value binary")
    before = spark.conf.get(key, "false")
    try:
        spark.conf.set(key, "true")
        assert _typed_flags(spark, [trap]) == [True]  # the trap is real
        with pytest.raises(RuntimeError, match="allowEmptyString"):
            S.validate(df)
    finally:
        spark.conf.set(key, before)
    assert _typed_flags(spark, [trap]) == [False]


def test_validate_refuses_a_session_that_keeps_backslashes_in_literals(spark: Any) -> None:
    """With ``escapedStringLiterals`` the derived SQL's ``'\\u'`` would be two characters:
    the surrogate check would look for them, not for an escape."""
    key = "spark.sql.parser.escapedStringLiterals"
    df = spark.createDataFrame([(0, with_tail(REPLICA, ""))], "i long, value binary")
    before = spark.conf.get(key, "false")
    try:
        spark.conf.set(key, "true")
        with pytest.raises(RuntimeError, match="escapedStringLiterals"):
            S.validate(df)
    finally:
        spark.conf.set(key, before)
