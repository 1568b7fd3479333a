"""Benchmark of the streaming job: events/s, batch latency, state size, memory.

Modes (``--mode``):

* ``stateful`` — the stateful stage alone: events pre-validated and bucketed once (not
  timed), stored as Parquet, one file per micro-batch, streamed into the operator; the sink
  only counts.
* ``pipeline`` — the whole job minus Kafka: raw JSON records (Kafka-shaped Parquet files)
  -> derived validation -> bucketing/fan-out -> operator -> the real foreachBatch sinks
  (Parquet store, findings collected; Kafka writes off).
* ``kafka`` — the whole job: events produced to a Kafka topic first (not timed), then read
  with the Kafka source, findings and dead letters written back to Kafka. Needs
  ``--bootstrap`` or ``--lab`` (starts a lab on ``--lab-port`` and stops it after).
* ``ceiling`` — not the job: the same Kafka input through the job's typed ``from_json`` into
  a pure Spark SQL stateful aggregation per partition (no validation, no model, no outputs):
  the least any design on this stack pays per event. Kafka as in ``kafka``.

Events come from ``monitor.dev.synth.generate`` (RF 3, one topic per 100 partitions). The first
batch (JIT warm-up, Python workers start, state creation) is reported separately; events/s
is over the following batches.

::

    python -m bench.spark_bench --partitions 100000 --rounds 6 --mode stateful
    python -m bench.spark_bench --partitions 100000 --rounds 6 --mode kafka --lab
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _process_children() -> dict[int, list[int]]:
    """Every process's children, from one walk over ``/proc`` (a walk reads every process's
    ``stat``: the sampler makes one a sample, not one a process it looks for)."""
    out: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        out.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(p.name))
    return out


def _descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    out: list[int] = []
    for c in children.get(pid, ()):
        out += [c, *_descendants(c, children)]
    return out


def _machine_busy_ticks() -> int:
    """The machine's busy CPU time since boot, in clock ticks, over every core: all but
    idle and iowait (guest time is counted within user already)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields[:8]) - fields[3] - fields[4]


