"""One collection round with many partitions: against the lab, or on synthetic pages.

    python -m bench.collector_bench --lab DIR [--partitions 10000] [--rounds 3]
        [--round-records partition|replica] [--real-pages [--rules lab|shipped]]
    python -m bench.collector_bench --synthetic [--partitions 100000] [--rounds 3]

``--lab``: creates (once) topics of ``--partitions`` partitions in all, RF 3, on the running
lab, then times ``--rounds`` collector rounds: wall time, the collector's CPU time (all
threads), the events built and the bytes they make on the events topic (keys + values).

``--lab DIR --real-pages``: the same topics, then each broker's exporter page and the
Admin API's metadata read once from the lab, and the rounds timed as ``--synthetic`` times
them -- on the lab's own pages, the network and the Admin API's reads left out; ``--rules
shipped`` serves the shipped exporter rules meanwhile instead of the lab's
(:func:`bench.shard_bench.use_rules`).

``--synthetic``: no Kafka. Three brokers, ``--partitions`` partitions of RF 3 (every broker
holds every partition: a page of ``--partitions`` replicas each, in the exporter's format,
:func:`bench.jmx_parse_bench.page`); the Admin API's reads are stubs answering the
partitions' metadata, the exporter pages come from memory. Times ``Collector.round`` in each
``round_records`` mode -- reading the pages and building the events, all of the round's
CPU but the network -- per replica sample, and serialising its events (``dumps``).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import time
from typing import Any

from bench.jmx_parse_bench import page
from bench.model_bench import machine
from bench.shard_bench import use_rules
from monitor.collector import Collector, CollectorConfig, jmx
from monitor.collector import collector as collector_module
from monitor.collector.admin import PartitionMetadata, Reads, TopicDurability, read_metadata
from monitor.collector.build import event_key
from monitor.collector.jmx import PROFILES
from monitor.contract.events import dumps


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def synthetic_cluster(
    partitions: int, brokers: int = 3, rf: int = 3
) -> tuple[list[PartitionMetadata], dict[int, str]]:
    """``partitions`` partitions of 100-partition topics, RF ``rf`` over ``brokers`` brokers
    (leaders in turn), every replica in the ISR; each broker's exporter page."""
    meta = []
    held: dict[int, list[tuple[str, int, int | None]]] = {b: [] for b in range(1, brokers + 1)}
    for i in range(partitions):
        # A topic's name one string, interned: as the Admin API's reads give it (admin.py).
        topic, p = sys.intern(f"topic-{i // 100:05d}"), i % 100
        replicas = tuple(1 + (i + k) % brokers for k in range(rf))
        meta.append(PartitionMetadata(topic, p, replicas[0], 7, replicas, replicas, (), ()))
        for b in replicas:
            held[b].append((topic, p, None if b == replicas[0] else replicas[0]))
    names = PROFILES["monitor"]
    return meta, {b: page(names, "client_id", reps) for b, reps in held.items()}


def stubbed(collector: Collector, meta: list[PartitionMetadata], pages: dict[int, str]) -> None:
    """``collector`` reading ``meta`` from stubs of the Admin API's reads and ``pages`` from
    memory (the module's functions replaced: this process runs nothing else). The stubs
    hand over what they answer, made once: a round's CPU is the collector's own."""
    mod: Any = collector_module
    hws = {(p.topic, p.partition): 1_000 + p.partition for p in meta}
    listed = {p.topic for p in meta}

    def read_metadata(admin: object, exclude: object, internal: bool, reads: Reads) -> bool:
        reads.partitions = meta
        reads.listed = listed
        return True

    def read_high_watermarks(admin: object, reads: Reads) -> None:
        reads.high_watermarks = hws

    mod.read_brokers = lambda admin, reads: setattr(reads, "brokers", set(pages))
    mod.read_metadata = read_metadata
    mod.read_high_watermarks = read_high_watermarks
    mod.read_epoch_starts = lambda admin, reads, wanted: None
    mod.read_reassignments = lambda admin, reads: setattr(reads, "reassignments", {})
    mod.read_topic_configs = lambda admin, topics, reads: dict.fromkeys(
        topics, TopicDurability(2, False)
    )
    mod.jmx.fetch = lambda url, timeout_s, max_bytes: pages[int(url.rsplit("/", 1)[1])]
    collector._admin = object()
    collector._pool = collector_module.PageReaders(len(pages))


def synthetic(args: argparse.Namespace) -> None:
    meta, pages = synthetic_cluster(args.partitions)
    print(
        f"synthetic: {args.partitions:,} partitions, RF 3, 3 brokers: pages of "
        f"{args.partitions:,} replicas, {sum(map(len, pages.values())) / 3e6:.1f} MB each"
    )
    time_rounds(meta, pages, args.rounds, "monitor")


