"""The collector's events on a real broker, by the producer's codec: bytes per round.

    python -m bench.compression_bench [--partitions 1000 10000] [--rounds 6]
        [--codecs none zstd gzip lz4] [--topic-partitions 12] [--producer SETTING=VALUE ...]

The events are the real collector's: ``Collector.round()`` on synthetic exporter pages with
the Admin API's reads stubbed (:func:`bench.collector_bench.synthetic_cluster`,
:func:`bench.collector_bench.stubbed`: three brokers, ``--partitions`` partitions of RF 3,
every replica in the ISR, round records), ``--rounds`` consecutive rounds 5 s apart on the
collector's clock, with the offsets moving between them as under load: a third of the
partitions idle, the others appending 1-10,000 records a round (log-uniform, each round
±50 %), a busy partition's followers a few records behind at the scrape (their fetcher lag
on the page), the high watermark at the slowest in-sync replica. Each round is built once.

Each codec then gets a ``Collector`` of its own with ``events_compression`` set to it and
its own events topic (``--topic-partitions`` partitions, RF 1, the topic's
``compression.type`` at the broker's default ``producer``: the batches are stored as the
producer made them) on a one-broker lab (:func:`monitor.dev.demo.monitor_stack
.monitor_cluster`), and ``Collector.publish`` -- the real producer with its real settings,
``acks=all``, ``linger_ms=1000``, ``batch_size`` 256 KB (``publish`` flushes at the
round's end; before 2026-12-02's change: 20 ms and kafka-python's 16 KB) -- sends every
round, the codecs taking turns round by round (the order rotating), so each sees the same
machine. After each ``publish`` (which flushes, acks=all: the broker has appended the
batches) the topic's size is read from the broker with DescribeLogDirs (the sum of its
partitions' ``size``: the log segments' bytes, batch headers and all); the difference is the
round's bytes. At the end the segment files on the broker's disk are summed too, a check
of the same figure. CPU: this process's user + system time (every thread: the producer's
sender thread compresses the batches) over ``publish``, which also serialises the events
(``dumps``) for every codec alike; beside it, the extra over ``none``.

Beside the bytes, the record batches on the broker's disk (counted from the segment files'
batch headers) and their records: the producer closes a batch when it reaches
``batch_size`` (uncompressed) or has waited ``linger_ms``, and the codec compresses each
batch alone -- the fuller the batch, the better the ratio. ``--producer linger_ms=1000``
(repeatable) overrides one of the collector's producer settings, for a what-if; the
figures of the collector as it is come from runs without it.

Round 0 differs from the others in two ways: its first batches on each topic (the
topic's first records), and -- every ``config_every_rounds`` rounds, default 6 -- one
``topic_config`` event per topic. The figures are the median over rounds 1.. (all rounds
when there is only one); min-max beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import random
import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kafka
from kafka import KafkaAdminClient
from kafka.codec import has_gzip, has_lz4, has_snappy, has_zstd
from kafka.record import MemoryRecords
from kafka.record import util as record_util

from bench.collector_bench import cpu_s, stubbed, synthetic_cluster
from bench.jmx_parse_bench import java_double
from bench.model_bench import machine
from monitor.collector import Collector, CollectorConfig
from monitor.collector import collector as collector_module
from monitor.collector.admin import PartitionMetadata, Reads
from monitor.collector.build import event_key
from monitor.collector.jmx import PROFILES
from monitor.contract.events import AnyEvent, dumps
from monitor.dev.demo.monitor_stack import monitor_cluster
from monitor.dev.lab.admin import admin_client, create_topic
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.ports import reserve_base_port

#: The codecs ``events_compression`` takes, and whether kafka-python can use each here.
AVAILABLE = {
    "none": lambda: True,
    "zstd": has_zstd,
    "gzip": has_gzip,
    "lz4": has_lz4,
    "snappy": has_snappy,
}
INTERVAL_MS = 5_000
_LABELS = re.compile(r'partition="(\d+)",topic="([^"]+)"')


def say(message: str) -> None:
    print(message, flush=True)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class Traffic:
    """Each partition's log end and its followers' deficit, moving round by round."""

    def __init__(self, meta: list[PartitionMetadata], seed: int = 49) -> None:
        rng = random.Random(seed)
        self.rng = rng
        self.meta = meta
        # A third idle; the others 1-10,000 records a round, log-uniform.
        self.rate = {
            (p.topic, p.partition): 0.0 if rng.random() < 1 / 3 else math.exp(rng.uniform(0, 9.2))
            for p in meta
        }
        # Where each partition's log ends now: the synthetic page's first figures.
        self.end = {
            (p.topic, p.partition): (
                1_000 + p.partition * 7 if p.partition % 3 == 0 else 12_000_000 + p.partition * 131
            )
            for p in meta
        }
        self.behind: dict[tuple[str, int], int] = {}

    def advance(self) -> None:
        rng = self.rng
        for key, rate in self.rate.items():
            if rate:
                self.end[key] += max(1, round(rate * rng.uniform(0.5, 1.5)))
                # A busy partition's followers: up to a few records behind at the scrape.
                self.behind[key] = rng.randrange(0, min(20, int(rate) + 1))
            else:
                self.behind[key] = 0

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {k: e - self.behind[k] for k, e in self.end.items()}

    def page(self, broker: int, base: str) -> str:
        """``base`` (the broker's synthetic page) with this round's log ends and lags."""
        names = PROFILES["monitor"]
        leo, lag = names.log_end_offset + "{", names.fetcher_lag + "{"
        leaders = {(p.topic, p.partition): p.leader for p in self.meta}
        out = []
        for line in base.split("\n"):
            if line.startswith(leo) or line.startswith(lag):
                m = _LABELS.search(line)
                assert m is not None, line
                key = (m.group(2), int(m.group(1)))
                behind = 0 if leaders[key] == broker else self.behind[key]
                labels = line.rsplit(" ", 1)[0]
                value = self.end[key] - behind if line.startswith(leo) else behind
                line = f"{labels} {java_double(value)}"
            out.append(line)
        return "\n".join(out)


def build_rounds(partitions: int, rounds: int) -> list[list[AnyEvent]]:
    """``rounds`` consecutive rounds of the real collector's events on synthetic pages,
    the offsets moving between rounds (:class:`Traffic`)."""
    meta, base = synthetic_cluster(partitions)
    traffic = Traffic(meta)
    pages = dict(base)  # the stub reads this dict: refilled every round
    stamp = {"round": 0, "began": 0}
    start_ms = int(time.time() * 1000)

    def clock() -> int:  # the rounds INTERVAL_MS apart, as a collector's are
        return start_ms + stamp["round"] * INTERVAL_MS + (int(time.time() * 1000) - stamp["began"])

    config = CollectorConfig(
        cluster="bench",
        kafka={"bootstrap_servers": "127.0.0.1:9"},  # the Admin API is stubbed
        jmx_urls={b: f"http://broker/{b}" for b in pages},
        jmx_timeout_s=60,
        round_timeout_s=60,
    )
    collector = Collector(config, clock=clock)
    stubbed(collector, meta, pages)
    mod: Any = collector_module

    def read_high_watermarks(admin: object, reads: Reads) -> None:
        reads.high_watermarks = traffic.high_watermarks()

    mod.read_high_watermarks = read_high_watermarks
    out = []
    try:
        for r in range(rounds):
            traffic.advance()
            for b, text in base.items():
                pages[b] = traffic.page(b, text)
            stamp["round"], stamp["began"] = r, int(time.time() * 1000)
            res = collector.round()
            assert not res.errors, res.errors[:3]
            out.append(res.events)
    finally:
        assert collector._pool is not None
        collector._pool.shutdown()
    return out


def override_producer(overrides: dict[str, Any]) -> None:
    """The collector's ``KafkaProducer`` made with ``overrides`` over its own settings (a
    what-if: ``--producer``)."""
    mod: Any = collector_module
    made = mod.KafkaProducer

    def producer(**settings: Any) -> Any:
        return made(**{**settings, **overrides})

    mod.KafkaProducer = producer


def topic_bytes(admin: KafkaAdminClient, topic: str) -> int:
    """The topic's size on the brokers (DescribeLogDirs: every partition's ``size``, the
    bytes of its log segments)."""
    return sum(
        part["partition_size"]
        for broker in admin.describe_log_dirs(topic_partitions=[topic])
        for log_dir in broker["log_dirs"]
        for t in log_dir["topics"]
        if t["name"] == topic
        for part in t["partitions"]
    )


def segment_bytes(lab: Lab, topic: str) -> int:
    return sum(
        seg.stat().st_size
        for node in lab.node_ids
        for seg in lab.config.data_dir(node).glob(f"{topic}-*/*.log")
    )


def segment_batches(lab: Lab, topic: str) -> tuple[int, int]:
    """The record batches in the topic's segment files on the broker's disk, and their
    records (the batch headers, read with kafka-python's reader)."""
    batches = records = 0
    for node in lab.node_ids:
        for seg in lab.config.data_dir(node).glob(f"{topic}-*/*.log"):
            for batch in MemoryRecords(seg.read_bytes()):
                batches += 1
                records += batch.last_offset_delta + 1
    return batches, records


@dataclass
class Figures:
    codec: str
    sizes: list[int] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    #: The record batches on the topic, and their records (all rounds).
    batches: int = 0
    records: int = 0


def _mid(values: list[Any]) -> Any:
    """The median over rounds 1.. (round 0 is the topic's first: left out when there are
    more)."""
    return statistics.median(values[1:] or values)


def _span(values: list[Any]) -> list[Any]:
    return values[1:] or values


def measure(
    lab: Lab, partitions: int, codecs: list[str], rounds: list[list[AnyEvent]], topic_parts: int
) -> dict[str, Figures]:
    bootstrap = lab.bootstrap_servers
    collectors: dict[str, Collector] = {}
    topics = {}
    for codec in codecs:
        topic = topics[codec] = f"compression-bench-{partitions}-{codec}-{os.getpid()}"
        create_topic(
            bootstrap, topic, partitions=topic_parts, replication_factor=1, min_insync_replicas=1
        )
        c = Collector(
            CollectorConfig(
                cluster="bench",
                kafka={"bootstrap_servers": bootstrap},
                events_kafka={"bootstrap_servers": bootstrap},
                events_topic=topic,
                events_compression=codec,
            )
        )
        c.start(produce=True)
        collectors[codec] = c
    figures = {c: Figures(c) for c in codecs}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        for r, events in enumerate(rounds):
            order = codecs[r % len(codecs) :] + codecs[: r % len(codecs)]
            for codec in order:
                before = topic_bytes(admin, topics[codec])
                gc.collect()
                c0 = cpu_s()
                sent = collectors[codec].publish(events)
                cpu = cpu_s() - c0
                assert sent == len(events), f"{codec}: {len(events) - sent} events not sent"
                figures[codec].sizes.append(topic_bytes(admin, topics[codec]) - before)
                figures[codec].cpu.append(cpu)
        for codec in codecs:
            on_broker, on_disk = (
                topic_bytes(admin, topics[codec]),
                segment_bytes(lab, topics[codec]),
            )
            assert on_broker == sum(figures[codec].sizes), codec
            if on_disk != on_broker:
                say(f"  {codec}: DescribeLogDirs {on_broker:,} B, segment files {on_disk:,} B")
            figures[codec].batches, figures[codec].records = segment_batches(lab, topics[codec])
            assert figures[codec].records == sum(map(len, rounds)), codec
    finally:
        admin.close()
        for c in collectors.values():
            c.stop()
        with contextlib.suppress(Exception), admin_client(bootstrap) as a:
            a.delete_topics(list(topics.values()))
    return figures


def report(partitions: int, rounds: list[list[AnyEvent]], figures: dict[str, Figures]) -> None:
    payload, serialise = [], []
    for evs in rounds:
        gc.collect()
        c0 = cpu_s()
        payload.append(sum(len(event_key(e)) + len(dumps(e).encode()) for e in evs))
        serialise.append(cpu_s() - c0)
    events = _mid([len(evs) for evs in rounds])
    say(
        f"{partitions:,} partitions, RF 3, {len(rounds)} rounds: {events:,} events a round, "
        f"keys + values {_mid(payload) / 1e6:.2f} MB a round "
        f"({_mid(payload) / partitions:.0f} B per partition); their keys and values made "
        f"(event_key, dumps: part of publish) in {_mid(serialise):.3f} s CPU a round"
    )
    none = figures.get("none")
    say(
        f"  {'codec':6} {'bytes/round':>12} {'min-max':>23} {'B/partition':>11} "
        f"{'ratio':>6} {'CPU/round':>9} {'min-max':>13} {'extra CPU':>9} "
        f"{'batches':>8} {'records/batch':>13} {'B/batch':>7}"
    )
    for codec, f in figures.items():
        b, cpu = _mid(f.sizes), _mid(f.cpu)
        ratio = f"{b / _mid(none.sizes):.3f}" if none else "-"
        extra = f"{cpu - _mid(none.cpu):+.3f} s" if none else "-"
        bs, cs = _span(f.sizes), _span(f.cpu)
        say(
            f"  {codec:6} {b:>12,.0f} {min(bs):>11,}-{max(bs):<11,} {b / partitions:>11.0f} "
            f"{ratio:>6} {cpu:>7.3f} s {min(cs):.3f}-{max(cs):.3f} s {extra:>9} "
            f"{f.batches / len(rounds):>8,.0f} {f.records / f.batches:>13.1f} "
            f"{sum(f.sizes) / f.batches:>7,.0f}"
        )
    say(
        "  round 0 (the topics' first records"
        + (", topic_config events" if len(rounds[0]) > events else "")
        + "): "
        + ", ".join(f"{c} {f.sizes[0]:,} B" for c, f in figures.items())
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, nargs="+", default=[1_000, 10_000])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument(
        "--codecs", nargs="+", choices=sorted(AVAILABLE), default=["none", "zstd", "gzip", "lz4"]
    )
    ap.add_argument("--topic-partitions", type=int, default=12)
    ap.add_argument(
        "--producer",
        action="append",
        default=[],
        metavar="SETTING=VALUE",
        help="override one of the collector's producer settings (e.g. linger_ms=1000): "
        "what-if runs only; without it the producer is the collector's as it is",
    )
    args = ap.parse_args()
    overrides: dict[str, Any] = {}
    for item in args.producer:
        name, _, value = item.partition("=")
        overrides[name] = int(value) if value.lstrip("-").isdigit() else value
    if overrides:
        override_producer(overrides)
    codecs = []
    for codec in args.codecs:
        if AVAILABLE[codec]():
            codecs.append(codec)
        else:
            say(f"{codec}: left out, kafka-python finds no library for it (not installed)")
    started = time.monotonic()
    say(f"machine: {machine()}; load average at the start {load()}")
    # Every batch's CRC-32C is computed over its (compressed) bytes: in C with the crc32c
    # package, else in Python -- a cost that shrinks with the batch.
    crc = "the crc32c package (C)" if record_util.crc32c_c is not None else "pure Python"
    say(f"kafka-python {kafka.__version__}, batches' CRC-32C in {crc}")
    say(
        "the producer's settings overridden: " + ", ".join(f"{k}={v}" for k, v in overrides.items())
        if overrides
        else "the collector's own producer settings (monitor/collector/collector.py start)"
    )
    built = {}
    for n in args.partitions:
        t = time.monotonic()
        built[n] = build_rounds(n, args.rounds)
        say(f"{n:,} partitions: {args.rounds} rounds built in {time.monotonic() - t:.0f} s")
    with (
        tempfile.TemporaryDirectory(prefix="compression-bench-") as tmp,
        reserve_base_port(24092, brokers=1) as port,
    ):
        lab = monitor_cluster(Path(tmp) / "lab", port)
        lab.up()
        try:
            for n, rounds in built.items():
                report(n, rounds, measure(lab, n, codecs, rounds, args.topic_partitions))
        finally:
            lab.down()
    say(f"load average at the end {load()}; bench wall time {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