def _cpu_s(pid: int) -> float:
    """CPU seconds of a process's own threads (user + system; not its exited children's,
    which the sampler counts as processes of their own: ``MemorySampler._cpu``)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


class MemorySampler(threading.Thread):
    """Peak RSS of the driver JVM and of the Python workers (executors' Python side), and
    the CPU time they use after the first (warm-up) batch: the load-independent cost.
    """

    def __init__(self, jvm_pid: int, query: Any = None, executors: int | None = None) -> None:
        super().__init__(daemon=True)
        self.jvm_pid = jvm_pid
        self.query = query
        #: A standalone Worker's pid: its executor JVMs and their Python workers count too.
        self.executors = executors
        self.peak_driver = 0.0
        self.peak_workers = 0.0
        #: Each Python process's RSS (MB) at that peak: how many there were, and which held it.
        self.peak_workers_each: list[float] = []
        self.peak_python_driver = 0.0
        #: A standalone cluster's executor JVMs, together (0 in local mode).
        self.peak_executors = 0.0
        #: CPU seconds (JVM + Python workers + this driver) when the first batch with
        #: data had finished, and at the last sample.
        self.cpu_after_first: float | None = None
        self.cpu_last = 0.0
        #: The same split: (JVMs, Python workers) -- the driver's Python is the rest.
        self.split_after_first: tuple[float, float] | None = None
        self.split_last = (0.0, 0.0)
        #: The machine's busy CPU ticks at those two instants: whether the cores were busy
        #: during the sustained batches, whoever used them (the window runs on after the
        #: last batch, idle: the ticks are divided by the batches' time).
        self.machine_after_first: int | None = None
        self.machine_last = 0
        #: Each process's CPU seconds as last sampled: a process that exits (a previous
        #: query's Python workers on a shared standalone cluster) keeps what it had used,
        #: so the sums never go back (they did: the ceiling's read negative).
        self._seen: dict[str, dict[int, float]] = {}
        #: This thread's own CPU seconds as of its last sample: the driver's Python process
        #: runs it, and what it costs is the benchmark's, not the job's (it is taken off).
        self.own_cpu = 0.0
        self.running = True

    def _tree(self, children: dict[int, list[int]]) -> list[int]:
        pids = [self.jvm_pid, os.getpid()]
        for daemon in children.get(self.jvm_pid, ()):
            pids.append(daemon)
            pids.extend(children.get(daemon, ()))
        if self.executors is not None:
            pids.extend(_descendants(self.executors, children))
        return pids

    def _executor_jvms(self, children: dict[int, list[int]]) -> list[int]:
        """A standalone worker's executor JVMs (none in local mode)."""
        return list(children.get(self.executors, ())) if self.executors is not None else []

    @staticmethod
    def _python_workers(jvms: list[int], children: dict[int, list[int]]) -> list[int]:
        """The Python daemons and workers of ``jvms``: the driver JVM (local mode) or, on a
        standalone cluster, each executor JVM."""
        return [w for jvm in jvms for d in children.get(jvm, ()) for w in (d, *children.get(d, ()))]

    def _cpu(self, kind: str, pids: list[int]) -> float:
        """CPU seconds of the processes of one ``kind`` (the tree, the JVMs, the Python
        workers): those of ``pids`` now, plus what each one sampled before and exited since
        had used."""
        seen = self._seen.setdefault(kind, {})
        for p in pids:
            seen[p] = max(seen.get(p, 0.0), _cpu_s(p))
        return sum(seen.values())

    def run(self) -> None:
        while self.running:
            self.sample()
            self.own_cpu = time.thread_time()
            time.sleep(0.5)

    def sample(self) -> None:
        self.peak_driver = max(self.peak_driver, _rss_mb(self.jvm_pid))
        self.peak_python_driver = max(self.peak_python_driver, _rss_mb(os.getpid()))
        children = _process_children()
        executors = self._executor_jvms(children)
        jvms = [self.jvm_pid, *executors]
        python_workers = self._python_workers(jvms, children)
        self.peak_executors = max(self.peak_executors, sum(_rss_mb(p) for p in executors))
        each = [_rss_mb(w) for w in python_workers]
        if sum(each) > self.peak_workers:
            self.peak_workers, self.peak_workers_each = sum(each), sorted(each, reverse=True)
        self.cpu_last = self._cpu("tree", self._tree(children)) - self.own_cpu
        self.split_last = (self._cpu("jvms", jvms), self._cpu("python", python_workers))
        self.machine_last = _machine_busy_ticks()
        if self.cpu_after_first is None and self.query is not None:
            p = self.query.lastProgress
            if p is not None and p["numInputRows"] > 0:
                self.cpu_after_first = self.cpu_last
                self.split_after_first = self.split_last
                self.machine_after_first = self.machine_last


def _events(
    partitions: int, rounds: int, seed: int, form: str, bare: bool = False
) -> tuple[list[bytes], int]:
    """The records, and how many model events they carry (a round record: 1 + its samples).

    With the fields the collector sends (topic id, offline replicas, log starts, fetch lags)
    unless ``bare``."""
    from monitor.dev.synth import generate

    records, events = [], 0
    for e in generate(
        partitions, rounds, fault_rate=0.001, seed=seed, form=form, collector_fields=not bare
    ):
        records.append(json.dumps(e, separators=(",", ":")).encode())
        events += 1 + len(e.get("replica_samples", ()))
    return records, events


def _write_raw(folder: Path, events: list[bytes], per_batch: int) -> int:
    folder.mkdir(parents=True)
    files = 0
    for start in range(0, len(events), per_batch):
        chunk = events[start : start + per_batch]
        n = len(chunk)
        pq.write_table(
            pa.table(
                {
                    "value": pa.array(chunk, pa.binary()),
                    "topic": pa.array(["events"] * n, pa.string()),
                    "partition": pa.array([0] * n, pa.int32()),
                    "offset": pa.array(range(start, start + n), pa.int64()),
                }
            ),
            folder / f"batch-{files:05d}.parquet",
        )
        # The file source orders files by modification time: make it the batch order.
        os.utime(folder / f"batch-{files:05d}.parquet", (1_700_000_000 + files,) * 2)
        files += 1
    return files


def collector_key(value: Any) -> Any:
    """A Spark column: the Kafka key the collector gives the record in column ``value``
    (``monitor.collector.build.event_key``) when it is a partition's
    (``contract.events.partition_key``, which the job routes by), else null."""
    from pyspark.sql import functions as F

    from monitor.contract.events import PARTITION_KEY_PREFIX

    v = value.cast("string")
    parts = (F.get_json_object(v, f"$.{n}") for n in ("partition", "topic", "cluster"))
    return F.when(
        F.get_json_object(v, "$.kind").isin("partition", "replica"),
        F.concat(F.lit(PARTITION_KEY_PREFIX), F.concat_ws("/", *parts)),
    )


def _produce_with_spark(spark: Any, raw: Path, bootstrap: str, topic: str) -> None:
    """The raw records to ``topic`` through Spark's Kafka sink, in their order, keyed like
    the collector's (a partition's records by ``contract.events.partition_key``, which the
    job routes by without parsing them): a pre-loaded topic of millions of records in a
    minute or two (kafka-python produces ~5k records/s). One task writes them, sorted by
    their sequence number, so each key's records keep their order."""
    from pyspark.sql import functions as F

    key = collector_key(F.col("value"))
    (
        spark.read.parquet(str(raw))
        .orderBy("offset")
        .coalesce(1)
        .select(key.alias("key"), F.col("value"))
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.acks", "all")
        .option("kafka.linger.ms", "20")
        .option("kafka.batch.size", str(256 * 1024))
        .option("topic", topic)
        .save()
    )


def _profile() -> Path | None:
    """The operator's profile file (``MONITOR_STREAMING_PROFILE``), once it exists."""
    path = Path(os.environ.get("MONITOR_STREAMING_PROFILE", ""))
    return path if path.is_file() else None


def _profile_size() -> int:
    path = _profile()
    return path.stat().st_size if path else 0


def _print_operator_profile(rounds: float, since: int) -> None:
    """The operator's phases over the sustained batches (``MONITOR_STREAMING_PROFILE``, the
    lines written after byte ``since``), and how its bucket loads went."""
    from bench.operator_bench import phase_line, profile_phases

    path = _profile()
    if path is None or not rounds:
        return
    with path.open("rb") as fh:
        fh.seek(since)
        text = fh.read().decode()
    _, phases, loads, saves = profile_phases(text, skip_batches=1)
    if phases:
        print(
            "  operator's Python phases after the first batch (wall, us per partition-round): "
            + phase_line(phases, rounds)
        )
        print(
            "    bucket loads: "
            + ", ".join(f"{k} {v}" for k, v in sorted(loads.items()))
            + " (hit: the worker held the bucket; full, stale: unpickled from the state store)"
        )
        print(
            "    bucket saves: "
            + ", ".join(f"{k} {v}" for k, v in sorted(saves.items()))
            + " (snapshot: the whole bucket; replay: the batch's input; delta: what it changed)"
        )


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _ceiling_query(spark: Any, cfg: Any, work: Path) -> Any:
    """The pure-SQL ceiling on the same input: the Kafka source, the job's typed
    ``from_json``, and a SQL stateful aggregation per partition (RocksDB state store, as
    the job's). No validation, no model, no outputs: what any design pays at the least."""
    from pyspark.sql import functions as F

    from streaming import schema
    from streaming.job import JobCounters, RunningJob, kafka_source

    p = kafka_source(spark, cfg).select(schema.typed_struct("value").alias("p")).select("p.*")
    leo = F.coalesce(F.col("log_end_offset"), F.array_max("replica_samples.log_end_offset"))
    agg = p.groupBy("cluster", "topic", "partition").agg(
        F.count("*").alias("n"),
        F.max(leo).alias("leo"),
        F.max("high_watermark").alias("hw"),
        F.max("leader_epoch").alias("epoch"),
        F.max("observed_at").alias("observed_at"),
    )
    query = (
        agg.writeStream.outputMode("update")
        .format("noop")
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="0 milliseconds")
        .start()
    )
    return RunningJob(query, JobCounters(), None)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Per:
    """What one input record carries on average: partition-rounds and model events."""

    rounds: float
    events: float


