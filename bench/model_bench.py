"""Throughput of the pure model and of `monitor replay` on 1M synthetic events.

    python -m bench.model_bench [--events 1000000] [--partitions 10000]

Prints: events/s of (a) the model alone on pre-built records, and the time of one tick
(the time-driven checks) over all its partitions, (b) parse + validate + model
(the replay library), (c) the `monitor replay` command end to end (a subprocess writing
JSON findings to /dev/null), with the machine it ran on.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from monitor.contract.events import parse_event, to_model
from monitor.dev.synth import generate
from monitor.dev.testing import to_jsonl
from monitor.model import ClusterModel
from monitor.query.replay import replay


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    py = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{py}, {os.cpu_count()} cores, {cpu}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--fault-rate", type=float, default=0.001)
    args = ap.parse_args()
    per_round = args.partitions * 4 + 6
    rounds = max(1, -(-args.events // per_round))  # at least --events
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        t0 = time.perf_counter()
        events = list(
            generate(
                args.partitions, rounds, fault_rate=args.fault_rate, topics=args.partitions // 100
            )
        )
        path.write_text(to_jsonl(events))
        n = len(events)
        print(
            f"generated {n:,} events ({args.partitions:,} partitions, {rounds} rounds, "
            f"{path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f}s"
        )

        lines = path.read_bytes().splitlines()
        records = [to_model(parse_event(line)) for line in lines]
        model = ClusterModel()
        t0 = time.perf_counter()
        found = sum(len(model.apply(r)) for r in records)
        dt = time.perf_counter() - t0
        print(f"model alone:            {n / dt:>10,.0f} events/s  ({found:,} findings)")

        # The time-driven checks over every partition (ticks 1 s apart: nothing goes stale).
        now = max(r.observed_at for r in records)
        ticks = 20
        t0 = time.perf_counter()
        for i in range(ticks):
            model.tick(now + i * 1_000)
        dt = (time.perf_counter() - t0) / ticks
        print(
            f"tick:                   {dt * 1e3:>10,.1f} ms per tick of "
            f"{len(model.partitions):,} partitions ({dt / len(model.partitions) * 1e6:.2f} us each)"
        )

        t0 = time.perf_counter()
        stats = replay(lines, ClusterModel(), lambda f: None, lambda n, r: None)
        dt = time.perf_counter() - t0
        print(f"parse + validate + model: {n / dt:>8,.0f} events/s  ({stats.findings:,} findings)")

        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "monitor", "replay", str(path), "--format", "json"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
        dt = time.perf_counter() - t0
        print(f"monitor replay (CLI):     {n / dt:>8,.0f} events/s  ({dt:.1f}s wall)")


if __name__ == "__main__":
    main()
