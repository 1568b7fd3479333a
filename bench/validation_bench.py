"""Cost of the job's operator input per record: the JVM's routing and the Python worker's
reading and validation of each record.

The JVM only routes (``streaming.job.build_operator_input``: a ``from_json`` of the routing
fields, the bucket, the record as the payload); the Python worker reads and validates every
record as it decodes it (``streaming.records.read_record``, in ``operator.ordered_events``).
A static (batch) DataFrame of synthetic raw records, Kafka-shaped, runs through prefixes of
the operator input and is written to the ``noop`` sink; each stage's JVM CPU time minus its
parent's is its cost. Wall time depends on what else runs on the machine; the JVM's CPU
time (``/proc/<pid>/stat``) much less: it is the figure to compare.

::

    python -m bench.validation_bench --records 200000 --form rounds
    python -m bench.validation_bench --records 200000 --whole-stage
    python -m bench.validation_bench --records 200000 --keys
    python -m bench.validation_bench --records 200000 --python-side

``--whole-stage`` runs the operator input with whole-stage code generation off and on,
alternated in one run (the job runs with Spark's default, on, since the SQL validation was
removed). ``--keys`` runs it on records routed by their fields and by the collector's
keys (``contract.events.partition_key``: no parse on the JVM). ``--python-side`` prices the
Python worker's reading per bucket of ~15.6k records: the records read and validated (the
job's) against the bodies the JVM packed before 2026-11-30 (a stored replay's form, still
read).

Until 2026-11-30 the JVM also validated every record in Spark SQL (``streaming.schema``
derived it from the contract) and this benchmark priced that validation's stages (its typed
path, its diagnosis, its character counts): those modes went with it; their figures are in
``docs/benchmarks.md``, their code in commit 37cb6fe.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(df: Any, repeat: int, pid: int) -> tuple[float, float]:
    """Best wall time and best JVM CPU time of writing ``df`` to the noop sink."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        t, c = time.monotonic(), _cpu_s(pid)
        df.write.format("noop").mode("overwrite").save()
        best = min(best, time.monotonic() - t)
        best_cpu = min(best_cpu, _cpu_s(pid) - c)
    return best, best_cpu


def _plain_and_rounds(events: list[dict[str, Any]], n: int) -> tuple[list[bytes], list[bytes]]:
    """``n`` plain ``partition`` events and the same ``n`` as round records: each carries the
    ``replica`` events generated before it for its partition, as samples."""
    from monitor.dev.rounds import sample_of

    plain: list[bytes] = []
    rounds: list[bytes] = []
    waiting: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for e in events:
        key = (e["topic"], e["partition"]) if "partition" in e else None
        if e["kind"] == "replica" and key is not None:
            waiting.setdefault(key, []).append(e)
        elif e["kind"] == "partition" and key is not None:
            samples = [sample_of(r, e["observed_at"]) for r in waiting.pop(key, [])]
            plain.append(json.dumps(e, separators=(",", ":")).encode())
            rounds.append(
                json.dumps({**e, "replica_samples": samples}, separators=(",", ":")).encode()
            )
            if len(plain) == n:
                break
    return plain, rounds


