"""Scrape cost of /metrics with many partitions tracked.

    python -m bench.exporter_bench [--partitions 100000] [--rounds 9] [--fault-rate 0.002]

Builds the model state from synthetic telemetry (RF 3, stalls and elections injected),
then times building the /metrics page with the default cardinality and with per-partition
series for every partition, and prints bytes and series counts.
"""

from __future__ import annotations

import argparse
import statistics
import time

from prometheus_client import CollectorRegistry, generate_latest

from bench.model_bench import machine
from monitor.contract.events import to_model, validate_event
from monitor.dev.synth import generate
from monitor.exporter import ReplicationCollector, Snapshot
from monitor.model import ClusterModel


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--fault-rate", type=float, default=0.002)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"machine: {machine()}")
    t0 = time.perf_counter()
    model, snap, found = ClusterModel(), Snapshot(), []
    for ev in generate(args.partitions, args.rounds, fault_rate=args.fault_rate):
        found.extend(model.apply(to_model(validate_event(ev))))
    snap.update_from_model(model)
    snap.record_findings(found)
    snap.health.running = True
    open_parts = sum(1 for v in snap.partitions.values() if v.open_findings)
    print(
        f"state: {len(snap.partitions):,} partitions, {open_parts:,} with open findings "
        f"(built in {time.perf_counter() - t0:.0f}s)"
    )
    for mode in ("findings", "all"):
        reg = CollectorRegistry(auto_describe=False)
        reg.register(ReplicationCollector(snap, mode))  # type: ignore[arg-type]
        times, size, lines = [], 0, 0
        for _ in range(args.repeat):
            t = time.perf_counter()
            body = generate_latest(reg)
            times.append(time.perf_counter() - t)
            size = len(body)
            lines = sum(1 for ln in body.splitlines() if ln and not ln.startswith(b"#"))
        print(
            f"per_partition={mode:8s} scrape median {statistics.median(times) * 1000:7.0f} ms  "
            f"max {max(times) * 1000:7.0f} ms  {size / 1e6:7.2f} MB  {lines:,} series"
        )


if __name__ == "__main__":
    main()
