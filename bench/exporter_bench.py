"""Scrape cost of /metrics with many partitions tracked, and what a scrape costs the job.

    python -m bench.exporter_bench [--scenario storm|synth] [--partitions 100000]
        [--topics 1000] [--max-partitions 10000] [--repeat 5]

``storm`` (the default): every partition stale (``stale_telemetry``, warning) AND under its
min ISR (``under_min_isr``, critical) -- a dead collector during a broker outage, the worst
case for the exporter: every partition wants its series. The views are built directly (RF
3 over 12 brokers, ISR of 1, min ISR 2, replica samples on every replica, conditions opened
over the last hour). ``synth``: the model fed synthetic telemetry (RF 3, stalls and
elections injected at ``--fault-rate``), the ordinary case.

For each per-partition mode it prints, per scrape: the render time (median and max), how
long the snapshot lock was held (the copy), the body's size uncompressed and gzipped (what
Prometheus receives), the series; then an HTTP scrape through the real server (gzip, as
Prometheus asks). While the scrapes run, a thread plays the job's batch hook (it takes the
snapshot lock and updates a partition, in a loop) and records how long it waited for the
lock: it must never wait longer than the scrape's copy (plus the interpreter's thread
switch interval, during which the rendering thread holds the GIL).
"""

from __future__ import annotations

import argparse
import gzip
import resource
import statistics
import sys
import threading
import time
import urllib.request

from bench.model_bench import machine
from monitor.contract.state import OpenFinding, PartitionView, ReplicaRow
from monitor.exporter import MetricsServer, ReplicationCollector, Snapshot
from monitor.exporter.collector import DEFAULT_MAX_PARTITIONS
from monitor.model import Severity

NOW_MS = 1_800_000_000_000


