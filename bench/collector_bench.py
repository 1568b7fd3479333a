"""One collection round against the lab with many partitions.

    python -m bench.collector_bench --lab DIR [--partitions 10000] [--rounds 3]

Creates (once) a topic with ``--partitions`` partitions, RF 3, on the running lab, then
times ``--rounds`` collector rounds: wall time, the collector's CPU time (all threads), the
events built and the bytes they make on the events topic (keys + values).
"""

from __future__ import annotations

import argparse
import resource
import time

from bench.model_bench import machine
from monitor.collector import Collector, CollectorConfig
from monitor.collector.build import event_key
from monitor.contract.events import dumps
from monitor.dev.lab.admin import admin_client, create_topic
from monitor.dev.lab.cluster import Lab


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lab", required=True)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
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
    )
    collector = Collector(config)
    collector.start(produce=False)
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
