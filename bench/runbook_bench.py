"""Wall time of each runbook command over a synthetic 100k-partition state store.

    python -m bench.runbook_bench [--partitions 100000] [--phases 6] [--compact-upto N]
                                  [--repeat 3] [--keep DIR]

Writes a store shaped like the Spark job's (``bench/_synthetic_store.py``: state rows of
real model states, one batch folder per phase, every partition in every batch, optionally
the first batches compacted into ``snapshot/state.parquet``), then runs each command as
people do — ``monitor COMMAND ... --store DIR`` in a fresh process — and prints the median
and max wall time of ``--repeat`` runs, plus the time inside the process spent on the
command itself (``monitor.cli.main``, imports excluded). Output goes to /dev/null.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._synthetic_store import write_store
from bench.model_bench import machine

COMMANDS: list[tuple[str, list[str]]] = [
    ("status", ["status"]),
    ("status --json", ["status", "--json"]),
    ("partitions --finding under_min_isr", ["partitions", "--finding", "under_min_isr"]),
    ("explain topic-00000 2 (story)", ["explain", "topic-00000", "2"]),
    ("explain --plot", ["explain", "topic-00000", "2", "--plot", "{tmp}/p.png"]),
    ("lineage topic-00000 2", ["lineage", "topic-00000", "2"]),
    ("what-if --broker 3 (25k partitions hit)", ["what-if", "--broker", "3"]),
    ("what-if --broker 3 --json", ["what-if", "--broker", "3", "--json"]),
    ("audit (1000 topics)", ["audit"]),
]


def _subprocess(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "monitor", *argv],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1"},
    )
    return time.perf_counter() - t0


def _in_process(argv: list[str]) -> float:
    from monitor.cli import main

    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    assert code == 0, argv
    return time.perf_counter() - t0


def run(store: Path, repeat: int, tmp: Path) -> None:
    print(f"{'command':42s} {'process median':>15s} {'max':>7s} {'in-process':>11s}")
    for name, args in COMMANDS:
        argv = [a.format(tmp=tmp) for a in args] + ["--store", str(store)]
        walls = [_subprocess(argv) for _ in range(repeat)]
        inside = min(_in_process(argv) for _ in range(repeat))
        print(f"{name:42s} {statistics.median(walls):14.2f}s {max(walls):6.2f}s {inside:10.2f}s")
    startup = min(_subprocess(["--help"]) for _ in range(repeat))
    print(f"{'(monitor --help: interpreter + CLI imports)':42s} {startup:14.2f}s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--phases", type=int, default=6, help="batch folders (>= 4)")
    ap.add_argument("--compact-upto", type=int, default=None, help="snapshot these batches")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="write the store here and keep it")
    args = ap.parse_args()
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp) / "store"
        s = write_store(root, args.partitions, phases=args.phases, compact_upto=args.compact_upto)
        files = list(root.rglob("*.parquet"))
        size = sum(f.stat().st_size for f in files) / 1e6
        rows = args.partitions * (
            args.phases if args.compact_upto is None else args.phases - args.compact_upto
        )
        print(
            f"store: {s.partitions} partitions, {s.phases} batches"
            + (f" (<= {args.compact_upto} compacted)" if args.compact_upto is not None else "")
            + f", ~{rows:,} state rows, {len(files)} files, {size:.1f} MB; "
            f"written in {s.seconds:.1f}s"
        )
        run(root, args.repeat, Path(tmp))
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