def _measure(
    args: Any,
    job: Any,
    jvm_pid: int,
    work: Path,
    per: Per,
    counters: dict[str, Any] | None,
) -> dict[str, float]:
    """Drain the query, print its figures, return the headline ones."""
    out: dict[str, float] = {}
    sampler = MemorySampler(jvm_pid, job.query, getattr(args, "worker_pid", None))
    sampler.start()
    profile_at = _profile_size()
    load_before = os.getloadavg()
    job.drain(timeout_s=7200, poll_s=0.2)
    sampler.running = False
    sampler.join()
    sampler.sample()
    load_after = os.getloadavg()
    job.query.stop()
    progress = [p for p in job.query.recentProgress if p["numInputRows"] > 0]
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    rows = [p["numInputRows"] for p in progress]
    steady_rows, steady_s = sum(rows[1:]), sum(durations[1:])
    if counters is not None:
        state_bytes, partitions = counters["state_bytes"], counters["partitions"]
    else:
        state_bytes, partitions = job.counters.state_bytes, job.counters.partitions
    ck = sum(f.stat().st_size for f in (work / "checkpoint").rglob("*") if f.is_file())
    print(
        f"mode {args.mode}: {sum(rows)} records, {len(progress)} batches, "
        f"{args.buckets} buckets, master {args.master}, form {args.form}"
    )
    if durations:
        print(f"  first batch: {rows[0]} rows in {durations[0]:.1f}s (warm-up)")
    if steady_s:
        rate = steady_rows / steady_s
        out["rounds_s"] = rate * per.rounds
        print(
            f"  sustained over {len(rows) - 1} batches: {rate * per.rounds:,.0f} "
            f"partition-rounds/s, {rate * per.events:,.0f} events/s, {rate:,.0f} records/s"
        )
    if steady_rows and sampler.cpu_after_first is not None:
        cpu = sampler.cpu_last - sampler.cpu_after_first
        out["cpu_round_us"] = cpu / (steady_rows * per.rounds) * 1e6
        print(
            f"  CPU after the first batch: {cpu:.1f} s (JVM + Python) = "
            f"{out['cpu_round_us']:.1f} us/partition-round, "
            f"{cpu / (steady_rows * per.events) * 1e6:.1f} us/event, "
            f"{cpu / steady_rows * 1e6:.1f} us/record; on 2 otherwise idle cores at most "
            f"~{2 * steady_rows * per.rounds / cpu:,.0f} partition-rounds/s"
        )
        if sampler.split_after_first is not None:
            per_round = 1e6 / (steady_rows * per.rounds)
            jvm = (sampler.split_last[0] - sampler.split_after_first[0]) * per_round
            python = (sampler.split_last[1] - sampler.split_after_first[1]) * per_round
            out["cpu_round_jvm_us"], out["cpu_round_python_us"] = jvm, python
            print(
                f"    of which JVM {jvm:.1f} us, Python workers {python:.1f} us, the driver's "
                f"Python {out['cpu_round_us'] - jvm - python:.1f} us per partition-round "
                f"(this benchmark's own sampler, {sampler.own_cpu:.1f} s of CPU in all, left out)"
            )
        if sampler.machine_after_first is not None and steady_s:
            # Over the batches' own wall time: the query idles after its last batch until
            # the drain sees it caught up (up to a trigger), and those seconds are no batch's.
            busy = sampler.machine_last - sampler.machine_after_first
            busy_s = busy / os.sysconf("SC_CLK_TCK")
            cores = os.cpu_count() or 1
            out["machine_busy"] = busy_s / (cores * steady_s)
            print(
                f"  the machine during the sustained batches: {busy_s:.1f} CPU-s of "
                f"{cores} cores x {steady_s:.1f} s = {100 * out['machine_busy']:.0f}% busy "
                f"(this job's {cpu:.1f}; the rest: Kafka, other processes; the sampling "
                "window's edges count too: short runs read over 100%)"
            )
    print(
        f"  load average (1/5/15 min) before {' '.join(f'{x:.1f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.1f}' for x in load_after)}"
    )
    print(
        f"  batch latency: p50 {_pct(durations[1:], 0.5):.2f}s  "
        f"p99 {_pct(durations[1:], 0.99):.2f}s"
        f"  max {max(durations[1:], default=float('nan')):.2f}s"
    )
    if partitions:
        print(
            f"  state: {state_bytes / partitions:.0f} B/partition stored "
            f"({state_bytes / 1e6:.1f} MB, {partitions} partitions); checkpoint dir "
            f"{ck / 1e6:.1f} MB"
        )
    workers = f"{sampler.peak_workers:.0f} MB"
    if len(sampler.peak_workers_each) > 1:
        workers += f" ({' + '.join(f'{m:.0f}' for m in sampler.peak_workers_each)})"
    if partitions:
        workers += f" = {sampler.peak_workers * 1e6 / partitions:,.0f} B/partition"
    print(
        f"  memory (peak RSS): driver JVM {sampler.peak_driver:.0f} MB, Python workers "
        f"{workers}, Python driver {sampler.peak_python_driver:.0f} MB"
        + (f", executor JVMs {sampler.peak_executors:.0f} MB" if sampler.peak_executors else "")
    )
    if len(progress) > 1:
        phases = sorted({k for p in progress[1:] for k in p["durationMs"]})
        medians = {
            k: _pct([p["durationMs"].get(k, 0) / 1000 for p in progress[1:]], 0.5) for k in phases
        }
        print(
            "  per batch, median s (after the first): "
            + ", ".join(f"{k} {v:.2f}" for k, v in medians.items())
        )
    _print_operator_profile(steady_rows * per.rounds, profile_at)
    sink_phases = list(job.counters.batch_phases)[1:] if args.mode != "stateful" else []
    if sink_phases:
        names = sorted({k for p in sink_phases for k in p})
        print(
            "  inside addBatch, median s (after the first): "
            + ", ".join(f"{k} {_pct([p.get(k, 0.0) for p in sink_phases], 0.5):.2f}"
                        for k in names)
        )  # fmt: skip
    if args.trigger_seconds > 0 and durations[1:]:
        offered = args.batch_events / args.trigger_seconds
        p99 = _pct(durations[1:], 0.99)
        kept = "yes" if p99 <= args.trigger_seconds else "no: batches outlast the trigger"
        print(
            f"  offered rate {offered * per.rounds:,.0f} partition-rounds/s "
            f"({args.batch_events} records per {args.trigger_seconds:g} s trigger); "
            f"kept up: {kept}"
        )
    if progress:
        print(f"  last batch durationMs: {progress[-1]['durationMs']}")
        ops = progress[-1].get("stateOperators") or []
        if ops:
            print(
                "  state operator:",
                {k: v for k, v in ops[0].items() if k != "customMetrics"},
            )
            print(f"  state custom metrics: {ops[0].get('customMetrics')}")
    if durations[1:]:
        print(f"  batch durations: {', '.join(f'{d:.1f}' for d in durations)}")
        print(f"  mean batch {statistics.mean(durations[1:]):.2f}s")
    return out


