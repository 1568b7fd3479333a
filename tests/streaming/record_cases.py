"""Event records for the tests of reading them (``test_records.py``): one valid event of each
kind (and a round record), the scenario files' lines, and records where readers are known to
differ -- hostile ones, a lenient JSON reader's traps, valid records in unusual spellings,
records holding a long value, and a strategy that breaks valid records at random.

pydantic (``monitor.contract.events.parse_event``) is the contract: each record here is
compared with its verdict, never with a verdict written down. Most of these records were
collected for the Spark SQL validation the job had until 2026-11-30 (each group of
:data:`TRAPS` was one guard of its typed path, a lenient ``from_json``); they serve the
reader that replaced it, :mod:`streaming.records`, the same way.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from streaming import schema as S

DATA = Path(__file__).resolve().parents[1] / "data"

BROKER = {
    "schema_version": 1,
    "kind": "broker",
    "cluster": "c",
    "observed_at": 5,
    "broker": 1,
    "alive": True,
}
PARTITION = {
    "schema_version": 1,
    "kind": "partition",
    "cluster": "lab",
    "observed_at": 1_700_000_000_000,
    "topic": "orders",
    "partition": 3,
    "leader": 1,
    "leader_epoch": 4,
    "replicas": [1, 2, 3],
    "isr": [1, 2],
    "high_watermark": 10,
}
REPLICA = {
    "schema_version": 1,
    "kind": "replica",
    "cluster": "lab",
    "observed_at": 1_700_000_000_100,
    "topic": "orders",
    "partition": 3,
    "broker": 2,
    "log_end_offset": 12,
}
CONFIG = {
    "schema_version": 1,
    "kind": "topic_config",
    "cluster": "lab",
    "observed_at": 1_700_000_000_000,
    "topic": "orders",
    "replication_factor": 3,
    "min_insync_replicas": 2,
    "unclean_leader_election_enable": False,
}
#: A round record: the partition event carrying its replicas' samples of the round (one
#: with its own stamp, one with explicit nulls).
PARTITION_ROUND = {
    **PARTITION,
    "observed_at": 1_700_000_000_200,
    "replica_samples": [
        {"broker": 1, "log_end_offset": 12, "log_start_offset": 0, "high_watermark": 10},
        {"broker": 2, "log_end_offset": 11, "fetch_lag": 1, "observed_at": 1_700_000_000_050},
        {
            "broker": 3,
            "log_end_offset": 9,
            "log_start_offset": None,
            "high_watermark": None,
            "fetch_lag": None,
        },
    ],
}
BASES = [BROKER, PARTITION, REPLICA, CONFIG, PARTITION_ROUND]


def with_tail(base: dict[str, Any], tail: str) -> bytes:
    """The JSON of ``base`` with raw text appended inside the object (for non-JSON values)."""
    text = json.dumps(base, separators=(",", ":"))
    return (text[:-1] + tail + "}").encode()


def scenario_records() -> list[bytes]:
    lines: list[bytes] = []
    for path in sorted(DATA.glob("*.jsonl")):
        lines.extend(line for line in path.read_bytes().splitlines() if line.strip())
    return lines


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


#: Invalid records a lenient reader would accept (Spark's typed ``from_json``: the guard of
#: the SQL typed path that kept each group off it -> its records).
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

#: Valid records, as the collector writes them and in rarer spellings.
VALID: list[bytes] = [
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
    _dump({**PARTITION, "leader": None, "eligible_leader_replicas": [], "replicas": [], "isr": []}),
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

#: Valid records in spellings a strict reader may still get wrong (a trailing newline,
#: ``1.0`` for an integer literal, strings that look like numbers, escapes).
VALID_SPELLINGS: list[bytes] = [
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

#: Records holding a long value: a reason must name the problem, not copy the value (issue
#: 20: a 5 MB ``kind`` made a 5 MB reason, and a dead letter no producer could send).
LONG_VALUES: list[bytes] = [
    b'{"kind":"' + b"k" * 100_000 + b'"}',
    with_tail(BROKER, ',"schema_version":"' + "v" * 1000 + '"'),
    b'{"kind":[' + b",".join([b"1"] * 10_000) + b"]}",
    b'{"kind":{"a":"' + b"x" * 1000 + b'"}}',
    b"[" + b",".join([b"NaN"] * 40_000) + b"]",
    json.dumps(BROKER).encode() + b" " * 100_000 + b"x",
]


# --- records broken at random ------------------------------------------------------------

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
def broken_records(draw: st.DrawFn) -> bytes:
    """A valid record of each kind, broken (or not) up to three times: fields dropped,
    replaced by any JSON value, added, a kind changed, lists and samples broken."""
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
