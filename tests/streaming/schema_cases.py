"""Records and verdict comparison shared by the schema tests (``test_schema.py``,
``test_typed_path.py``): one valid event of each kind (and a round record), the scenario
files' lines, and the check that pydantic and the Spark SQL validation give every record the
same verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def python_verdicts(records: list[bytes]) -> list[str | None]:
    return [S.python_reason(r) for r in records]


def spark_verdicts(spark: Any, records: list[bytes]) -> list[str | None]:
    df = spark.createDataFrame([(i, r) for i, r in enumerate(records)], "i long, value binary")
    rows = S.validate(df).select("i", "reason").collect()
    by_i = {row.i: row.reason for row in rows}
    assert len(by_i) == len(records), "every record yields exactly one verdict"
    return [by_i[i] for i in range(len(records))]


def compare(spark: Any, records: list[bytes]) -> None:
    py = python_verdicts(records)
    sp = spark_verdicts(spark, records)
    problems = []
    for rec, p, s in zip(records, py, sp, strict=True):
        if (p is None) != (s is None):
            problems.append(f"verdict differs for {rec[:120]!r}: pydantic={p!r} spark={s!r}")
        elif p is not None and s is not None:
            pf, sf = S.reason_fields(p), S.reason_fields(s)
            if pf[:1] != sf[:1]:
                problems.append(f"field differs for {rec[:120]!r}: pydantic={p!r} spark={s!r}")
    assert not problems, "\n".join(problems[:20])
    accepted = sum(1 for s in sp if s is None)
    rejected = sum(1 for s in sp if s is not None)
    assert accepted + rejected == len(records)