def storm(partitions: int, topics: int, brokers: int = 12) -> Snapshot:
    """Every partition stale and under min ISR, with replica samples (the worst case)."""
    snap = Snapshot(clock=lambda: NOW_MS / 1000)
    per_topic = max(1, partitions // topics)
    views = []
    for i in range(partitions):
        t, p = divmod(i, per_topic)
        replicas = tuple((i + k) % brokers for k in range(3))
        leader = replicas[0]
        opened = NOW_MS - 600_000 - (i * 7919) % 3_000_000  # over the last hour
        seen = opened - 60_000
        states = tuple(
            ReplicaRow(
                b,
                10_000 + i,
                0 if b == leader else 500,
                0 if b == leader else 90_000,
                seen,
                seen,
                b == leader,
            )
            for b in replicas
        )
        opens = (
            OpenFinding(
                "stale_telemetry",
                Severity.WARNING,
                opened,
                None,
                {"last_seen_at": seen, "silent_for_ms": 60_000},
            ),
            OpenFinding("under_min_isr", Severity.CRITICAL, opened - 5_000, None, {"isr_size": 1}),
        )
        views.append(
            PartitionView(
                cluster="prod",
                topic=f"topic-{t:04d}",
                partition=p,
                leader=leader,
                leader_epoch=5,
                isr=(leader,),
                replicas=replicas,
                high_watermark=10_000 + i,
                max_committed_hw=10_000 + i,
                leader_leo=10_000 + i,
                uncommitted=0,
                hw_lag_ms=0,
                min_isr=2,
                unclean_enabled=False,
                replica_states=states,
                open_findings=opens,
                severity=Severity.CRITICAL,
                lineage=(),
                late_events=0,
                duplicate_events=0,
                updated_at=seen,
            )
        )
    snap.update_partitions(views)
    snap.health.running = True
    snap.health.saw("prod", NOW_MS - 5_000, NOW_MS)
    return snap


def synth(partitions: int, rounds: int, fault_rate: float) -> Snapshot:
    from monitor.contract.events import to_model, validate_event
    from monitor.dev.synth import generate
    from monitor.model import ClusterModel

    model, snap, found = ClusterModel(), Snapshot(), []
    for ev in generate(partitions, rounds, fault_rate=fault_rate):
        found.extend(model.apply(to_model(validate_event(ev))))
    snap.update_from_model(model)
    snap.record_findings(found)
    snap.health.running = True
    return snap


class BatchHook(threading.Thread):
    """Plays the job's batch hook: takes the snapshot lock, updates one partition, lets go,
    every 0.2 ms. While ``recording`` it keeps, per take, how long it waited for the
    lock (``waits``), how long it was blocked on it when the lock was held by someone else
    at that moment (``blocked``), and how late it woke up (``late``: the GIL, which the
    rendering thread shares with it -- no lock of the exporter's)."""

    def __init__(self, snap: Snapshot) -> None:
        super().__init__(daemon=True)
        self.snap = snap
        self.view = next(iter(snap.partitions.values()))
        self.waits: list[float] = []
        self.blocked: list[float] = []
        self.late: list[float] = []
        self.recording = False
        self.done = threading.Event()

    def run(self) -> None:
        lock = self.snap.lock
        due = time.perf_counter()
        while not self.done.is_set():
            t = time.perf_counter()
            late = max(0.0, t - due)  # waiting for the GIL to wake up
            contended = not lock.acquire(blocking=False)
            if contended:
                lock.acquire()
            waited = time.perf_counter() - t
            try:
                self.snap.partitions[self.view.key] = self.view
            finally:
                lock.release()
            if self.recording:
                self.waits.append(waited)
                self.late.append(late)
                if contended:
                    self.blocked.append(waited)
            due = time.perf_counter() + 0.0002
            time.sleep(0.0002)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", choices=("storm", "synth"), default="storm")
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--topics", type=int, default=1_000, help="storm: topics")
    ap.add_argument("--rounds", type=int, default=9, help="synth: rounds of telemetry")
    ap.add_argument("--fault-rate", type=float, default=0.002, help="synth: fault rate")
    ap.add_argument("--max-partitions", type=int, default=DEFAULT_MAX_PARTITIONS)
    ap.add_argument("--modes", default="findings,all,none")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"machine: {machine()}; switch interval {sys.getswitchinterval() * 1000:.0f} ms")
    t0 = time.perf_counter()
    if args.scenario == "storm":
        snap = storm(args.partitions, args.topics)
        now: float = NOW_MS / 1000
    else:
        snap = synth(args.partitions, args.rounds, args.fault_rate)
        now = time.time()
    open_parts = sum(1 for v in snap.partitions.values() if v.open_findings)
    print(
        f"state ({args.scenario}): {len(snap.partitions):,} partitions, {open_parts:,} with "
        f"open findings (built in {time.perf_counter() - t0:.0f}s); "
        f"max_partitions {args.max_partitions:,}"
    )
    hook = BatchHook(snap)
    hook.start()
    for mode in args.modes.split(","):
        collector = ReplicationCollector(
            snap,
            mode,  # type: ignore[arg-type]
            clock=lambda: now,
            max_partitions=args.max_partitions,
        )
        times, held, zipped = [], [], []
        body = b""
        hook.waits.clear()
        hook.blocked.clear()
        hook.late.clear()
        for _ in range(args.repeat):
            hook.recording = True
            t = time.perf_counter()
            body = collector.render()
            times.append(time.perf_counter() - t)
            hook.recording = False
            held.append(collector.last_lock_held_s)
            t = time.perf_counter()
            small = gzip.compress(body, compresslevel=1)
            zipped.append(time.perf_counter() - t)
        lines = sum(1 for ln in body.splitlines() if ln and not ln.startswith(b"#"))
        waits, blocked, late = hook.waits or [0.0], hook.blocked or [0.0], hook.late or [0.0]
        print(
            f"per_partition={mode:8s} render median {statistics.median(times) * 1000:6.0f} ms "
            f"max {max(times) * 1000:6.0f} ms | lock held median "
            f"{statistics.median(held) * 1000:5.1f} ms max {max(held) * 1000:5.1f} ms | "
            f"{len(body) / 1e6:6.2f} MB ({len(small) / 1e6:5.2f} MB gzip, "
            f"+{statistics.median(zipped) * 1000:.0f} ms) | {lines:,} series"
        )
        print(
            f"  batch hook during {args.repeat} renders: {len(hook.waits):,} lock takes, "
            f"{len(hook.blocked)} found the lock held (blocked at most "
            f"{max(blocked) * 1000:.1f} ms); longest take {max(waits) * 1000:.1f} ms and "
            f"latest wake-up {max(late) * 1000:.1f} ms: the GIL, shared with the render"
        )
    server = MetricsServer(snap, port=0, max_partitions=args.max_partitions, clock=lambda: now)
    server.start()
    try:
        req = urllib.request.Request(
            f"http://127.0.0.1:{server.bound_port}/metrics",
            headers={"Accept-Encoding": "gzip"},
        )
        http_times, got = [], 0
        for _ in range(args.repeat):
            t = time.perf_counter()
            with urllib.request.urlopen(req, timeout=30) as r:
                got = len(r.read())
            http_times.append(time.perf_counter() - t)
        print(
            f"HTTP scrape (findings, gzip): median {statistics.median(http_times) * 1000:.0f} "
            f"ms, max {max(http_times) * 1000:.0f} ms, {got / 1e6:.2f} MB on the wire"
        )
    finally:
        server.stop()
        hook.done.set()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the process (state included): {rss:.0f} MB")


if __name__ == "__main__":
    main()
