"""What one more collector costs: the brokers' CPU per JMX scrape, and each shard's round.

    python -m bench.shard_bench --lab DIR [--partitions 10000] [--topics 40] [--scrapes 10]
        [--rounds 3] [--shards 2] [--rules lab|shipped]

Several collectors share a cluster by topic (``shard = "i/N"``, docs/collector.md): each
reads every broker's exporter page and the whole cluster's metadata, and sends its own
topics' partitions. So a second collector costs the brokers one more page render per
round each, and one more metadata read (and topic configuration read every
``config_every_rounds``); it does not double the HW and epoch reads (each collector asks
its own partitions').

Against a running lab (``monitor lab up --dir DIR --heap 1536m`` for 10k partitions):

1. creates (once) ``--topics`` topics of ``--partitions`` partitions in all, RF 3, unless
   0 (the shards split whole topics: a few large topics split unevenly);
2. **broker CPU per scrape**: each broker's JVM CPU (``/proc/<pid>/stat``, user + system)
   across ``--scrapes`` back-to-back GETs of its exporter page, less its idle CPU over the
   same time (the mean of ``--idle-s`` windows just before and just after: printed, since
   an idle broker's own work varies);
3. **a round per shard**: ``--rounds`` rounds of ``Collector.round`` (against the lab: the
   Admin API's reads and every page) with shard 0/1 and then each i/``--shards``: per
   round, the collector's CPU (this process, every thread), the brokers' CPU (less idle)
   and the events sent;
4. the same, 6 x ``--rounds`` rounds of an Admin-API-only collector (no page), 0/1 and 0/N:
   what the metadata reads of one more collector cost.

``--rules shipped`` swaps the lab's exporter rules (11 per-partition families) for the
shipped minimal ones (``monitor/assets/jmx-exporter/kafka-replication.yaml``, 3 families)
for the run: the agent reloads a changed file at its next scrape; the lab's are put back.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from bench.model_bench import machine
from monitor import assets
from monitor.collector import Collector, CollectorConfig, RoundResult, jmx
from monitor.contract.events import PartitionEvent
from monitor.dev.lab.admin import admin_client, create_topic
from monitor.dev.lab.cluster import Lab
from monitor.dev.rounds import unfold_events

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (every thread), from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: fields 14 and 15


def self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Brokers:
    """The lab's broker JVMs and their CPU."""

    def __init__(self, lab: Lab, idle_s: float) -> None:
        self.pids = {b: pid for b in lab.node_ids if (pid := lab.pid(b)) is not None}
        assert len(self.pids) == len(lab.node_ids), "every broker must be running"
        self.idle_s = idle_s

    def cpu(self) -> dict[int, float]:
        return {b: proc_cpu_s(pid) for b, pid in self.pids.items()}

    def idle_rate(self) -> dict[int, float]:
        """Each broker's CPU seconds per second with nothing asking it anything, over
        ``idle_s``."""
        c0, t0 = self.cpu(), time.monotonic()
        time.sleep(self.idle_s)
        c1, wall = self.cpu(), time.monotonic() - t0
        return {b: (c1[b] - c0[b]) / wall for b in c0}


@dataclass
class Block:
    """A measured piece of work: its wall time, this process's CPU, each broker's CPU
    beyond its idle rate (the mean of the idle windows just before and just after)."""

    wall: float
    own: float
    brokers: dict[int, float]
    idle: dict[int, float]


def measured(brokers: Brokers, work: Callable[[], object]) -> Block:
    before = brokers.idle_rate()
    b0, s0, t0 = brokers.cpu(), self_cpu_s(), time.monotonic()
    work()
    b1, s1, wall = brokers.cpu(), self_cpu_s(), time.monotonic() - t0
    after = brokers.idle_rate()
    idle = {b: (before[b] + after[b]) / 2 for b in b0}
    return Block(wall, s1 - s0, {b: b1[b] - b0[b] - idle[b] * wall for b in b0}, idle)


def _idle(block: Block) -> str:
    return ", ".join(f"{b} {v * 100:.0f}%" for b, v in sorted(block.idle.items()))


