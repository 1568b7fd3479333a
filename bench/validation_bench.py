"""Cost of the JVM side of the job per record: parse, validation, bucketing and payload.

A static (batch) DataFrame of synthetic raw records, Kafka-shaped, run through prefixes of
the job's operator input and written to the ``noop`` sink; each stage's time minus its
parent stage's (in brackets) is its cost. Wall time depends on what else runs on the
machine; the JVM's CPU time (``/proc/<pid>/stat``) much less: it is the figure to compare.

The typed hot path's own stages (its ``from_json``, its acceptance test) and the share of
records it accepts are reported when ``streaming.schema`` has it; ``--fallback-share`` sends
that share of the (still valid) records to the VARIANT path, to price the fallback.
``--rounds`` adds a side-by-side run of the same partitions' events as plain ``partition``
events and as round records (the ``partition`` event carrying its three replicas' samples,
``replica_samples``): the typed path's cost per record of each.

::

    python -m bench.validation_bench --records 300000
    python -m bench.validation_bench --records 300000 --fallback-share 0.1
    python -m bench.validation_bench --records 300000 --rounds
    python -m bench.validation_bench --records 100000 --diagnosis
    python -m bench.validation_bench --records 100000 --counts
    python -m bench.validation_bench --records 200000 --shapes
    python -m bench.validation_bench --records 200000 --whole-stage
    python -m bench.validation_bench --records 200000 --python-side

``--diagnosis`` compares the diagnosis of records neither fast path accepts compiled (as
before) and interpreted (``streaming.schema.interpreted_sql``, the job's), side by side in one
run: round records over 12 tasks (per-task code generation shows) and over 2, and records
that are all invalid (what the interpreted diagnosis costs them).

``--shapes`` prices round records with and without the fields the collector sends beside the
generator's (``monitor.dev.synth.generate(collector_fields=...)``), side by side.

``--python-side`` prices validation where the records are decoded (``streaming.records``,
the job's since 2026-11-30) against the Spark SQL validation before it: the JVM's share
(routing only, against the SQL validation alone) and Python's (reading the records, against
the bodies the JVM packed), side by side.

``--counts`` prices the typed path's character counts on round records (its brace count and
its nesting bound), side by side: as ``streaming.schema.count_sql`` counts them (``split``),
and as they were counted before (``octet_length`` minus that of a ``replace``, per character).
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


def _compare_rounds(
    spark: Any, events: list[dict[str, Any]], n: int, repeat: int, pid: int
) -> None:
    """The typed path per record: plain partition events vs the same as round records."""
    from pyspark.sql import functions as F

    from streaming import schema

    plain, rounds = _plain_and_rounds(events, n)
    samples = sum(len(json.loads(r)["replica_samples"]) for r in rounds) / len(rounds)
    print(f"  partition events vs round records ({len(plain)} each, {samples:.2f} samples each):")
    for name, records in (("plain partition", plain), ("round record", rounds)):
        df = spark.createDataFrame([(r,) for r in records], "value binary").repartition(2)
        df = df.persist()
        df.count()
        m = len(records)
        parsed = df.select("value", schema.typed_struct("value").alias("p"))
        flag = parsed.select(F.expr(schema.typed_ok_sql("value")).alias("ok"))
        cpu = {}
        for stage, out in (
            ("read", df.select(F.xxhash64("value").alias("h"))),
            ("typed from_json", parsed.select(F.xxhash64("p").alias("h"))),
            ("typed path test", flag.select(F.xxhash64("ok").alias("h"))),
            ("validate", schema.validate(df).select(F.xxhash64("reason", "kind").alias("h"))),
        ):
            cpu[stage] = _timed(out, repeat, pid)[1] / m * 1e6
        proofs = cpu["typed path test"] - cpu["typed from_json"]
        on_typed = flag.where(F.col("ok")).count()
        print(
            f"    {name:16s} us/record (JVM CPU): "
            + ", ".join(f"{k} {v:5.1f}" for k, v in cpu.items())
            + f" (proofs alone {proofs:.1f}); typed {on_typed / m:.1%}"
        )
        df.unpersist()


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


def _compare_shapes(spark: Any, n: int, buckets: int, repeat: int, pid: int) -> None:
    """Round records as the generator writes them alone (``bare``) and with the fields the
    collector sends beside (``collector``: topic id, ``offline_replicas``, log starts, fetch
    lags): JVM CPU per record of each stage, side by side. An absent ``offline_replicas``
    costs the typed path a scan of the text for its key (null is refused, absent is not)."""
    from pyspark.sql import functions as F

    from streaming import schema
    from streaming.job import build_operator_input

    cpu: dict[str, dict[str, float]] = {}
    for shape in ("bare", "collector"):
        df, records = _round_records_df(spark, n, collector_fields=shape != "bare")
        m, size = len(records), sum(map(len, records)) / len(records)
        parsed = df.select("value", schema.typed_struct("value").alias("p"))
        stages = {
            "typed from_json": parsed.select(F.xxhash64("p").alias("h")),
            "typed path test": parsed.select(
                F.xxhash64(F.expr(schema.typed_ok_sql("value"))).alias("h")
            ),
            "validate": schema.validate(df).select(F.xxhash64("reason", "kind").alias("h")),
            "operator input": build_operator_input(df, buckets).select(
                F.xxhash64("bucket", "payload").alias("h")
            ),
        }
        cpu[shape] = {k: _timed(v, repeat, pid)[1] / m * 1e6 for k, v in stages.items()}
        cpu[shape]["bytes"] = size
        df.unpersist()
    print(f"  round records, bare vs collector-shaped ({n} each; us/record, JVM CPU):")
    for stage in cpu["bare"]:
        a, b = cpu["bare"][stage], cpu["collector"][stage]
        print(f"    {stage:16s} bare {a:6.1f}, collector {b:6.1f} (ratio {b / a:.2f})")


def _compare_whole_stage(spark: Any, n: int, buckets: int, repeat: int, pid: int) -> None:
    """The operator input of collector-shaped round records with whole-stage code
    generation off (the job's setting, ``streaming/session.py``) and on, alternated in one
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


def _compare_python_side(spark: Any, n: int, buckets: int, repeat: int, pid: int) -> None:
    """Validation where the records are decoded (the job's, since 2026-11-30) against the
    Spark SQL validation before it, on collector-shaped round records, alternated in one
    run. JVM CPU a record: the derived SQL validation alone (``schema.validate``, every
    typed column -- a lower bound of the operator input before, which also packed the
    values) vs the operator input now (routing, bucket, the record as payload). Python CPU
    a record, per bucket of ~15.6k (1M partitions over 64 buckets), the GC off as in the
    operator: ``ordered_events`` over the bodies the JVM packed before (a stored replay's
    form) vs over the records themselves, read and validated (``streaming.records``)."""
    import gc

    from pyspark.sql import functions as F

    from streaming import operator as op
    from streaming import schema
    from streaming.job import build_operator_input
    from tests.streaming.helpers import body_payload, payload

    df, records = _round_records_df(spark, n, collector_fields=True)
    m = len(records)
    outs = {
        "SQL validation": schema.validate(df.select("value")),
        "routing": build_operator_input(df, buckets),
    }
    best: dict[str, float] = {}
    for _ in range(repeat):
        for label, out in outs.items():
            h = out.select(F.xxhash64(*out.columns).alias("h"))
            best[label] = min(best.get(label, float("inf")), _timed(h, 1, pid)[1] / m * 1e6)
    a, b = best["SQL validation"], best["routing"]
    print(
        f"  JVM, {m} collector-shaped round records (us/record, JVM CPU, best of {repeat}): "
        f"SQL validation alone (before) {a:.1f}, operator input now (routing) {b:.1f} "
        f"(ratio {b / a:.2f})"
    )
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
    df.unpersist()


def _compare_counts(spark: Any, rounds: list[bytes], repeat: int, pid: int) -> None:
    """The typed path's counts on round records, ``split`` vs ``replace``: JVM CPU per record."""
    from pyspark.sql import functions as F

    from streaming.schema import count_sql

    t = "cast(value AS STRING)"

    def by_replace(char: str) -> str:  # the form before count_sql
        return f"(octet_length({t}) - octet_length(replace({t}, '{char}', '')))"

    forms = {
        "the text alone (octet_length)": f"octet_length({t})",
        "replace: '}', '[' and '{' (before)": " + ".join(by_replace(c) for c in "}[{"),
        "split: '}' and '[' (count_sql)": f"{count_sql(t, '}')} + {count_sql(t, '[')}",
    }
    df = spark.createDataFrame([(r,) for r in rounds], "value binary").repartition(2).persist()
    m = df.count()
    print(f"  the typed path's counts on {m} round records (us/record, JVM CPU, best of {repeat}):")
    cpu = {
        name: _timed(df.select(F.xxhash64(F.expr(sql)).alias("h")), repeat, pid)[1] / m * 1e6
        for name, sql in forms.items()
    }
    base = cpu["the text alone (octet_length)"]
    for name, v in cpu.items():
        print(f"    {name:38s} {v:5.2f} (+{v - base:.2f} over the text alone)")
    old, new = (cpu[k] - base for k in list(forms)[1:])
    print(f"    counting: split / replace = {new / old:.2f}")
    df.unpersist()


def _compare_diagnosis(spark: Any, rounds: list[bytes], repeat: int, pid: int) -> None:
    """``validate`` with the diagnosis compiled and interpreted, JVM CPU per record."""
    from pyspark.sql import functions as F

    from streaming import schema

    # Valid JSON, leader_epoch a string: refused by both fast paths, diagnosed.
    invalid = [r.replace(b'"leader_epoch":', b'"leader_epoch":"x","_":', 1) for r in rounds]
    print("  the diagnosis compiled vs interpreted (us/record, JVM CPU):")
    for label, records, tasks in (
        ("round records, 12 tasks", rounds, 12),
        ("round records, 2 tasks", rounds, 2),
        ("invalid records, 2 tasks", invalid[: len(invalid) // 4], 2),
    ):
        df = spark.createDataFrame([(r,) for r in records], "value binary").repartition(tasks)
        df = df.persist()
        m = df.count()
        cpu = {}
        for name, compiled in (("compiled", True), ("interpreted", False)):
            out = schema.validate(df, compiled_diagnosis=compiled)
            h = out.select(F.xxhash64(*[F.col(c) for c in out.columns]).alias("h"))
            cpu[name] = _timed(h, repeat, pid)[1] / m * 1e6
        print(
            f"    {label:26s} compiled {cpu['compiled']:6.1f}, interpreted "
            f"{cpu['interpreted']:6.1f} (ratio {cpu['interpreted'] / cpu['compiled']:.2f})"
        )
        df.unpersist()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.validation_bench", description=__doc__)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument(
        "--fallback-share",
        type=float,
        default=0.0,
        help="share of records given a trailing newline (valid, but not on the typed path)",
    )
    ap.add_argument(
        "--rounds",
        action="store_true",
        help="also: plain partition events vs round records (3 samples), side by side",
    )
    ap.add_argument(
        "--form",
        choices=("events", "rounds"),
        default="events",
        help="the stages' input: the generator's events (replica + partition events), or "
        "round records (a partition event carrying its replicas' samples, the collector's)",
    )
    ap.add_argument(
        "--shapes",
        action="store_true",
        help="also: round records bare vs with the collector's fields, side by side",
    )
    ap.add_argument(
        "--diagnosis",
        action="store_true",
        help="also: the diagnosis compiled vs interpreted, side by side",
    )
    ap.add_argument(
        "--counts",
        action="store_true",
        help="also: the typed path's character counts by split vs by replace, side by side",
    )
    ap.add_argument(
        "--whole-stage",
        action="store_true",
        help="also: the operator input with whole-stage code generation off and on, side by side",
    )
    ap.add_argument(
        "--python-side",
        action="store_true",
        help="also: validation where the records are decoded (the job's) against the SQL "
        "validation before it, JVM and Python, side by side",
    )
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from monitor.dev.synth import generate
    from streaming import schema
    from streaming.job import build_operator_input
    from streaming.session import build_session

    partitions = max(100, args.records // 8)
    every = round(1 / args.fallback_share) if args.fallback_share > 0 else 0
    events = list(generate(partitions, 2, fault_rate=0.001, seed=1))
    if args.form == "rounds":
        more = list(
            generate(
                max(100, args.records // 2 + 1), 2, fault_rate=0.001, seed=1, collector_fields=True
            )
        )
        events = [json.loads(r) for r in _plain_and_rounds(more, args.records)[1]]
    rows = [
        (
            json.dumps(e, separators=(",", ":")).encode()
            + (b"\n" if every and i % every == 0 else b""),
            "events",
            0,
            i,
        )
        for i, e in enumerate(events)
    ][: args.records]
    spark = build_session(master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    src = spark.createDataFrame(rows, "value binary, topic string, partition int, offset long")
    src = src.repartition(2).persist()
    n = src.count()
    typed_path = hasattr(schema, "typed_ok_sql")
    read = "read (persisted source)"
    # name -> (DataFrame, parent stage whose cost it includes)
    stages: dict[str, tuple[Any, str | None]] = {
        read: (src.select("value"), None),
        "from_json -> VARIANT struct": (
            src.select(schema.parsed_struct("value").alias("s")).select(
                F.col("s._corrupt"), F.expr("cast(s.observed_at AS string)").alias("o")
            ),
            read,
        ),
    }
    if typed_path:
        typed = src.select(schema.typed_struct("value").alias("p"))
        stages["from_json -> typed struct"] = (
            typed.select(F.col("p._corrupt"), F.expr("cast(p.observed_at AS string)").alias("o")),
            read,
        )
        flag = src.select("value", schema.typed_struct("value").alias("p")).select(
            F.expr(schema.typed_ok_sql("value")).alias("ok")
        )
        stages["typed path test (from_json + proofs)"] = (flag, "from_json -> typed struct")
    stages["validate (reason + typed columns)"] = (
        schema.validate(src).select("reason", "kind"),
        read,
    )
    stages["operator input (routing, bucket, payload)"] = (
        build_operator_input(src, args.buckets),
        read,
    )
    print(
        f"{n} records ({args.form}), master {args.master}; JVM CPU is the load-independent figure"
    )
    cpu_of: dict[str, float] = {}
    for name, (df, parent) in stages.items():
        # The payload/validation columns must be computed: hash them into one number.
        cols = [F.xxhash64(*[F.col(c) for c in df.columns]).alias("h")]
        wall, cpu = _timed(df.select(*cols), args.repeat, pid)
        cpu_of[name] = cpu
        per = cpu / n * 1e6
        added = (cpu - cpu_of[parent]) / n * 1e6 if parent else per
        print(
            f"  {name:38s} wall {wall:6.2f} s  JVM CPU {cpu:6.2f} s = {per:5.1f} us/record "
            f"(+{added:.1f} over {parent or 'nothing'})"
        )
    rejected = schema.validate(src).where(F.col("reason").isNotNull()).count()
    if typed_path:
        on_typed = flag.where(F.col("ok")).count()
        print(
            f"  paths: typed {on_typed / n:.2%}, VARIANT {(n - on_typed) / n:.2%} "
            f"(of which rejected {rejected / n:.2%})"
        )
    else:
        print(f"  paths: VARIANT only (no typed path); rejected {rejected / n:.2%}")
    if args.rounds or args.diagnosis or args.counts:
        # as many partition events as --records (each round of a partition: 3 replica events,
        # then its partition event), and as round records
        more = list(generate(max(100, args.records // 2 + 1), 2, fault_rate=0.001, seed=1))
        rounds = _plain_and_rounds(more, args.records)[1]
    if args.rounds:
        _compare_rounds(spark, more, args.records, args.repeat, pid)
    if args.diagnosis:
        _compare_diagnosis(spark, rounds, args.repeat, pid)
    if args.counts:
        _compare_counts(spark, rounds, args.repeat, pid)
    if args.shapes:
        _compare_shapes(spark, args.records, args.buckets, args.repeat, pid)
    if args.whole_stage:
        _compare_whole_stage(spark, args.records, args.buckets, args.repeat, pid)
    if args.python_side:
        _compare_python_side(spark, args.records, args.buckets, args.repeat, pid)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
