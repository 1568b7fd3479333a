"""Steady produce load with an acknowledgement log, and a verifier that finds lost data.

The point of the lab is to *prove* what a failure cost, not to guess it. So the producer
writes, for every record the cluster acknowledged, one JSON line
``{"topic", "partition", "offset", "run", "seq"}`` to an append-only log; the record's value
is ``{"run": ..., "seq": ...}``. Later, :func:`verify` reads the topic from the beginning
and checks every acknowledged ``(partition, offset)``: a record that is gone, or whose
value is now a *different* record (the offset was reused after an unclean election),
is acknowledged data lost.

An acknowledged offset at or above the partition's high watermark is not readable. Right
after a fault that can be legitimate (an acks=1 record whose follower is still catching
up), so the verifier first waits a bounded time for the HW to pass the highest
acknowledged offset; whatever is still beyond the HW after that was truncated away — the
typical footprint of an unclean election — and counts as lost ("beyond end").
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from monitor.dev.lab.admin import end_offsets
from monitor.dev.lab.errors import LabError

Acks = Literal["all", "1", "0"]


@dataclass(frozen=True)
class AckEntry:
    """One acknowledged record, as written to the ack log."""

    topic: str
    partition: int
    offset: int
    run: str
    seq: int
    at: float = 0.0  # wall time (s) the acknowledgement arrived; 0 in logs from before it

    def value(self) -> bytes:
        return record_value(self.run, self.seq)


def record_value(run: str, seq: int) -> bytes:
    """The value the producer writes for record ``seq`` of run ``run`` (compact JSON)."""
    return json.dumps({"run": run, "seq": seq}, separators=(",", ":")).encode()


@dataclass
class ProduceStats:
    run: str
    sent: int = 0
    acked: int = 0
    failed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    last_offsets: dict[int, int] = field(default_factory=dict)

    def summary(self) -> str:
        errs = ", ".join(f"{k}: {v}" for k, v in sorted(self.errors.items())) or "none"
        return (
            f"run {self.run}: sent {self.sent}, acknowledged {self.acked}, failed {self.failed} "
            f"(errors: {errs}); last acked offset per partition "
            f"{dict(sorted(self.last_offsets.items()))}"
        )


def produce(
    bootstrap_servers: str,
    topic: str,
    *,
    rate: float,
    acks: Acks = "all",
    duration_s: float | None = None,
    count: int | None = None,
    log_path: Path | None = None,
    partition: int | None = None,
    stop: threading.Event | None = None,
    progress: Callable[[ProduceStats], None] | None = None,
    delivery_timeout_s: float = 30.0,
) -> ProduceStats:
    """Send records at ``rate``/s until ``duration_s``, ``count`` or ``stop`` says enough.

    Every acknowledged record is appended to ``log_path`` as it is acknowledged (line
    buffered, so a producer killed half-way still leaves a usable log). With ``acks=0``
    the broker returns no offset; such records are counted but not logged.
    Idempotence is off: an idempotent producer refuses to continue after the log
    truncation an unclean election causes, and the lab wants to keep writing through it.
    """
    if rate <= 0:
        raise LabError("rate must be > 0 records/s")
    if duration_s is None and count is None and stop is None:
        raise LabError("give a duration, a count or a stop event")
    run = uuid.uuid4().hex[:12]
    stats = ProduceStats(run=run)
    lock = threading.Lock()
    ack_level: int | str = "all" if acks == "all" else int(acks)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers,
        client_id=f"monitor-lab-producer-{run}",
        acks=ack_level,
        enable_idempotence=False,
        linger_ms=5,
        request_timeout_ms=int(min(delivery_timeout_s, 10.0) * 1000),
        delivery_timeout_ms=int(delivery_timeout_s * 1000),
        max_block_ms=int(delivery_timeout_s * 1000),
        retry_backoff_ms=200,
    )
    log_file = None
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = log_path.open("a", buffering=1)

    def on_ack(seq: int, metadata: Any) -> None:
        with lock:
            stats.acked += 1
            offset = int(metadata.offset)
            part = int(metadata.partition)
            if offset >= 0:
                stats.last_offsets[part] = max(stats.last_offsets.get(part, -1), offset)
                if log_file is not None:
                    entry = {"topic": topic, "partition": part, "offset": offset, "run": run}
                    entry["seq"] = seq
                    entry["at"] = round(time.time(), 3)
                    log_file.write(json.dumps(entry) + "\n")

    def on_error(exc: BaseException) -> None:
        with lock:
            stats.failed += 1
            name = type(exc).__name__
            stats.errors[name] = stats.errors.get(name, 0) + 1

    started = time.monotonic()
    next_send = started
    last_report = started
    try:
        seq = 0
        while True:
            now = time.monotonic()
            if stop is not None and stop.is_set():
                break
            if duration_s is not None and now - started >= duration_s:
                break
            if count is not None and seq >= count:
                break
            if now < next_send:
                time.sleep(min(next_send - now, 0.05))
                continue
            future = producer.send(topic, value=record_value(run, seq), partition=partition)
            future.add_callback(lambda md, s=seq: on_ack(s, md))
            future.add_errback(on_error)
            stats.sent += 1
            seq += 1
            next_send += 1.0 / rate
            if progress is not None and now - last_report >= 5:
                progress(stats)
                last_report = now
        producer.flush(timeout=delivery_timeout_s + 5)
    finally:
        producer.close(timeout=5)
        if log_file is not None:
            log_file.close()
    return stats


def fill(bootstrap_servers: str, topic: str, partitions: list[int], megabytes: int) -> None:
    """Bulk records (10 KB each, ``acks=1``, no ack log), ``megabytes`` per partition: a
    log long enough that a throttled reassignment copies it for tens of seconds (Kafka lets
    a follower's first fetches through before the throttle's rate window fills)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks=1, linger_ms=20)
    try:
        value = b"x" * 10_000
        for p in partitions:
            for _ in range(megabytes * 100):
                producer.send(topic, value=value, partition=p)
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=5)


