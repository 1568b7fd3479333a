"""A Spark driver's start with and without the class-data sharing archive (``streaming.cds``).

Each run is a fresh process: ``build_session`` (the job's settings, ``local[1]``) and a first
aggregation, then the driver JVM's CPU seconds (user + system, from /proc) and the wall time
to that point. Runs alternate without and with the archive, so both sides see the same
machine load; the figures are the medians and their ratio::

    python -m bench.spark_start_bench --archive .cache/cds/spark-driver.jsa --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from streaming.cds import ENV

_RUN = """
import time
from bench.spark_bench import _cpu_s
t0 = time.monotonic()
from streaming.session import build_session
spark = build_session(master="local[1]", shuffle_partitions=1)
spark.range(2000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
cpu = _cpu_s(spark.sparkContext._gateway.proc.pid)
print(f"result {cpu:.2f} {time.monotonic() - t0:.2f}", flush=True)
spark.stop()
"""


def one(archive: Path | None) -> tuple[float, float]:
    """(driver JVM CPU s, wall s) of one fresh driver's start and first query."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env["MONITOR_SPARK_LOG_LEVEL"] = "ERROR"
    if archive is not None:
        env[ENV] = str(archive)
    out = subprocess.run(
        [sys.executable, "-c", _RUN], env=env, capture_output=True, text=True, check=True
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("result "))
    _, cpu, wall = line.split()
    return float(cpu), float(wall)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", type=Path, default=Path(".cache/cds/spark-driver.jsa"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    if not args.archive.is_file():
        parser.error(f"--archive {args.archive}: no such file (python -m streaming.cds build)")
    sides: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}
    for i in range(args.runs):
        for name, archive in (("without", None), ("with", args.archive)):
            cpu, wall = one(archive)
            sides[name].append((cpu, wall))
            print(f"run {i + 1} {name:>7} archive: driver JVM {cpu:5.1f} CPU-s, {wall:5.1f} s wall")
    cpu = {k: statistics.median(c for c, _ in v) for k, v in sides.items()}
    wall = {k: statistics.median(w for _, w in v) for k, v in sides.items()}
    print(
        f"median: without {cpu['without']:.1f} CPU-s / {wall['without']:.1f} s, "
        f"with {cpu['with']:.1f} CPU-s / {wall['with']:.1f} s; "
        f"CPU ratio with/without {cpu['with'] / cpu['without']:.2f}, "
        f"wall ratio {wall['with'] / wall['without']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
