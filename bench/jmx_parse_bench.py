"""Reading one broker's exporter page: ``jmx.parse`` per profile and ``jmx.detect``.

    python -m bench.jmx_parse_bench [--replicas 10000]

A page of ``--replicas`` replicas (LEO and log start each, fetcher lag on two in three) in
each profile's names; prints the best of 15 runs of parse (every round, every broker) and
of detect (once per broker).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from monitor.collector.jmx import PROFILES, JmxNames, detect, parse

_CLIENT = {"monitor": "client_id", "strimzi": "clientId", "confluent": "clientid"}


def page(names: JmxNames, client: str, replicas: int) -> str:
    lines = []
    for p in range(replicas):
        tp = f'partition="{p % 100}",topic="topic-{p // 100:05d}"'
        lines.append(f"{names.log_end_offset}{{{tp}}} 1.2345678E7")
        lines.append(f"{names.log_start_offset}{{{tp}}} 100.0")
        if p % 3:
            lines.append(f'{names.fetcher_lag}{{{client}="ReplicaFetcherThread-0-1",{tp}}} 3.0')
    lines += [f"{names.isr_shrinks} 4.0", f"{names.process_start} 1.7E9"]
    return "\n".join(lines) + "\n"


def best_ms(f: Callable[[], object], runs: int = 15) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, default=10_000)
    args = ap.parse_args()
    for name, names in PROFILES.items():
        text = page(names, _CLIENT[name], args.replicas)
        lines = text.count("\n")
        ms = best_ms(lambda: parse(text, names))  # noqa: B023 -- run at once
        det = best_ms(lambda: detect(text))  # noqa: B023
        print(f"{name:9} {lines:,} lines: parse {ms:.1f} ms, detect {det:.1f} ms")


if __name__ == "__main__":
    main()