def read_ack_log(path: Path, topic: str | None = None) -> list[AckEntry]:
    """Parse an ack log; lines of other topics are skipped when ``topic`` is given."""
    if not path.is_file():
        raise LabError(f"ack log {path} does not exist")
    out: list[AckEntry] = []
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            entry = AckEntry(
                topic=str(data["topic"]),
                partition=int(data["partition"]),
                offset=int(data["offset"]),
                run=str(data["run"]),
                seq=int(data["seq"]),
                at=float(data.get("at", 0.0)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            # A producer killed mid-write can leave a torn last line; anything else is bad.
            if number == len(lines):
                continue
            raise LabError(f"{path}:{number}: not an ack-log line: {line!r}") from exc
        if topic is None or entry.topic == topic:
            out.append(entry)
    return out


@dataclass
class PartitionReport:
    partition: int
    acknowledged: int = 0
    intact: int = 0
    missing: list[int] = field(default_factory=list)  # below HW, no record there any more
    replaced: list[int] = field(default_factory=list)  # offset now holds another record
    beyond_end: list[int] = field(default_factory=list)  # >= HW after the settle wait
    below_log_start: list[int] = field(default_factory=list)  # deleted by retention (not loss)
    high_watermark: int = 0
    log_start: int = 0
    #: The acknowledgements behind ``lost``, each whole (an offset acknowledged twice -- by
    #: an old leader, then by a new one after a truncation -- can be lost twice).
    lost_entries: list[AckEntry] = field(default_factory=list)

    @property
    def lost(self) -> list[int]:
        """Acknowledged offsets whose record is gone (missing, replaced, beyond end), sorted."""
        return sorted(self.missing + self.replaced + self.beyond_end)


@dataclass
class VerifyReport:
    topic: str
    partitions: dict[int, PartitionReport]

    @property
    def lost_count(self) -> int:
        return sum(len(p.lost) for p in self.partitions.values())

    @property
    def acknowledged(self) -> int:
        return sum(p.acknowledged for p in self.partitions.values())

    def render(self) -> str:
        lines = [f"topic {self.topic}: {self.acknowledged} acknowledged, {self.lost_count} lost"]
        for p in sorted(self.partitions.values(), key=lambda r: r.partition):
            lines.append(
                f"  partition {p.partition}: acknowledged {p.acknowledged}, intact {p.intact}, "
                f"missing {len(p.missing)}, replaced {len(p.replaced)}, "
                f"beyond end {len(p.beyond_end)}, below log start "
                f"{len(p.below_log_start)} (log start {p.log_start}, HW {p.high_watermark})"
            )
            if p.lost:
                lines.append(f"    lost offsets: {_ranges(p.lost)}")
        return "\n".join(lines)


def _ranges(offsets: list[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``3-5, 9`` (lost offsets are usually one contiguous run)."""
    if not offsets:
        return ""
    parts: list[str] = []
    start = prev = offsets[0]
    for o in offsets[1:]:
        if o == prev + 1:
            prev = o
            continue
        parts.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = o
    parts.append(f"{start}-{prev}" if prev != start else str(start))
    return ", ".join(parts)


def read_partition(
    bootstrap_servers: str, topic: str, partition: int, end: int, timeout_s: float = 60.0
) -> tuple[int, dict[int, bytes]]:
    """All records of one partition below ``end``: (log start offset, {offset: value})."""
    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        client_id="monitor-lab-verify",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_uncommitted",
    )
    records: dict[int, bytes] = {}
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        start = int(consumer.position(tp))
        deadline = time.monotonic() + timeout_s
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise LabError(
                    f"reading {topic}-{partition} timed out at offset {consumer.position(tp)} "
                    f"of {end}"
                )
            batch = consumer.poll(timeout_ms=500)
            for msgs in batch.values():
                for msg in msgs:
                    if msg.offset < end:
                        records[int(msg.offset)] = bytes(msg.value or b"")
    finally:
        consumer.close()
    return start, records


def _settled_hws(
    bootstrap_servers: str, topic: str, wanted: dict[int, int], settle_s: float
) -> dict[int, int]:
    """High watermarks, after waiting up to ``settle_s`` for each to pass ``wanted[p]``."""
    deadline = time.monotonic() + settle_s
    while True:
        hws = end_offsets(bootstrap_servers, topic)
        behind = [p for p, top in wanted.items() if hws.get(p, 0) <= top]
        if not behind or time.monotonic() >= deadline:
            return hws
        time.sleep(0.5)


def verify(
    bootstrap_servers: str, topic: str, log_path: Path, *, settle_s: float = 10.0
) -> VerifyReport:
    """Check every acknowledged record of ``topic`` in the ack log against the topic."""
    entries = read_ack_log(log_path, topic)
    by_partition: dict[int, list[AckEntry]] = defaultdict(list)
    for entry in entries:
        by_partition[entry.partition].append(entry)
    top = {p: max(e.offset for e in es) for p, es in by_partition.items()}
    hws = _settled_hws(bootstrap_servers, topic, top, settle_s)
    report = VerifyReport(topic=topic, partitions={})
    for part in sorted(set(by_partition) | set(hws)):
        hw = hws.get(part, 0)
        rep = PartitionReport(partition=part, high_watermark=hw)
        report.partitions[part] = rep
        acked = by_partition.get(part, [])
        if not acked:
            continue
        start, records = read_partition(bootstrap_servers, topic, part, hw)
        rep.log_start = start
        for entry in acked:
            rep.acknowledged += 1
            if entry.offset >= hw:
                rep.beyond_end.append(entry.offset)
            elif entry.offset < start:
                rep.below_log_start.append(entry.offset)
                continue
            elif entry.offset not in records:
                rep.missing.append(entry.offset)
            elif records[entry.offset] != entry.value():
                rep.replaced.append(entry.offset)
            else:
                rep.intact += 1
                continue
            rep.lost_entries.append(entry)
        for values in (rep.missing, rep.replaced, rep.beyond_end, rep.below_log_start):
            values.sort()
    return report