def ensure_topics(lab: Lab, partitions: int, count: int) -> None:
    """``count`` topics of ``partitions`` partitions in all (whole topics go to a shard:
    a few large topics would split unevenly)."""
    per_topic = max(1, partitions // count)
    topics = [f"bench-{partitions}-{count}-{i}" for i in range(count)]
    with admin_client(lab.bootstrap_servers) as admin:
        existing = set(admin.list_topics())
    t = time.perf_counter()
    for topic in topics:
        if topic not in existing:
            create_topic(
                lab.bootstrap_servers, topic, partitions=per_topic, replication_factor=3,
                min_insync_replicas=2, timeout_s=600,
            )  # fmt: skip
    print(f"topics {topics[0]}..: {per_topic * len(topics):,} partitions "
          f"(ready in {time.perf_counter() - t:.0f} s)")  # fmt: skip


def use_rules(lab: Lab, rules: str) -> Callable[[], None]:
    """Serve the exporter ``rules`` (``lab`` as is, or the ``shipped`` ones) until the
    returned function puts the lab's back; waits until every page is of those rules."""
    path = lab.config.exporter_config_path
    lab_rules = path.read_text()
    if rules == "lab":
        return lambda: None
    path.write_text(assets.read_text("jmx-exporter/kafka-replication.yaml"))
    # The agent reloads a changed file at a scrape: the lab's has kafka_log_size_bytes,
    # the shipped rules do not.
    deadline = time.monotonic() + 120
    for url in lab.jmx_urls.values():
        while "kafka_log_size_bytes" in jmx.fetch(url, 120, 1 << 30):
            assert time.monotonic() < deadline, "the exporters did not reload their rules"
            time.sleep(1)

    def restore() -> None:
        path.write_text(lab_rules)
        for url in lab.jmx_urls.values():
            jmx.fetch(url, 120, 1 << 30)  # reloaded

    return restore


def _fetch(url: str, n: int) -> None:
    for _ in range(n):
        jmx.fetch(url, 120, 1 << 30)


def scrape_cost(lab: Lab, brokers: Brokers, n: int) -> None:
    print(f"\nbroker CPU per scrape of its exporter page ({n} back-to-back GETs per broker):")
    per: list[float] = []
    for b, url in sorted(lab.jmx_urls.items()):
        page = jmx.fetch(url, 120, 1 << 30)  # warm
        block = measured(brokers, partial(_fetch, url, n))
        replicas = len(jmx.parse(page, jmx.PROFILES["monitor"]).replicas)
        cost = block.brokers[b] / n
        per.append(cost)
        others = sum(v for k, v in block.brokers.items() if k != b) / n
        print(f"  broker {b}: page {len(page) / 1e6:.2f} MB, {page.count(chr(10)):,} lines, "
              f"{replicas:,} replicas; {block.wall / n:.2f} s a scrape; broker CPU "
              f"{cost * 1e3:.0f} ms a scrape = {cost / max(replicas, 1) * 1e6:.0f} µs a "
              f"replica (the other brokers meanwhile {others * 1e3:+.0f} ms; idle: "
              f"{_idle(block)} of a core)")  # fmt: skip
    mean = sum(per) / len(per)
    print(f"  mean: {mean * 1e3:.0f} ms of broker CPU per scrape: one more collector at a "
          f"5 s interval costs each broker {mean / 5 * 100:.1f}% of a core, at 30 s "
          f"{mean / 30 * 100:.1f}%")  # fmt: skip


def config(lab: Lab, shard: str, jmx_on: bool = True, every: int = 1) -> CollectorConfig:
    return CollectorConfig(
        cluster="lab",
        kafka={"bootstrap_servers": lab.bootstrap_servers, "request_timeout_ms": 30_000},
        jmx_urls=lab.jmx_urls if jmx_on else {},
        jmx_timeout_s=60,
        round_timeout_s=60,
        config_every_rounds=every,
        shard=shard,
    )


def round_cost(lab: Lab, brokers: Brokers, shards: list[str], rounds: int, jmx_on: bool) -> None:
    every = 1 if jmx_on else 6
    what = "with every exporter page" if jmx_on else (
        f"Admin API only (no page; topic configs every {every} rounds)")  # fmt: skip
    print(f"\n{rounds} rounds per shard, {what}; per round:")
    samples_all = 0
    for shard in shards:
        c = Collector(config(lab, shard, jmx_on, every))
        c.start(produce=False)
        res: list[RoundResult] = []
        try:
            c.round()  # warm: the first round asks every epoch's start
            block = measured(brokers, partial(_rounds_into, c, rounds, res))
        finally:
            c.stop()
        events = res[-1].events
        parts = sum(isinstance(e, PartitionEvent) for e in events)
        samples = len(unfold_events(events))
        if shard == "0/1":
            samples_all = samples
        own = block.own / rounds
        per_sample = f"{own / samples_all * 1e6:.1f}" if samples_all and jmx_on else "-"
        print(f"  shard {shard}: {parts:,} partitions, {samples:,} samples, {len(events):,} "
              f"events; collector CPU {own:.3f} s ({per_sample} µs per replica sample of "
              f"the cluster); brokers' CPU {sum(block.brokers.values()) / rounds:+.2f} s "
              f"(idle: {_idle(block)}); wall {block.wall / rounds:.2f} s")  # fmt: skip


def _rounds_into(c: Collector, n: int, out: list[RoundResult]) -> None:
    for _ in range(n):
        out.append(c.round())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lab", required=True)
    ap.add_argument("--partitions", type=int, default=10_000, help="0: the lab's as it is")
    ap.add_argument("--topics", type=int, default=40, help="the partitions in this many topics")
    ap.add_argument("--scrapes", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--idle-s", type=float, default=10.0)
    ap.add_argument("--rules", choices=["lab", "shipped"], default="lab")
    args = ap.parse_args()
    lab = Lab.load(args.lab, progress=None)
    if args.partitions:
        ensure_topics(lab, args.partitions, args.topics)
    print(f"machine: {machine()}, load average {os.getloadavg()[0]:.1f}")
    restore = use_rules(lab, args.rules)
    try:
        brokers = Brokers(lab, args.idle_s)
        scrape_cost(lab, brokers, args.scrapes)
        shards = ["0/1", *(f"{i}/{args.shards}" for i in range(args.shards))]
        round_cost(lab, brokers, shards, args.rounds, jmx_on=True)
        round_cost(lab, brokers, ["0/1", f"0/{args.shards}"], 6 * args.rounds, jmx_on=False)
    finally:
        restore()


if __name__ == "__main__":
    main()
