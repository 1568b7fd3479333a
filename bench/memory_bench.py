"""Memory the model holds per partition: resident (RSS) and by part of the state.

    python -m bench.memory_bench [--partitions 20000] [--rounds 40]

Drives a :class:`~monitor.model.ClusterModel` with synthetic round records (RF 3, a few
faults; 40 rounds fill the 32-entry leader LEO history, the steady state of a long-lived
partition), then prints per partition: the Python heap the model holds once read back from the
operator's stored form (:func:`streaming.operator.loads` of a bucket -- what a Spark worker
holds after loading its state; the goal is 2,000 B), and once plainly unpickled, each
counted by ``tracemalloc`` (exact, unlike RSS, which at this size moves with the
allocator's arenas); the process's RSS growth
while building it (freed events leave holes: an upper bound); the pickled size (what the
operator stores); and a deep size of one steady partition's state by field (objects shared
between partitions -- interned names, small ints, shared tuples -- counted once per
partition: an upper bound).
"""

from __future__ import annotations

import argparse
import gc
import pickle
import sys
import tracemalloc
from pathlib import Path
from typing import Any

from monitor.contract.events import to_model, validate_event
from monitor.dev.synth import generate
from monitor.model import ClusterModel
from monitor.model.order import event_order, unfold
from streaming import operator as op


def heap_of(load: Any) -> int:
    """Bytes of Python heap ``load()`` leaves allocated (what it returns, kept alive)."""
    gc.collect()
    tracemalloc.start()
    loaded = load()
    gc.collect()
    heap, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del loaded
    return heap


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes of ``obj`` and everything it references (each object once)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, list | tuple | set | frozenset):
        size += sum(deep_size(x, seen) for x in obj)
    elif hasattr(obj, "__slots__"):
        for cls in type(obj).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if hasattr(obj, name):
                    size += deep_size(getattr(obj, name), seen)
    elif hasattr(obj, "__dict__"):
        size += deep_size(vars(obj), seen)
    return size


def by_field(state: Any) -> dict[str, int]:
    out = {}
    for cls in type(state).__mro__:
        for name in getattr(cls, "__slots__", ()):
            out[name] = deep_size(getattr(state, name))
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.memory_bench", description=__doc__)
    ap.add_argument("--partitions", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args(argv)

    model = ClusterModel()
    gc.collect()
    before = rss_bytes()
    # Round by round (one round's records at a time), as the job applies micro-batches.
    pending: list[Any] = []
    last_round = -1
    for ev in generate(args.partitions, args.rounds, fault_rate=0.001, seed=1, form="rounds"):
        record = to_model(validate_event(ev))
        rnd = (record.observed_at - 1_700_000_000_000) // 5_000
        if rnd != last_round and pending:
            for e in sorted(pending, key=event_order):
                model.apply(e)
            pending.clear()
        last_round = rnd
        pending.extend(unfold(record))
    for e in sorted(pending, key=event_order):
        model.apply(e)
    pending.clear()
    gc.collect()
    grown = rss_bytes() - before
    n = len(model.partitions)
    blob = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
    stored = op.dumps(op.Bucket(model=model))
    pickled = len(pickle.dumps(model.partitions, protocol=pickle.HIGHEST_PROTOCOL))
    steady = next(s for s in model.partitions.values() if not s.open)
    fields, steady_size = by_field(steady), deep_size(steady)
    del model, steady
    worker = heap_of(lambda: op.loads(stored))
    heap = heap_of(lambda: pickle.loads(blob))
    print(f"{n} partitions x {args.rounds} rounds (RF 3), Python {sys.version.split()[0]}")
    print(
        f"  Python heap as a worker holds it (the operator's stored form, read back): "
        f"{worker / n:,.0f} B/partition ({worker / 1e6:.1f} MB)"
    )
    print(
        f"  Python heap once plainly unpickled: {heap / n:,.0f} B/partition ({heap / 1e6:.1f} MB)"
    )
    print(f"  RSS growth while building: {grown / n:,.0f} B/partition ({grown / 1e6:.1f} MB)")
    print(f"  pickled: {pickled / n:,.0f} B/partition; stored: {len(stored) / n:,.0f} B")
    print(f"  one steady partition, deep size {steady_size:,} B (upper bound); by field:")
    for name, size in list(fields.items())[:8]:
        print(f"    {name:24s} {size:6,} B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
