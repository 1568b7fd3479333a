"""Throughput of the pure model and of `monitor replay` on 1M synthetic events.

    python -m bench.model_bench [--events 1000000] [--partitions 10000] [--compare-source]

Prints: events/s of (a) the model alone on pre-built records, and the time of one tick
(the time-driven checks) over all its partitions, (b) parse + validate + model
(the replay library), (c) the `monitor replay` command end to end (a subprocess writing
JSON findings to /dev/null), with the machine it ran on and which model ran (compiled by
mypyc or the source: ``monitor.model.NATIVE_NOTE``). ``--compare-source`` runs it again on
the source (``bench._source``) and prints the model alone's events/s side by side.
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

import monitor.model
from bench._source import figure, indented, on_source
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
    ap.add_argument("--compare-source", action="store_true")
    args = ap.parse_args()
    print(monitor.model.NATIVE_NOTE)
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
        alone = n / dt
        print(f"model alone:            {alone:>10,.0f} events/s  ({found:,} findings)")

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
    if args.compare_source:
        same = ["--events", str(args.events), "--partitions", str(args.partitions)]
        text = on_source("bench.model_bench", [*same, "--fault-rate", str(args.fault_rate)])
        print("the same input, the model's source:\n" + indented(text), end="")
        source = figure(text, "model alone:")
        print(
            f"model alone, this run / the source: {alone:,.0f} / {source:,.0f} events/s = "
            f"{alone / source:.2f}"
        )


if __name__ == "__main__":
    main()
