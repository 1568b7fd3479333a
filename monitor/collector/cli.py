"""``monitor collect``: run the collector (or one round into a file)."""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from monitor import logs, settings
from monitor.collector.check import admin_only_notice, check
from monitor.collector.collector import Collector, RoundResult
from monitor.collector.config import REQUIRED, CollectorConfig, load_config
from monitor.collector.jmx import PROFILES
from monitor.collector.security import KafkaConnectError
from monitor.contract.events import dumps

log = logging.getLogger("monitor.collector")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "collect",
        help="collect replication telemetry from a cluster and publish it as events",
        description="Every interval, reads each broker's JMX exporter and the Admin API, and "
        "produces validated events to the events topic. Without exporter endpoints it reads "
        "the Admin API only (the findings that need JMX are then unavailable: collect --check "
        "names them). Settings, highest first: flags, MONITOR_COLLECTOR_* environment variables, "
        "the --config file (TOML or YAML), defaults (docs/configuration.md).",
    )
    p.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="settings file, TOML or YAML (.toml, .yaml, .yml; .json too); default: "
        "$MONITOR_COLLECTOR_CONFIG. Flags beat MONITOR_COLLECTOR_* variables, which beat the "
        "file (docs/configuration.md)",
    )
    p.add_argument(
        "--lab", type=Path, metavar="DIR", help="collect from the lab in DIR (its collector.json)"
    )
    p.add_argument(
        "--bootstrap", help="bootstrap servers of the watched cluster, host:port[,host:port]"
    )
    p.add_argument(
        "--events-bootstrap",
        metavar="HOST:PORT",
        help="bootstrap servers of the monitor's own cluster, where the events go (the rest "
        "of its connection: MONITOR_COLLECTOR_EVENTS_KAFKA__*)",
    )
    p.add_argument(
        "--events-on-watched-cluster",
        action="store_true",
        default=None,
        help="publish the events on the watched cluster itself (a blind spot: see "
        "docs/deploy.md); without it, --events-bootstrap is required to publish",
    )
    p.add_argument(
        "--jmx",
        action="append",
        default=[],
        metavar="ID=URL",
        help="a broker's JMX exporter URL (repeat per broker)",
    )
    p.add_argument(
        "--jmx-profile",
        choices=["auto", *PROFILES],
        help="whose exporter rules name the metrics (default auto: detected per broker)",
    )
    p.add_argument(
        "--round-records",
        choices=["partition", "replica"],
        help="a partition's round on the events topic: one record carrying its replicas' "
        "samples (partition, the default) or a record per replica besides (replica: for a "
        "job older than round records)",
    )
    p.add_argument(
        "--shard",
        metavar="I/N",
        help="several collectors on one cluster: this one is the I-th (from 0) of N and "
        "sends the partitions of its share of the topics, and every topic's and broker's "
        "events (default 0/1: the whole cluster; docs/collector.md)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="check the configuration, Kafka and every exporter endpoint (its profile, what "
        "it lacks), print a line each, exit 0 if all passed, 2 if not",
    )
    p.add_argument(
        "--create-topics",
        action="store_true",
        help="with --check: create the events topic where it is missing, with the documented "
        "settings (docs/deploy.md)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="with --check: one JSON object (result, problems, the lines) instead of lines",
    )
    p.add_argument("--cluster", help="cluster name put on every event")
    p.add_argument("--topic", help="events topic (default __replication_monitor_events)")
    p.add_argument("--interval", type=float, help="seconds between rounds (default 5)")
    p.add_argument("--metrics-port", type=int, help="serve the collector's own metrics here")
    p.add_argument("--metrics-host", help="bind address of the metrics endpoint (127.0.0.1)")
    p.add_argument(
        "--web-config-file",
        "--web.config.file",
        dest="web_config_file",
        type=Path,
        help="Prometheus web configuration of /metrics: TLS, mutual TLS, basic auth",
    )
    p.add_argument("--rounds", type=int, help="stop after this many rounds")
    p.add_argument("--once", action="store_true", help="one round, then exit")
    p.add_argument("--out", type=Path, help="write events as JSON lines here (no producing)")
    logs.add_arguments(p)
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> CollectorConfig:
    """Flags > ``MONITOR_COLLECTOR_*`` > the file (``--config``) > the lab's > defaults."""
    flags: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    if args.lab is not None:
        # The lab writes this file when it starts (``monitor lab up``): every broker, its
        # exporters and, on a secured lab, its secure listener with secrets as files. Its
        # cluster name is a default only.
        lab_file = args.lab / "collector.json"
        if not lab_file.is_file():
            raise ValueError(f"--lab {args.lab}: no {lab_file.name} there (run `monitor lab up`)")
        lab = json.loads(lab_file.read_text())
        defaults["cluster"] = lab.pop("cluster")
        flags.update(lab)
    if args.bootstrap:
        flags.setdefault("kafka", {})["bootstrap_servers"] = args.bootstrap
    if args.events_bootstrap:
        flags.setdefault("events_kafka", {})["bootstrap_servers"] = args.events_bootstrap
    for item in args.jmx:
        broker, _, url = item.partition("=")
        if not broker.isdigit() or not url:
            raise ValueError(f"--jmx {item!r}: expected ID=URL, e.g. 1=http://host:7071/metrics")
        # Keys as text, like a file's and the environment's: the same broker, one entry.
        flags.setdefault("jmx_urls", {})[str(int(broker))] = url
    for key, value in (
        ("cluster", args.cluster),
        ("events_topic", args.topic),
        ("interval_s", args.interval),
        ("metrics_port", args.metrics_port),
        ("metrics_host", args.metrics_host),
        ("web_config_file", args.web_config_file),
        ("jmx_profile", args.jmx_profile),
        ("round_records", args.round_records),
        ("shard", args.shard),
        ("events_on_watched_cluster", args.events_on_watched_cluster),
    ):
        if value is not None:
            flags[key] = value
    return load_config(args.config, flags, defaults)


def command_line(args: argparse.Namespace, *leave_out: str) -> str:
    """This command as it was given (``monitor ...``), for lines that say to run it again
    (``args.argv``: what :func:`monitor.cli.main` parsed)."""
    given = getattr(args, "argv", None) or sys.argv[1:]
    return shlex.join(["monitor", *(a for a in given if a not in leave_out)])


def run(args: argparse.Namespace) -> int:
    try:
        config = build_config(args)
    except ValidationError as e:
        print(f"monitor collect: invalid configuration: {settings.describe_error(e, REQUIRED)}",
              file=sys.stderr)  # fmt: skip
        return 78  # monitor.cli.EXIT_CONFIG
    except (ValueError, OSError) as e:
        print(f"monitor collect: invalid configuration: {e}", file=sys.stderr)
        return 78
    # Once the settings are good (a refused configuration is one line, not a log record).
    logs.configure_from(args)
    if args.create_topics and not args.check:
        print("monitor collect: --create-topics goes with --check", file=sys.stderr)
        return 64  # monitor.cli.EXIT_USAGE
    if args.check:
        how = {
            "create_topics": args.create_topics,
            "command": command_line(args, "--create-topics"),
        }
        if not args.json:
            return check(config, **how)
        lines: list[str] = []
        code = check(config, lines.append, **how)
        result = {"result": "ok" if code == 0 else "fail", "exit_code": code, "lines": lines}
        print(json.dumps(result, indent=2))
        return code
    if args.out is None:  # publishing: somewhere to publish, said before connecting
        try:
            config.events_connection()
        except ValueError as e:
            print(f"monitor collect: invalid configuration: {e}", file=sys.stderr)
            return 78
    if not config.jmx_urls:
        print(f"monitor collect: {admin_only_notice()}", file=sys.stderr)
    collector = Collector(config)
    try:
        collector.start(produce=args.out is None)
    except KafkaConnectError as e:
        print(f"monitor collect: {e}", file=sys.stderr)
        return 1
    out = args.out.open("w") if args.out is not None else None

    def on_round(res: RoundResult) -> None:
        if out is not None:
            out.writelines(dumps(e) + "\n" for e in res.events)
            out.flush()
        log.info(
            "round: %d events, %d errors, %.2fs", len(res.events), len(res.errors), res.duration_s
        )

    # SIGTERM asks the loop to end (a round being read ends at once, unpublished); the
    # clients close below, in the main thread -- not from the handler, mid-request.
    signal.signal(signal.SIGTERM, lambda *_: collector.request_stop())
    try:
        collector.run(rounds=1 if args.once else args.rounds, on_round=on_round)
    except KeyboardInterrupt:
        pass
    finally:
        collector.stop()
        if out is not None:
            out.close()
    return 0
