"""The stateful operator's Python side alone: CPU per partition-round, by phase, no Spark.

The processor (``streaming.operator.BucketProcessor``) runs on in-memory fakes of Spark's
state handle (``tests/streaming/test_operator_state.py``), fed the payloads the JVM would
pack for ``monitor.dev.synth`` round records, one bucket at a time, batch after batch, in
one process: what a Python worker pays per partition-round, without the JVM, the socket
round trips of the state API or a second worker. The phases are those of
``MONITOR_STREAMING_PROFILE`` (decode and order, apply, save, outputs, frame).

::

    python -m bench.operator_bench --partitions 20000 --rounds 8 --buckets 4 [--compare-source]
        [--compare-replay | --no-replay] [--compare-decode]

It says which model ran (compiled by mypyc, or the source: ``monitor.model.NATIVE_NOTE``);
``--compare-source`` runs the same input on the source too (``bench._source``) and prints
the two side by side, with their ratio; ``--compare-replay`` the same with batches of whole
rounds stored as the bucket's snapshot instead of their input (``streaming.operator.Replay``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import msgspec

import monitor.model
from bench._source import figure, indented, on_source
from monitor.dev.synth import generate
from monitor.model import ModelConfig
from streaming import operator as op
from streaming.config import StreamingConfig
from tests.streaming.helpers import FakeMap, FakeValue, bucket_payloads, run_bucket


def profile_phases(
    text: str, skip_batches: int
) -> tuple[int, dict[str, float], Counter[str], Counter[str]]:
    """The operator's profile (``MONITOR_STREAMING_PROFILE`` lines: ``operator._Profile``)
    over the micro-batches after the first ``skip_batches`` (a batch: the lines of one
    instant ``at``): the records applied, each phase's wall seconds (the load phases
    together as ``load``, the save phases as ``save``), how the bucket loads went (``hit``,
    ``full``, ``stale``...) and what the saves wrote (``snapshot``, ``delta``, ``replay``)."""
    lines = [dict(p.split("=") for p in line.split()) for line in text.splitlines() if line]
    instants = sorted({int(d["at"]) for d in lines})[skip_batches:]
    records, phases, loads, saves = 0, defaultdict(float), Counter(), Counter()
    for d in lines:
        if int(d.pop("at")) not in instants:
            continue
        d.pop("bucket")
        records += int(d.pop("events"))
        for k, v in d.items():
            name = k.split("_")[0]
            if name == "load":
                loads[k[len("load_") :]] += 1
            elif name == "save":
                saves[k[len("save_") :]] += 1
            phases[name] += float(v) / 1000
    return records, dict(phases), loads, saves


def add_bare_records(ap: argparse.ArgumentParser) -> None:
    """``--bare-records``: the benchmarks' input without the collector's extra fields."""
    ap.add_argument(
        "--bare-records",
        action="store_true",
        help="records without the fields the collector sends beside the generator's (topic "
        "id, offline replicas, log starts, fetch lags): the input of the figures before "
        "2026-11-30",
    )


def compare_decode(payloads: list[str], repeat: int = 7) -> None:
    """One bucket's bodies of a batch decoded to their values as the operator does (msgspec,
    structs typed from the contract: ``streaming.operator._DECODER``) and as it did before
    (``json.loads`` to dicts), side by side in this process: CPU a record, best of
    ``repeat``, the GC off as in the operator."""
    text = "[" + ",".join(p.split(op.SEP, 3)[3] for p in payloads) + "]"
    astuple = msgspec.structs.astuple

    def best(decode: Any) -> float:
        times = []
        for _ in range(repeat):
            started = time.process_time()
            decode()
            times.append(time.process_time() - started)
        return min(times) / len(payloads) * 1e6

    gc.disable()
    try:
        before = best(lambda: [list(d.values()) for d in json.loads(text)])
        now = best(lambda: [astuple(d) for d in op._DECODER.decode(text)])
    finally:
        gc.enable()
    print(
        f"decoding one bucket's {len(payloads)} bodies (us of CPU a record, best of {repeat}): "
        f"json.loads to dicts {before:.2f}, msgspec to typed structs {now:.2f} "
        f"(ratio {now / before:.2f})"
    )


def phase_line(phases: dict[str, float], per: float) -> str:
    """Each phase in µs per ``per`` (largest first), and their total."""
    shown = ", ".join(
        f"{k} {v / per * 1e6:.1f}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])
    )
    return f"{shown}; total {sum(phases.values()) / per * 1e6:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.operator_bench", description=__doc__)
    ap.add_argument("--partitions", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument(
        "--compare-source",
        action="store_true",
        help="run the model's source on the same input too, and print the ratio",
    )
    ap.add_argument(
        "--no-replay",
        action="store_true",
        help="store every batch of whole rounds as the bucket's snapshot (no op.Replay)",
    )
    ap.add_argument(
        "--compare-replay",
        action="store_true",
        help="run the same input with --no-replay too (a subprocess), and print the ratio",
    )
    ap.add_argument(
        "--compare-decode",
        action="store_true",
        help="also: the last batch's largest bucket decoded by the operator's decoder and by "
        "json.loads, side by side",
    )
    add_bare_records(ap)
    args = ap.parse_args(argv)
    print(monitor.model.NATIVE_NOTE)
    if args.no_replay:
        print("batches of whole rounds stored as snapshots (--no-replay)")

    records = list(
        generate(
            args.partitions,
            args.rounds,
            form="rounds",
            seed=1,
            collector_fields=not args.bare_records,
        )
    )
    # One micro-batch per round (the stream's records in order; a round is ~1 + P records).
    batches: list[list[dict[str, Any]]] = [[]]
    seen_at = records[0]["observed_at"]
    for d in records:
        if d["kind"] == "partition" and d["observed_at"] - seen_at > 2_000:
            batches.append([])
            seen_at = d["observed_at"]
        batches[-1].append(d)
    defaults = StreamingConfig.model_fields
    settings = op.OperatorSettings(
        buckets=args.buckets,
        tick_ms=3_600_000,
        catchup_slack_ms=10_000,
        model=ModelConfig(),
        cache_scope="bench",
        # the job's default: a partition's row when it says something new, or is due
        state_refresh_ms=defaults["state_refresh_ms"].default,
        replay_batches=0 if args.no_replay else defaults["replay_batches"].default,
    )
    stores: dict[int, dict[str, Any]] = {b: {} for b in range(args.buckets)}
    prof_path = Path(tempfile.mkdtemp(prefix="operator-bench-")) / "profile.txt"
    os.environ["MONITOR_STREAMING_PROFILE"] = str(prof_path)
    offset = 0
    cpu: list[float] = []
    rounds: list[int] = []
    for batch in batches:
        per_bucket = bucket_payloads([json.dumps(d).encode() for d in batch], args.buckets, offset)
        offset += len(batch)
        now = max(d["observed_at"] for d in batch) + 1_000
        gc.collect()
        started = time.process_time()
        for b, payloads in per_bucket.items():
            run_bucket(settings, stores[b], b, payloads, now)
        cpu.append(time.process_time() - started)
        rounds.append(sum(1 for d in batch if d["kind"] == "partition"))
    steady_cpu, steady_rounds = sum(cpu[2:]), sum(rounds[2:])
    print(
        f"{args.partitions} partitions x {args.rounds} rounds, {args.buckets} buckets, "
        f"{len(batches)} batches (the first two are warm-up)"
    )
    us = steady_cpu / steady_rounds * 1e6
    print(
        f"operator, Python side: {us:.1f} us of CPU per partition-round over {steady_rounds} rounds"
    )
    _, phases, _, saves = profile_phases(prof_path.read_text(), skip_batches=2)
    print("  by phase (wall, us per partition-round): " + phase_line(phases, steady_rounds))
    print("  bucket saves: " + ", ".join(f"{k} {v}" for k, v in sorted(saves.items())))
    prof_path.unlink()
    prof_path.parent.rmdir()
    # What a worker without the buckets pays (a restart, a task on another worker): each
    # bucket's snapshot read, and the inputs stored after it applied again.
    gc.collect()
    started, applied = time.process_time(), 0
    for b, store in stores.items():
        meta = op.Meta.of(store["meta"])
        applied += meta.seq - meta.base_seq
        op.BucketStore(
            FakeValue(store, "meta"), FakeValue(store, "base"), FakeMap(store, "deltas"),
            "cold", b, settings,
        )._load_stored(meta)  # fmt: skip
    cold_us = (time.process_time() - started) / args.partitions * 1e6
    print(
        f"a load that misses the cache: {cold_us:.1f} us of CPU per partition (the snapshot, "
        f"then {applied / len(stores):.1f} stored batches a bucket applied again)"
    )
    if args.compare_decode:
        compare_decode(max(per_bucket.values(), key=len))
    same = ["--partitions", str(args.partitions), "--rounds", str(args.rounds)]
    same += ["--buckets", str(args.buckets)]
    same += ["--bare-records"] if args.bare_records else []
    if args.compare_replay:
        cmd = [sys.executable, "-m", "bench.operator_bench", *same, "--no-replay"]
        text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        print("the same input, batches of whole rounds stored as snapshots:\n" + indented(text))
        snap_us = figure(text, "Python side:")
        print(f"replays / snapshots: {us:.1f} / {snap_us:.1f} us = {us / snap_us:.2f}")
    if args.compare_source:
        text = on_source("bench.operator_bench", same)
        print("the same input, the model's source:\n" + indented(text), end="")
        source_us = figure(text, "Python side:")
        print(f"this run / the source: {us:.1f} / {source_us:.1f} us = {us / source_us:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
