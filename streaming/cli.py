"""``monitor stream``: run the Spark Structured Streaming job (also ``python -m streaming``).

``register(sub)`` adds the subcommand to the ``monitor`` CLI (module ``streaming.cli``);
:func:`build_parser` is the same options as a standalone parser, for ``python -m streaming``
and ``spark-submit streaming/cli.py``: the job's one entry point.
"""

from __future__ import annotations

import os
import sys

# Run as a script (``spark-submit .../site-packages/streaming/cli.py``), Python puts this
# folder first on sys.path, where streaming/operator.py shadows the standard library's
# ``operator`` (an installed wheel's driver died at its first import). Before any import
# that could need it.
if (
    __name__ == "__main__"
    and sys.path
    and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__))
):
    del sys.path[0]

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from monitor import logs, settings
from streaming.config import REQUIRED, StreamingConfig, load_config

EXIT_USAGE = 64  # monitor.cli.EXIT_USAGE (streaming may not import the CLI above it)
EXIT_CONFIG = 78  # monitor.cli.EXIT_CONFIG


class _Parser(argparse.ArgumentParser):
    """``python -m streaming``'s parser: a usage error exits 64, as ``monitor stream``'s."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_options(p: argparse.ArgumentParser) -> None:
    d = StreamingConfig.model_fields
    p.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="settings file, TOML or YAML (.toml, .yaml, .yml; .json too); default: "
        "$MONITOR_STREAMING_CONFIG. Flags beat MONITOR_STREAMING_* variables, which beat the "
        "file (docs/configuration.md)",
    )
    p.add_argument(
        "--bootstrap",
        help="bootstrap servers of the monitor's own Kafka cluster, where the events are "
        "(required; the rest of the connection: MONITOR_STREAMING_KAFKA__*)",
    )
    p.add_argument("--events-topic", help=f"events topic ({d['events_topic'].default})")
    p.add_argument("--findings-topic", help=f"findings topic ({d['findings_topic'].default})")
    p.add_argument(
        "--deadletter-topic", help=f"dead-letter topic ({d['deadletter_topic'].default})"
    )
    p.add_argument(
        "--checkpoint", help="checkpoint location: folder or Hadoop URI (hdfs://, s3a://)"
    )
    p.add_argument("--store", help="Parquet state store location (folder or Hadoop URI)")
    p.add_argument("--master", help="Spark master (local[2]); 'none' keeps what spark-submit set")
    p.add_argument("--trigger-seconds", type=float, help="micro-batch interval in seconds")
    p.add_argument(
        "--buckets",
        type=int,
        help="state keys (hash buckets of partitions); a multiple of the shuffle partitions; "
        "fixed for the life of a checkpoint",
    )
    p.add_argument("--tick-ms", type=int, help="interval of the model's time-driven checks")
    p.add_argument("--shuffle-partitions", type=int, help="spark.sql.shuffle.partitions")
    p.add_argument(
        "--starting-offsets", choices=("earliest", "latest"), help="where a new query starts"
    )
    p.add_argument("--max-offsets-per-trigger", type=int, help="cap on records per batch (1000000)")
    p.add_argument(
        "--max-record-bytes", type=int, help="longer records are dead-lettered unparsed (262144)"
    )
    p.add_argument(
        "--once",
        "--available-now",
        dest="once",
        action="store_true",
        default=None,
        help="process what is in the topic now, then stop",
    )
    p.add_argument(
        "--wait-for-topics",
        type=float,
        metavar="SECONDS",
        dest="wait_for_topics_s",
        help="wait up to this long for the events topic before starting the query (0)",
    )
    p.add_argument(
        "--no-jars",
        action="store_true",
        help="do not add the resolved spark-sql-kafka jars (use --packages instead)",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable)",
    )
    p.add_argument(
        "--spark-encrypt",
        action="store_true",
        default=None,
        help="encrypt Spark's RPC, block transfers and shuffle files (spark_encrypt; with "
        "spark_authenticate, on by default)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="check the monitor's cluster, its topics and permissions, Java, Spark's Kafka "
        "source, the checkpoint and store, print a line each, exit 0 if all passed, 2 if not "
        "(Spark is not started)",
    )
    p.add_argument(
        "--create-topics",
        action="store_true",
        help="with --check: create the monitor's topics where they are missing, with the "
        "documented settings (docs/deploy.md)",
    )
    p.add_argument("--stale-after-ms", type=int, help="model: silence before stale_telemetry")
    p.add_argument(
        "--metrics-port", type=int, help="serve Prometheus /metrics on this port (off if unset)"
    )
    p.add_argument("--metrics-host", help="bind address of /metrics (127.0.0.1)")
    p.add_argument(
        "--web-config-file",
        "--web.config.file",
        dest="web_config_file",
        type=Path,
        help="Prometheus web configuration of /metrics: TLS, mutual TLS, basic auth",
    )
    p.add_argument(
        "--per-partition",
        choices=("findings", "all", "none"),
        help="per-partition series: with an open finding (default), all, or none",
    )
    logs.add_arguments(p)


def config_from_args(args: argparse.Namespace) -> StreamingConfig:
    """Flags > ``MONITOR_STREAMING_*`` > the file (``--config``) > defaults."""
    given: dict[str, Any] = {
        "events_topic": args.events_topic,
        "findings_topic": args.findings_topic,
        "deadletter_topic": args.deadletter_topic,
        "checkpoint": args.checkpoint,
        "store": args.store,
        "trigger_seconds": args.trigger_seconds,
        "buckets": args.buckets,
        "tick_ms": args.tick_ms,
        "shuffle_partitions": args.shuffle_partitions,
        "starting_offsets": args.starting_offsets,
        "max_offsets_per_trigger": args.max_offsets_per_trigger,
        "max_record_bytes": args.max_record_bytes,
        "once": args.once,
        "wait_for_topics_s": args.wait_for_topics_s,
        "metrics_port": args.metrics_port,
        "metrics_host": args.metrics_host,
        "web_config_file": args.web_config_file,
        "per_partition": args.per_partition,
        "spark_encrypt": args.spark_encrypt,
    }
    flags = {k: v for k, v in given.items() if v is not None}
    if args.master is not None:
        flags["master"] = None if args.master.lower() == "none" else args.master
    if args.bootstrap is not None:
        flags["kafka"] = {"bootstrap_servers": args.bootstrap}
    if args.no_jars:
        flags["jars"] = []
    if args.conf:
        conf = {}
        for item in args.conf:
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--conf expects KEY=VALUE, got {item!r}")
            conf[key] = value
        flags["spark_conf"] = conf
    if args.stale_after_ms is not None:
        flags["model"] = {"stale_after_ms": args.stale_after_ms}
    return load_config(args.config, **flags)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="monitor stream", description="Run the Spark streaming job of the monitor.")
    add_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    from streaming.job import KafkaSourceUnavailable, LayoutError, TopicMissing
    from streaming.job import run as run_job
    from streaming.storefs import StorePairError

    try:
        cfg = config_from_args(args)
    except ValidationError as e:
        print(f"monitor stream: invalid configuration: {settings.describe_error(e, REQUIRED)}",
              file=sys.stderr)  # fmt: skip
        return EXIT_CONFIG
    except (ValueError, OSError) as e:
        print(f"monitor stream: invalid configuration: {e}", file=sys.stderr)
        return EXIT_CONFIG
    logs.configure_from(args)  # once the settings are good (a refusal is one line)
    if args.create_topics and not args.check:
        print("monitor stream: --create-topics goes with --check", file=sys.stderr)
        return EXIT_USAGE
    if args.check:
        from streaming.check import check

        given = getattr(args, "argv", None) or sys.argv[1:]
        command = shlex.join(["monitor", *(a for a in given if a != "--create-topics")])
        return check(cfg, create_topics=args.create_topics, command=command)
    try:
        return run_job(cfg)
    except (LayoutError, StorePairError) as e:  # raised before Spark starts
        print(f"monitor stream: {e}", file=sys.stderr)
        return 2
    except KafkaSourceUnavailable as e:  # before Spark starts: setup
        print(f"monitor stream: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except TopicMissing as e:
        print(f"monitor stream: {e}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m streaming`` and ``spark-submit streaming/cli.py``: same flags, same
    errors as ``monitor stream`` (a bad setting is one line and exit 78, not a traceback)."""
    return run(build_parser().parse_args(argv))


def register(sub: Any) -> None:
    p = sub.add_parser(
        "stream",
        help="run the Spark Structured Streaming job (events -> findings, state, dead letters)",
        description="Reads telemetry events from Kafka, runs the watermark model per hash "
        "bucket of partitions in Spark state, writes findings, dead letters and partition "
        "state. Settings, highest first: flags, MONITOR_STREAMING_* environment variables, "
        "the --config file (TOML or YAML), defaults (docs/configuration.md).",
    )
    add_options(p)
    p.set_defaults(func=run)


if __name__ == "__main__":  # spark-submit streaming/cli.py ...
    sys.exit(main())
