"""Helpers shared by the streaming tests: Kafka-shaped replay files, running a query to idle,
and the operator without Spark (in-memory fakes of the state handle, the JVM's payloads)."""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa
import pyarrow.parquet as pq

from monitor.contract.events import parse_event
from monitor.model import ClusterModel, Finding, ModelConfig, ModelEvent
from monitor.query.replay import replay
from streaming import operator as op


def write_batches(folder: Path, batches: Sequence[Sequence[bytes]], topic: str = "events") -> None:
    """One Parquet file per micro-batch, with the Kafka source's columns (one partition)."""
    folder.mkdir(parents=True, exist_ok=True)
    offset = 0
    for i, records in enumerate(batches):
        n = len(records)
        table = pa.table(
            {
                "value": pa.array(list(records), pa.binary()),
                "topic": pa.array([topic] * n, pa.string()),
                "partition": pa.array([0] * n, pa.int32()),
                "offset": pa.array(range(offset, offset + n), pa.int64()),
            }
        )
        offset += n
        path = folder / f"batch-{i:05d}.parquet"
        pq.write_table(table, path)
        # The file source takes files in modification-time order: make it the batch order
        # (files written within one clock tick would otherwise come in any order).
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def split(records: Sequence[bytes], parts: int) -> list[list[bytes]]:
    size = max(1, -(-len(records) // parts))
    return [list(records[i : i + size]) for i in range(0, len(records), size)]


def renamed(lines: Iterable[bytes], cluster: str, shift_ms: int = 0) -> list[bytes]:
    """The events with their ``cluster`` replaced (scenarios share "lab"), their stamps
    moved by ``shift_ms``."""
    out = []
    for line in lines:
        ev = json.loads(line)
        ev["cluster"] = cluster
        ev["observed_at"] += shift_ms
        out.append(json.dumps(ev, separators=(",", ":")).encode())
    return out


def replay_ids(
    records: Sequence[bytes],
    config: ModelConfig,
    tick_ms: int = 10**15,
    applied: list[ModelEvent] | None = None,
    rejected: int = 0,
) -> list[Finding]:
    """The replay's findings; ``applied`` receives the events it applied. Exactly
    ``rejected`` records must be rejected (stamped ahead of the others)."""
    findings: list[Finding] = []
    rejects: list[Any] = []
    replay(
        list(records),
        ClusterModel(config),
        findings.append,
        lambda n, r: rejects.append(r),
        tick_ms,
        on_applied=None if applied is None else applied.append,
    )
    assert len(rejects) == rejected, rejects
    return findings


def run_to_idle(job: Any, timeout_s: float = 300.0) -> None:
    """Process everything the source has, then stop the query (raises its error, if any)."""
    try:
        job.drain(timeout_s)
    finally:
        job.query.stop()
    if job.query.exception() is not None:
        raise AssertionError(f"query failed: {job.query.exception()}")


def event_driven(records: Sequence[bytes], config: ModelConfig, rejected: int = 0) -> list[Finding]:
    """``monitor.query.replay.replay``'s findings without those of its final tick.

    The final tick's findings are found by applying the events the replay applied to a
    second model and ticking it once at the same instant.
    """
    applied: list[ModelEvent] = []
    found = replay_ids(records, config, applied=applied, rejected=rejected)
    model = ClusterModel(config)
    now = -1
    for ev in applied:
        model.apply(ev)
        now = max(now, ev.observed_at)
    final = {f.id for f in model.tick(now)}
    return [f for f in found if f.id not in final]


# --- the operator without Spark -------------------------------------------------------------


class FakeValue:
    def __init__(self, store: dict[str, Any], name: str) -> None:
        self.store, self.name = store, name

    def get(self) -> Any:
        return self.store.get(self.name)

    def update(self, value: tuple[Any, ...]) -> None:
        self.store[self.name] = value


class FakeMap:
    def __init__(self, store: dict[str, Any], name: str) -> None:
        self.map: dict[tuple[Any, ...], Any] = store.setdefault(name, {})

    def getValue(self, key: tuple[Any, ...]) -> Any:
        return self.map.get(key)

    def updateValue(self, key: tuple[Any, ...], value: tuple[Any, ...]) -> None:
        self.map[key] = value

    def removeKey(self, key: tuple[Any, ...]) -> None:
        del self.map[key]


class FakeHandle:
    """One bucket's state variables (the processor is re-initialised per bucket here)."""

    def __init__(self, store: dict[str, Any]) -> None:
        self.store = store
        self.timers: list[int] = []

    def getValueState(self, name: str, schema: str) -> FakeValue:
        return FakeValue(self.store, name)

    def getMapState(self, name: str, key_schema: str, schema: str) -> FakeMap:
        return FakeMap(self.store, name)

    def registerTimer(self, at: int) -> None:
        self.timers.append(at)


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def getCurrentProcessingTimeInMs(self) -> int:
        return self.now


def payload(
    raw: bytes, offset: int, owner: bool, kafka_ts: int | None = None, key: str | None = None
) -> str:
    """What ``job.build_operator_input`` packs on the JVM for one routed record: its source
    (partition 0 of topic "events"), whether this bucket owns it -- or, routed by its Kafka
    ``key`` (a partition's), that key --, its Kafka timestamp (when the stamp check is on)
    and the record itself."""
    mark = op.RECORD_OWNER if owner else op.RECORD_OTHER
    head = ["0", str(offset), mark if key is None else op.RECORD_KEYED + key, "events"]
    return op.SEP.join([*head, "" if kafka_ts is None else str(kafka_ts), raw.decode()])


def body_payload(raw: bytes, offset: int, owner: bool) -> str:
    """A payload of the form before (the JVM's packed values; what a stored replay of that
    time holds), for one valid record."""
    d = parse_event(raw).model_dump()
    body: dict[str, Any] = {op.BODY_KIND: op.KIND_CODES[d["kind"]]}
    body.update(zip(op.BODY_NAMES, (d[n] for n in op.BODY_FIELDS[d["kind"]]), strict=False))
    if d["kind"] == "partition":
        samples = d.get("replica_samples")
        body[op.SAMPLES_MEMBER] = (
            None if samples is None else [[s[f] for f in op.SAMPLE_FIELDS] for s in samples]
        )
    text = json.dumps(body, separators=(",", ":"))
    return op.SEP.join(["0", str(offset), "t" if owner else "f", text])


def route(raw: bytes, buckets: int) -> list[tuple[int, bool]]:
    """(bucket, owner) pairs of a record: partition events to one bucket, the rest to all."""
    d = json.loads(raw)
    if d["kind"] in ("topic_config", "topic_deleted", "broker"):
        key = (
            f"{d['cluster']}/broker/{d['broker']}"
            if d["kind"] == "broker"
            else f"{d['cluster']}/topic/{d['topic']}"
        )
        owner = zlib.crc32(key.encode()) % buckets
        return [(b, b == owner) for b in range(buckets)]
    h = zlib.crc32(f"{d['cluster']}/{d['topic']}/{d['partition']}".encode()) % buckets
    return [(h, True)]


def bucket_payloads(raws: Sequence[bytes], buckets: int, offset: int = 0) -> dict[int, list[str]]:
    """Each bucket's payloads for these records (source offsets from ``offset``), as the
    JVM routes and packs them."""
    out: dict[int, list[str]] = {}
    for i, raw in enumerate(raws):
        for b, owner in route(raw, buckets):
            out.setdefault(b, []).append(payload(raw, offset + i, owner))
    return out


def run_bucket(
    settings: op.OperatorSettings, store: dict[str, Any], bucket: int, payloads: list[str], now: int
) -> list[Any]:
    """One call of the processor for ``bucket`` (its state in ``store``), as a Python worker
    makes it: the output frames."""
    proc = op.make_processor(settings)
    proc.init(FakeHandle(store))
    key = (op.bucket_keys(settings.buckets)[bucket],)
    rows = iter([pd.DataFrame({"payload": payloads, "value": None})])
    return list(proc.handleInputRows(key, rows, Clock(now)))
