"""Scale-out of the job on a Spark standalone cluster: 1 worker core, then 2, side by side.

Runs ``bench.spark_bench`` twice in a row on the same generated input (``--standalone-cores
1`` then ``2``; each starts its own master and worker on 127.0.0.1 and stops them), and
prints partition-rounds/s and events/s of each, the scaling factor, and the CPU seconds per
partition-round beside it: on a 2-core host the second core is shared with the driver, the
Kafka lab and the OS, so wall-time scaling alone understates the job; CPU per round says
whether the work per round stayed the same.

::

    python -m bench.scaling_bench --partitions 100000 --rounds 4 --mode pipeline
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from typing import Any

_SUSTAINED = re.compile(
    r"sustained over \d+ batches: ([\d,]+) partition-rounds/s, ([\d,]+) events/s"
)
_CPU = re.compile(r"CPU after the first batch: ([\d.]+) s .*?= ([\d.]+) us/partition-round")
_LATENCY = re.compile(r"batch latency: p50 ([\d.]+)s\s+p99 ([\d.]+)s")


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def parse(output: str) -> dict[str, float]:
    """The figures of one ``bench.spark_bench`` run (its printed summary)."""
    out: dict[str, float] = {}
    if m := _SUSTAINED.search(output):
        out["rounds_s"], out["events_s"] = _num(m[1]), _num(m[2])
    if m := _CPU.search(output):
        out["cpu_s"], out["cpu_round_us"] = _num(m[1]), _num(m[2])
    if m := _LATENCY.search(output):
        out["p50"], out["p99"] = _num(m[1]), _num(m[2])
    return out


def run(cores: int, rest: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.spark_bench", "--standalone-cores", str(cores), *rest]
    print("$", " ".join(cmd[1:]), flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith(("mode ", "  ", "standalone", "generated")) and "custom" not in line:
            print("   ", line)
    figures = parse(done.stdout)
    if done.returncode or "rounds_s" not in figures:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(f"spark_bench with {cores} core(s) failed (exit {done.returncode})")
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scaling_bench", description=__doc__)
    ap.add_argument("--cores", default="1,2", help="worker cores of each run, in order")
    args, rest = ap.parse_known_args(argv)
    results = {int(c): run(int(c), rest) for c in args.cores.split(",")}
    print(
        "\n| worker cores | partition-rounds/s | events/s | CPU per partition-round | "
        "batch p50 / p99 |"
    )
    print("| ---: | ---: | ---: | ---: | --- |")
    for cores, f in results.items():
        print(
            f"| {cores} | {f['rounds_s']:,.0f} | {f['events_s']:,.0f} | "
            f"{f.get('cpu_round_us', float('nan')):.1f} us | "
            f"{f.get('p50', float('nan')):.1f} s / {f.get('p99', float('nan')):.1f} s |"
        )
    first = next(iter(results.values()))
    for cores, f in list(results.items())[1:]:
        print(
            f"\nscaling {min(results)} -> {cores} cores: partition-rounds/s x"
            f"{f['rounds_s'] / first['rounds_s']:.2f}; CPU per partition-round x"
            f"{f.get('cpu_round_us', 0) / max(first.get('cpu_round_us', 1), 1e-9):.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