def _round_records_df(spark: Any, n: int, collector_fields: bool) -> tuple[Any, list[bytes]]:
    """``n`` round records (the generator's, with or without the collector's fields) as a
    persisted Kafka-shaped DataFrame over 2 tasks, and the records."""
    from monitor.dev.synth import generate

    evs = generate(n // 2 + 1, 2, fault_rate=0.001, seed=1, collector_fields=collector_fields)
    records = _plain_and_rounds(list(evs), n)[1]
    df = spark.createDataFrame(
        [(r, "events", 0, i) for i, r in enumerate(records)],
        "value binary, topic string, partition int, offset long",
    )
    df = df.repartition(2).persist()
    df.count()
    return df, records


def _compare_whole_stage(spark: Any, n: int, buckets: int, repeat: int, pid: int) -> None:
    """The operator input of collector-shaped round records with whole-stage code
    generation off and on (the job's: Spark's default, on), alternated in one
    run: JVM CPU per record of each, and whether their outputs agree."""
    from pyspark.sql import functions as F

    from streaming.job import build_operator_input

    df, records = _round_records_df(spark, n, collector_fields=True)
    m = len(records)
    out = build_operator_input(df, buckets).select(F.xxhash64("bucket", "payload").alias("h"))
    key = "spark.sql.codegen.wholeStage"
    before = spark.conf.get(key)
    best: dict[str, float] = {}
    sums: dict[str, int] = {}
    try:
        for _ in range(repeat):
            for label, on in (("off", "false"), ("on", "true")):
                spark.conf.set(key, on)
                cpu = _timed(out, 1, pid)[1] / m * 1e6
                best[label] = min(best.get(label, float("inf")), cpu)
                sums.setdefault(label, out.agg(F.expr("bit_xor(h)")).first()[0])
    finally:
        spark.conf.set(key, before)
    agree = "agree" if sums["off"] == sums["on"] else "DIFFER"
    print(
        f"  operator input, {m} collector-shaped round records, whole-stage code generation "
        f"(us/record, JVM CPU, best of {repeat}): off {best['off']:.1f}, on {best['on']:.1f} "
        f"(ratio {best['on'] / best['off']:.2f}); outputs {agree}"
    )
    df.unpersist()


def _compare_keys(spark: Any, n: int, buckets: int, repeat: int, pid: int) -> None:
    """The operator input of collector-shaped round records routed by their fields (no key,
    or a key of another form) and by the collector's key (``partition_key``: no parse on the
    JVM), alternated in one run: JVM CPU per record of each, and whether the buckets agree."""
    from pyspark.sql import functions as F

    from bench.spark_bench import collector_key
    from streaming.job import build_operator_input

    df, records = _round_records_df(spark, n, collector_fields=True)
    m = len(records)
    keyed = df.select(collector_key(F.col("value")).cast("binary").alias("key"), "*").persist()
    keyed.count()
    outs = {
        "by fields": build_operator_input(df, buckets),
        "by key": build_operator_input(keyed, buckets),
    }
    best: dict[str, float] = {}
    sums: dict[str, int] = {}
    for _ in range(repeat):
        for label, out in outs.items():
            h = out.select(F.xxhash64(*out.columns).alias("h"))
            best[label] = min(best.get(label, float("inf")), _timed(h, 1, pid)[1] / m * 1e6)
            buckets_of = out.select(F.xxhash64("bucket", F.split("payload", "\x1f")[1]).alias("b"))
            sums.setdefault(label, buckets_of.agg(F.expr("bit_xor(b)")).first()[0])
    a, b = best["by fields"], best["by key"]
    agree = "agree" if sums["by fields"] == sums["by key"] else "DIFFER"
    print(
        f"  operator input, {m} collector-shaped round records (us/record, JVM CPU, best of "
        f"{repeat}): routed by their fields {a:.1f}, by their key {b:.1f} (ratio {b / a:.2f}); "
        f"buckets {agree}"
    )
    df.unpersist()
    keyed.unpersist()


def _compare_python_side(spark: Any, n: int, buckets: int, repeat: int, pid: int) -> None:
    """The Python worker's reading of collector-shaped round records, alternated in one
    run: CPU a record, per bucket of ~15.6k (1M partitions over 64 buckets), the GC off as
    in the operator: ``ordered_events`` over the bodies the JVM packed before 2026-11-30 (a
    stored replay's form) vs over the records themselves, read and validated
    (``streaming.records``, the job's)."""
    import gc

    from streaming import operator as op
    from tests.streaming.helpers import body_payload, payload

    df, records = _round_records_df(spark, n, collector_fields=True)
    m = len(records)
    df.unpersist()
    size = 15_625
    chunks = [records[i : i + size] for i in range(0, len(records), size)]
    forms = {
        "bodies": [[body_payload(r, i, True) for i, r in enumerate(c)] for c in chunks],
        "records": [[payload(r, i, True) for i, r in enumerate(c)] for c in chunks],
    }
    cpu: dict[str, float] = {}
    gc.disable()
    try:
        for _ in range(repeat):
            for label, batches in forms.items():
                started = time.process_time()
                for batch in batches:
                    op.ordered_events(batch)
                took = (time.process_time() - started) / m * 1e6
                cpu[label] = min(cpu.get(label, float("inf")), took)
    finally:
        gc.enable()
    a, b = cpu["bodies"], cpu["records"]
    print(
        f"  Python, ordered_events per record (us of CPU, best of {repeat}, buckets of "
        f"{size}): the JVM's packed bodies (before) {a:.2f}, the records read and validated "
        f"(now) {b:.2f} (ratio {b / a:.2f})"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.validation_bench", description=__doc__)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument(
        "--form",
        choices=("events", "rounds"),
        default="events",
        help="the stages' input: the generator's events (replica + partition events), or "
        "round records (a partition event carrying its replicas' samples, the collector's)",
    )
    ap.add_argument(
        "--whole-stage",
        action="store_true",
        help="also: the operator input with whole-stage code generation off and on, side by side",
    )
    ap.add_argument(
        "--keys",
        action="store_true",
        help="also: the operator input routed by the records' fields vs by the collector's "
        "keys, side by side",
    )
    ap.add_argument(
        "--python-side",
        action="store_true",
        help="also: the Python worker's reading, the records vs the packed bodies of before",
    )
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from monitor.dev.synth import generate
    from streaming.job import ROUTING_DDL, build_operator_input
    from streaming.session import build_session

    if args.form == "rounds":
        more = list(
            generate(
                max(100, args.records // 2 + 1), 2, fault_rate=0.001, seed=1, collector_fields=True
            )
        )
        records = _plain_and_rounds(more, args.records)[1]
    else:
        evs = generate(max(100, args.records // 8), 2, fault_rate=0.001, seed=1)
        records = [json.dumps(e, separators=(",", ":")).encode() for e in evs]
    rows = [(r, "events", 0, i) for i, r in enumerate(records[: args.records])]
    spark = build_session(master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    src = spark.createDataFrame(rows, "value binary, topic string, partition int, offset long")
    src = src.repartition(2).persist()
    n = src.count()
    read = "read (persisted source)"
    routing = "from_json of the routing fields"
    # name -> (DataFrame, parent stage whose cost it includes)
    stages: dict[str, tuple[Any, str | None]] = {
        read: (src.select("value"), None),
        routing: (src.select(F.from_json(F.col("value").cast("string"), ROUTING_DDL)), read),
        "operator input (routing, bucket, payload)": (
            build_operator_input(src, args.buckets),
            read,
        ),
    }
    print(
        f"{n} records ({args.form}), master {args.master}; JVM CPU is the load-independent figure"
    )
    cpu_of: dict[str, float] = {}
    for name, (df, parent) in stages.items():
        # The stage's columns must be computed: hash them into one number.
        cols = [F.xxhash64(*[F.col(c) for c in df.columns]).alias("h")]
        wall, cpu = _timed(df.select(*cols), args.repeat, pid)
        cpu_of[name] = cpu
        per = cpu / n * 1e6
        added = (cpu - cpu_of[parent]) / n * 1e6 if parent else per
        print(
            f"  {name:42s} wall {wall:6.2f} s  JVM CPU {cpu:6.2f} s = {per:5.1f} us/record "
            f"(+{added:.1f} over {parent or 'nothing'})"
        )
    src.unpersist()
    if args.whole_stage:
        _compare_whole_stage(spark, args.records, args.buckets, args.repeat, pid)
    if args.keys:
        _compare_keys(spark, args.records, args.buckets, args.repeat, pid)
    if args.python_side:
        _compare_python_side(spark, args.records, args.buckets, args.repeat, pid)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