def main(argv: list[str] | None = None) -> int:
    from bench.operator_bench import add_bare_records

    ap = argparse.ArgumentParser(prog="python -m bench.spark_bench", description=__doc__)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=6, help="collection rounds")
    ap.add_argument(
        "--form",
        choices=("rounds", "replica"),
        default="rounds",
        help="a partition's round as one round record (the collector's default) or as a "
        "partition event and 3 replica events (older collectors)",
    )
    ap.add_argument(
        "--batch-events",
        type=int,
        default=300_000,
        help="records per micro-batch (maxOffsetsPerTrigger with Kafka)",
    )
    ap.add_argument(
        "--with-ceiling",
        action="store_true",
        help="kafka: then run the ceiling on the same topic, in the same session, and print "
        "the ratio",
    )
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument(
        "--mode", choices=("stateful", "pipeline", "kafka", "ceiling"), default="stateful"
    )
    ap.add_argument("--trigger-seconds", type=float, default=0.0)
    ap.add_argument("--shuffle-partitions", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument(
        "--standalone-cores",
        type=int,
        default=0,
        help="run on a Spark standalone cluster started here (master + one worker with "
        "this many cores, 127.0.0.1) instead of --master; CPU counts the executor's JVM and "
        "Python workers",
    )
    ap.add_argument(
        "--executor-cores",
        type=int,
        default=0,
        help="with --standalone-cores: executors of this many cores each (the worker runs "
        "standalone-cores / executor-cores executors; default one executor with them all). "
        "Each executor has its own Python workers, and a bucket's task keeps to the "
        "executor holding its state store",
    )
    ap.add_argument("--bootstrap", help="Kafka bootstrap servers (kafka, ceiling)")
    ap.add_argument("--lab", action="store_true", help="start a lab Kafka (kafka, ceiling)")
    ap.add_argument("--lab-port", type=int, default=23092)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--no-state-rows",
        action="store_true",
        help="experiment (pipeline, kafka): the operator emits no state rows, so the store "
        "gets none; the difference to a normal run is what the state rows cost",
    )
    ap.add_argument(
        "--driver-memory",
        help="spark.driver.memory (local mode runs everything in the driver JVM; Spark's "
        "default 1g is short of a million partitions' state traffic)",
    )
    ap.add_argument(
        "--produce",
        choices=("python", "spark"),
        default="python",
        help="kafka, ceiling: produce the input with kafka-python (~5k records/s) or with "
        "Spark's Kafka sink (for millions of records); untimed either way",
    )
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for this run, over the job's (repeatable): experiments such as "
        "spark.sql.codegen.wholeStage=false, or a Flight Recording in extraJavaOptions",
    )
    add_bare_records(ap)
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args(argv)
    extra_conf: dict[str, str] = {}
    for item in args.conf:
        key, eq, value = item.partition("=")
        if not eq or not key:
            ap.error(f"--conf {item!r}: give KEY=VALUE")
        extra_conf[key] = value
    if args.executor_cores and not 0 < args.executor_cores <= args.standalone_cores:
        ap.error(
            f"--executor-cores {args.executor_cores}: needs --standalone-cores of at least "
            f"that many (given {args.standalone_cores})"
        )

    from streaming.config import StreamingConfig
    from streaming.job import (
        JobCounters,
        RunningJob,
        build_operator_input,
        parquet_source,
        start,
    )
    from streaming.session import build_session, kafka_jars

    work = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    # The operator's profile, summed by _measure (set before the JVM starts: the Python
    # workers inherit the environment); a path given by the caller is kept.
    os.environ.setdefault("MONITOR_STREAMING_PROFILE", str(work / "operator-profile.txt"))
    lab = None
    t0 = time.monotonic()
    events, n_model_events = _events(
        args.partitions, args.rounds, args.seed, args.form, args.bare_records
    )
    gen_s = time.monotonic() - t0
    n_events = len(events)
    per_record = Per(
        rounds=args.partitions * args.rounds / n_events, events=n_model_events / n_events
    )
    print(
        f"generated {n_events} records carrying {n_model_events} events "
        f"({args.partitions} partitions x {args.rounds} rounds, RF 3, form {args.form}) "
        f"in {gen_s:.1f}s",
        flush=True,
    )
    jars = kafka_jars() if args.mode in ("kafka", "ceiling") else []
    cluster, conf = None, dict[str, str]()
    if args.standalone_cores:
        from monitor.dev.processes.spark import SparkStandalone

        # The worker's memory shared by its executors (one: 6 GB; two: 4 GB each).
        executors = args.standalone_cores // (args.executor_cores or args.standalone_cores)
        cluster = SparkStandalone(
            work / "standalone", worker_cores=args.standalone_cores, worker_memory="10g"
        )
        cluster.start()
        args.master, args.worker_pid = cluster.url, cluster.procs[1].pid
        conf = {
            "spark.executor.memory": f"{6 if executors == 1 else max(1, 8 // executors)}g",
            "spark.cores.max": str(args.standalone_cores),
        }
        if args.executor_cores:
            conf["spark.executor.cores"] = str(args.executor_cores)
        print(
            f"standalone cluster {cluster.url}: 1 worker, {args.standalone_cores} core(s), "
            f"{executors} executor(s)"
        )
    if args.driver_memory:
        conf["spark.driver.memory"] = args.driver_memory
    conf.update(extra_conf)
    try:
        spark = build_session(
            master=args.master, shuffle_partitions=args.shuffle_partitions, jars=jars, conf=conf
        )
    except BaseException:
        if cluster is not None:
            cluster.stop()
        raise
    spark.sparkContext.setLogLevel("ERROR")
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    cfg = StreamingConfig(
        # the Kafka modes set the lab's below; the others read Parquet
        kafka={"bootstrap_servers": "127.0.0.1:9"},
        checkpoint=str(work / "checkpoint"),
        store=str(work / "store"),
        buckets=args.buckets,
        trigger_seconds=args.trigger_seconds,
        tick_ms=3_600_000,
        shuffle_partitions=args.shuffle_partitions,
        jars=[],
        max_offsets_per_trigger=args.batch_events,
    )
    print(
        f"batches of whole rounds stored as their input, up to {cfg.replay_batches} after a "
        "snapshot (MONITOR_STREAMING_REPLAY_BATCHES; 0: as snapshots)",
        flush=True,
    )
    try:
        raw = work / "raw"
        files = _write_raw(raw, events, args.batch_events)
        del events
        if args.no_state_rows:
            import functools

            import streaming.job
            from streaming.operator import OperatorSettings

            streaming.job.OperatorSettings = functools.partial(  # type: ignore[misc]
                OperatorSettings, emit_state=False
            )
        counters: dict[str, Any] = {"batches": [], "state_bytes": 0, "partitions": 0}
        if args.mode == "stateful":
            # Pre-validate and bucket once (untimed): the stream starts at the operator.
            pre = work / "pre"
            static = spark.read.parquet(str(raw))
            build_operator_input(static, args.buckets).write.parquet(str(pre))
            schema = spark.read.parquet(str(pre)).schema
            # One file per batch: re-split by the raw file order is not kept by the write;
            # stream the pre-bucketed rows with maxFilesPerTrigger=1 over re-chunked files.
            rechunk = work / "pre_chunks"
            from pyspark.sql import functions as F

            from streaming.operator import SEP

            seq = F.split(F.col("payload"), SEP).getItem(1).cast("long")
            rows = spark.read.parquet(str(pre)).withColumn("_seq", seq)
            rows.repartitionByRange(files, "_seq").sortWithinPartitions("_seq").drop(
                "_seq"
            ).write.parquet(str(rechunk))
            for i, part in enumerate(sorted(rechunk.glob("part-*.parquet"))):
                os.utime(part, (1_700_000_000 + i,) * 2)  # stream them in range order
            src = (
                spark.readStream.schema(schema)
                .option("maxFilesPerTrigger", 1)
                .parquet(str(rechunk))
            )
            from streaming.operator import OUTPUT_DDL, OperatorSettings, make_processor

            settings = OperatorSettings(
                buckets=args.buckets,
                tick_ms=3_600_000,
                catchup_slack_ms=10_000,
                model=cfg.model,
                cache_scope=str(work),
            )
            out = src.groupBy("bucket").transformWithStateInPandas(
                statefulProcessor=make_processor(settings),
                outputStructType=OUTPUT_DDL,
                outputMode="Append",
                timeMode="ProcessingTime",
            )

            def count(batch: Any, batch_id: int) -> None:
                from pyspark.sql import functions as F

                started = time.monotonic()
                batch = batch.persist()  # one run of the operator for both actions
                stats = batch.filter(F.col("out") == "stats").collect()
                n_state = batch.filter(F.col("out") == "state").count()
                accepted = sum(int(r.n_events or 0) for r in stats)
                if stats:
                    counters["state_bytes"] = sum(int(r.state_bytes or 0) for r in stats)
                    counters["partitions"] = sum(int(r.n_partitions or 0) for r in stats)
                batch.unpersist()
                counters["batches"].append(
                    (batch_id, accepted, n_state, time.monotonic() - started)
                )

            query = (
                out.writeStream.foreachBatch(count)
                .option("checkpointLocation", str(work / "checkpoint"))
                .trigger(processingTime=f"{int(args.trigger_seconds * 1000)} milliseconds")
                .start()
            )
            job: Any = RunningJob(query, JobCounters(), None)  # type: ignore[arg-type]
        elif args.mode == "pipeline":
            job = start(spark, cfg, source=parquet_source(spark, str(raw)), write_kafka=False)
        else:
            from monitor.dev.lab.admin import create_topic
            from tests.streaming.kafka_io import produce_events

            bootstrap = args.bootstrap
            if args.lab:
                from monitor.dev.lab.cluster import Lab
                from monitor.dev.lab.config import LabConfig

                lab = Lab(LabConfig(dir=work / "lab", base_port=args.lab_port, heap="1g"))
                lab.up()
                bootstrap = lab.bootstrap_servers
            assert bootstrap, f"mode {args.mode} needs --bootstrap or --lab"
            tag = str(int(time.time()))
            topics = {r: f"bench-{r}-{tag}" for r in ("events", "findings", "deadletter")}
            for role, name in topics.items():
                create_topic(bootstrap, name, partitions=6 if role == "events" else 1)
            t = time.monotonic()
            if args.produce == "spark":
                _produce_with_spark(spark, raw, bootstrap, topics["events"])
            else:
                produce_events(
                    bootstrap,
                    topics["events"],
                    (
                        r
                        for f in sorted(raw.iterdir())
                        for r in pq.read_table(f)["value"].to_pylist()
                    ),
                )
            print(
                f"produced {n_events} records to Kafka in {time.monotonic() - t:.1f}s", flush=True
            )
            cfg = cfg.model_copy(
                update={
                    "kafka": cfg.kafka.model_copy(update={"bootstrap_servers": bootstrap}),
                    "events_topic": topics["events"],
                    "findings_topic": topics["findings"],
                    "deadletter_topic": topics["deadletter"],
                }
            )
            job = start(spark, cfg) if args.mode == "kafka" else _ceiling_query(spark, cfg, work)

        figures = _measure(
            args, job, jvm_pid, work, per_record, counters if args.mode == "stateful" else None
        )
        if args.with_ceiling and args.mode == "kafka":
            print("\nceiling on the same topic, same session:", flush=True)
            ceiling = _ceiling_query(spark, cfg, work / "ceiling")
            top = _measure(args, ceiling, jvm_pid, work / "ceiling", per_record, None)
            if figures.get("rounds_s") and top.get("rounds_s"):
                print(
                    f"\nratio job/ceiling: partition-rounds/s "
                    f"{figures['rounds_s']:,.0f} / {top['rounds_s']:,.0f} = "
                    f"{figures['rounds_s'] / top['rounds_s']:.2f}"
                    + (
                        f"; CPU per partition-round {figures['cpu_round_us']:.1f} / "
                        f"{top['cpu_round_us']:.1f} us"
                        if figures.get("cpu_round_us") and top.get("cpu_round_us")
                        else ""
                    )
                )
    finally:
        spark.stop()
        if cluster is not None:
            cluster.stop()
        if lab is not None:
            lab.down()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