def time_rounds(
    meta: list[PartitionMetadata], pages: dict[int, str], rounds: int, jmx_profile: str
) -> None:
    """``Collector.round`` on ``meta`` and ``pages`` (:func:`stubbed`), in each
    ``round_records`` mode: CPU per replica sample (best of ``rounds``), then ``dumps``."""
    samples = sum(len(p.replicas) for p in meta)
    print(f"machine: {machine()}, load average {os.getloadavg()[0]:.1f}")
    for mode in ("replica", "partition"):
        config = CollectorConfig(
            cluster="bench",
            kafka={"bootstrap_servers": "127.0.0.1:9"},  # the Admin API is stubbed
            jmx_urls={b: f"http://broker/{b}" for b in pages},
            jmx_profile=jmx_profile,
            round_records=mode,
            config_every_rounds=1,
            jmx_timeout_s=60,
            round_timeout_s=60,
        )
        collector = Collector(config)
        stubbed(collector, meta, pages)
        best, events = float("inf"), list[Any]()
        for _ in range(rounds):
            events = []
            gc.collect()
            c0 = cpu_s()
            events = collector.round().events
            best = min(best, cpu_s() - c0)
        gc.collect()
        c0 = cpu_s()
        size = sum(len(dumps(e)) for e in events)
        ser = cpu_s() - c0
        print(
            f"round_records={mode:9}: round CPU {best:.2f} s = {best / samples * 1e6:.2f} "
            f"µs/replica sample, {len(events):,} events; dumps {ser:.2f} s = "
            f"{ser / samples * 1e6:.2f} µs/sample, {size / 1e6:.1f} MB"
        )
        assert collector._pool is not None
        collector._pool.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser()
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--lab")
    where.add_argument("--synthetic", action="store_true")
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--round-records", choices=["partition", "replica"], default="partition")
    ap.add_argument(
        "--real-pages",
        action="store_true",
        help="with --lab: time rounds on the lab's pages and metadata, read once (stubbed)",
    )
    ap.add_argument("--rules", choices=["lab", "shipped"], default="lab")
    args = ap.parse_args()
    if args.real_pages and not args.lab:
        ap.error("--real-pages reads a lab's pages: give --lab DIR")
    if args.rules != "lab" and not args.real_pages:
        ap.error("--rules applies to --real-pages only")
    if args.synthetic:
        args.partitions = args.partitions or 100_000
        synthetic(args)
        return
    from monitor.dev.lab.admin import admin_client, create_topic
    from monitor.dev.lab.cluster import Lab

    args.partitions = args.partitions or 10_000
    lab = Lab.load(args.lab, progress=None)
    # KRaft refuses one CreateTopics of 10k partitions ("excessively large batch"): split.
    per_topic = min(args.partitions, 2_500)
    topics = [f"bench-{args.partitions}-{i}" for i in range(-(-args.partitions // per_topic))]
    with admin_client(lab.bootstrap_servers) as admin:
        existing = set(admin.list_topics())
    t = time.perf_counter()
    for topic in topics:
        if topic not in existing:
            create_topic(
                lab.bootstrap_servers,
                topic,
                partitions=per_topic,
                replication_factor=3,
                min_insync_replicas=2,
                timeout_s=600,
            )
    print(
        f"topics {topics[0]}..: {per_topic * len(topics):,} partitions "
        f"(ready in {time.perf_counter() - t:.0f}s)"
    )
    print(f"machine: {machine()}")
    config = CollectorConfig(
        cluster="lab",
        kafka={"bootstrap_servers": lab.bootstrap_servers, "request_timeout_ms": 30_000},
        jmx_urls=lab.jmx_urls,
        jmx_timeout_s=30,
        round_timeout_s=30,  # a round's pages may take as long as one page may
        config_every_rounds=1,
        round_records=args.round_records,
    )
    collector = Collector(config)
    collector.start(produce=False)
    if args.real_pages:
        try:
            reads = Reads()
            read_metadata(collector._admin, collector._exclude, False, reads)
            ours = [p for p in reads.partitions if p.topic in topics]
            restore = use_rules(lab, args.rules)
            try:
                pages = {b: jmx.fetch(url, 60, 256 << 20) for b, url in lab.jmx_urls.items()}
            finally:
                restore()
        finally:
            collector.stop()
        on_pages = sum(
            len(jmx.parse(p, PROFILES[jmx.detect(p) or "monitor"]).keys) for p in pages.values()
        )
        print(
            f"the lab's pages: {len(pages)} brokers, {on_pages:,} replicas on them, "
            f"{sum(map(len, pages.values())) / 1e6:.1f} "
            f"MB in all ({args.rules} rules); {len(ours):,} partitions of the metadata "
            f"({len(reads.partitions):,} listed)"
        )
        # Per replica sample of the metadata's partitions: a page's replicas of other topics
        # (the lab's own, earlier benchmarks') are read too, and inflate the figure.
        time_rounds(ours, pages, args.rounds, "auto")
        return
    try:
        for i in range(args.rounds):
            c0, t0 = cpu_s(), time.perf_counter()
            res = collector.round()
            wall, cpu = time.perf_counter() - t0, cpu_s() - c0
            size = sum(len(dumps(e)) + len(event_key(e)) for e in res.events)
            kinds: dict[str, int] = {}
            for e in res.events:
                kinds[e.kind] = kinds.get(e.kind, 0) + 1
            print(
                f"round {i}: wall {wall:.2f}s  cpu {cpu:.2f}s  {len(res.events):,} events "
                f"{size / 1e6:.2f} MB  errors {len(res.errors)}  {kinds}  dropped: "
                f"{res.samples_dropped.total()} samples, {res.events_dropped.total()} events"
            )
    finally:
        collector.stop()


if __name__ == "__main__":
    main()
