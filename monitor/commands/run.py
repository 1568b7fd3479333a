"""``monitor run``: the collector, the job (local Spark) and both ``/metrics`` as one
supervised unit, the monitor's topics on a one-broker Kafka it starts itself (or on the
cluster ``--events-bootstrap`` names) -- from an installed package to findings on any
cluster with one command (:mod:`monitor.run.runner`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from monitor import logs, settings
from monitor.contract.events import DEADLETTER_TOPIC, FINDINGS_TOPIC
from monitor.contract.topics import Role

EXIT_CONFIG = 78


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run the whole monitor on this host: collector, job (local Spark), /metrics, "
        "and a Kafka of its own for its topics",
        description="Runs monitor collect and monitor stream (local Spark) as one supervised "
        "unit and prints each finding as it comes. The monitor's topics go on a one-broker "
        "Kafka it starts itself (data in the state folder), or on the cluster "
        "--events-bootstrap names -- never on the watched cluster unless "
        "--events-on-watched-cluster says so. Ctrl-C stops it all. Settings: as for collect "
        "and stream (--collector-config, --stream-config, MONITOR_COLLECTOR_*, "
        "MONITOR_STREAMING_*: docs/configuration.md).",
    )
    p.add_argument("--bootstrap", help="bootstrap servers of the watched cluster, host:port[,...]")
    p.add_argument(
        "--jmx",
        action="append",
        default=[],
        metavar="ID=URL",
        help="a broker's JMX exporter URL (repeat per broker); none: Admin API only",
    )
    p.add_argument("--cluster", help="cluster name put on every event and finding")
    p.add_argument("--interval", type=float, help="seconds between collection rounds (5)")
    p.add_argument("--jmx-profile", help="whose exporter rules name the metrics (auto)")
    p.add_argument(
        "--collector-config", type=Path, metavar="FILE", help="the collector's settings file"
    )
    p.add_argument("--stream-config", type=Path, metavar="FILE", help="the job's settings file")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--events-bootstrap",
        metavar="HOST:PORT",
        help="a Kafka cluster of the monitor's own for its topics, instead of the local one "
        "(its security settings: MONITOR_COLLECTOR_EVENTS_KAFKA__* and MONITOR_STREAMING_KAFKA__*)",
    )
    where.add_argument(
        "--events-on-watched-cluster",
        action="store_true",
        help="put the monitor's topics on the watched cluster itself (a blind spot: its "
        "telemetry fails with the cluster it watches)",
    )
    p.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help=f"where the job's checkpoint and store and the local Kafka live (default: "
        f"{settings.state_dir()})",
    )
    p.add_argument("--metrics-host", default="127.0.0.1", help="bind address of both /metrics")
    p.add_argument("--metrics-port", type=int, default=9478, help="the job's /metrics (9478)")
    p.add_argument(
        "--collector-metrics-port", type=int, default=9479, help="the collector's /metrics (9479)"
    )
    p.add_argument(
        "--web-config-file",
        "--web.config.file",
        dest="web_config_file",
        type=Path,
        metavar="FILE",
        help="Prometheus web configuration of both /metrics: TLS, mutual TLS, basic auth "
        '(docs/deploy.md, "Securing /metrics")',
    )
    p.add_argument(
        "--create-topics",
        action="store_true",
        help="create the monitor's topics on the --events-bootstrap cluster where missing "
        "(always done on the local one)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="check everything a first finding needs (the collector's and the job's checks), "
        "a line each; exit 0 if all passed, 2 if not",
    )
    p.add_argument("--verbose", action="store_true", help="echo every line the children log")
    logs.add_arguments(p)
    p.set_defaults(func=run)


def _collect_args(args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    if args.collector_config is not None:
        out += ["--config", str(args.collector_config)]
    if args.bootstrap:
        out += ["--bootstrap", args.bootstrap]
    for item in args.jmx:
        out += ["--jmx", item]
    for flag, value in (
        ("--cluster", args.cluster),
        ("--interval", args.interval),
        ("--jmx-profile", args.jmx_profile),
    ):
        if value is not None:
            out += [flag, str(value)]
    return [*out, "--log-level", args.log_level, "--log-format", args.log_format]


def _collector_config(collect_args: list[str], events_flags: list[str]) -> Any:
    """The collector's settings exactly as ``monitor collect`` will read them."""
    from monitor.collector import cli as collector_cli

    parser = argparse.ArgumentParser(prog="monitor")
    collector_cli.register(parser.add_subparsers())
    return collector_cli.build_config(parser.parse_args(["collect", *collect_args, *events_flags]))


def run(args: argparse.Namespace) -> int:
    from monitor.collector.config import REQUIRED

    collect_args = _collect_args(args)
    events_flags: list[str] = []
    if args.events_bootstrap:
        events_flags = ["--events-bootstrap", args.events_bootstrap]
    elif args.events_on_watched_cluster:
        events_flags = ["--events-on-watched-cluster"]
    try:
        config = _collector_config(collect_args, events_flags)
    except ValidationError as e:
        print(f"monitor run: invalid configuration: {settings.describe_error(e, REQUIRED)}",
              file=sys.stderr)  # fmt: skip
        return EXIT_CONFIG
    except (ValueError, OSError) as e:
        print(f"monitor run: invalid configuration: {e}", file=sys.stderr)
        return EXIT_CONFIG
    logs.configure_from(args)
    state_dir = (args.state_dir or settings.state_dir()).expanduser().resolve()
    stream_args: list[str] = []
    if args.stream_config is not None:
        stream_args += ["--config", str(args.stream_config)]
    stream_args += ["--log-level", args.log_level, "--log-format", args.log_format]
    # The monitor's own cluster: one named (flag, file or environment), the watched one when
    # asked for explicitly, else a local one monitor run starts.
    local = config.events_kafka is None and not config.events_on_watched_cluster
    if args.check:
        from monitor.run.check import check

        return check(
            config,
            state_dir=state_dir,
            local=local,
            create_topics=args.create_topics,
            metrics=(args.metrics_host, args.metrics_port, args.collector_metrics_port),
            argv=getattr(args, "argv", None) or sys.argv[1:],
            web_config_file=args.web_config_file,
        )
    from monitor.run.runner import Plan, Runner

    plan = Plan(
        state_dir=state_dir,
        collect_args=collect_args,
        stream_args=stream_args,
        events=config.events_kafka,
        events_on_watched_cluster=config.events_on_watched_cluster,
        watched=config.kafka,
        topics={
            Role.EVENTS: config.events_topic,
            Role.FINDINGS: FINDINGS_TOPIC,
            Role.DEADLETTER: DEADLETTER_TOPIC,
        },
        create_topics=args.create_topics,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
        collector_metrics_port=args.collector_metrics_port,
        web_config_file=args.web_config_file.resolve() if args.web_config_file else None,
        verbose=args.verbose,
    )
    return Runner(plan).run()
