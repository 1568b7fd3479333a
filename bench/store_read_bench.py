"""What reading a state store's latest rows into views costs: the exporter's seed at start.

    python -m bench.store_read_bench [--partitions 100000] [--repeat 3]

Writes a synthetic store in the job's layout (``bench/_synthetic_store.py``), then, as
``JobExporter.seed`` does, reads the latest row of every partition
(``StoreReader.current``, DuckDB) and turns each into a :class:`PartitionView`
(``PartitionView.from_row``). Prints CPU for each step, best of ``--repeat``, per row and in
all, side by side: the conversion against the read it follows.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._synthetic_store import write_store
from bench.model_bench import machine
from monitor.contract.state import PartitionView
from monitor.query.store import StoreReader


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.store_read_bench", description=__doc__)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(machine())
    with tempfile.TemporaryDirectory(prefix="store-read-bench-") as tmp:
        store = write_store(Path(tmp), args.partitions, phases=4, compact_upto=1)
        reader = StoreReader(store.root)
        rows: list[dict[str, Any]] = []
        read_s, view_s = [], []
        for _ in range(args.repeat):
            gc.collect()
            started = time.process_time()
            rows = reader.current()
            read_s.append(time.process_time() - started)
            started = time.process_time()
            views = [PartitionView.from_row(r) for r in rows]
            view_s.append(time.process_time() - started)
        assert len(views) == args.partitions, len(views)
    n = len(rows)
    read, view = min(read_s), min(view_s)
    print(
        f"{n} partitions' latest rows (best of {args.repeat}, CPU): "
        f"read {read:.2f} s ({read / n * 1e6:.1f} us a row), "
        f"into views {view:.2f} s ({view / n * 1e6:.1f} us a row); views / read {view / read:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
