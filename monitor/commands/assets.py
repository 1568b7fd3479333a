"""``monitor assets list|export|rules``: the files shipped with the package (rules,
Alertmanager route, JMX exporter rules, POM, scenarios), for a stack that wants them on
disk; ``rules`` writes the Prometheus rules with a stack's runbook URL and job selectors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from monitor import assets
from monitor.assets import rules


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "assets",
        help="list or copy out the shipped rules, route, exporter configs and scenarios",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    asub = p.add_subparsers(dest="assets_command", metavar="ACTION")
    asub.required = True
    asub.add_parser("list", help="print every shipped asset's name").set_defaults(func=_list)
    e = asub.add_parser("export", help="copy every asset below DIR (folders kept)")
    e.add_argument("dir", metavar="DIR", type=Path)
    e.set_defaults(func=_export)
    j = asub.add_parser(
        "spark-jars",
        help="copy Spark's Kafka source jars (resolved with Maven) into DIR, the folder the "
        "job's `jars` setting can name where Maven is not",
    )
    j.add_argument("dir", metavar="DIR", type=Path)
    j.set_defaults(func=_spark_jars)
    r = asub.add_parser(
        "rules",
        help="write the Prometheus rule files with your runbook URL and scrape-job selectors",
    )
    r.add_argument("--out", type=Path, required=True, help="folder for the rule files")
    r.add_argument(
        "--runbook-url",
        default=rules.DEFAULT_RUNBOOK_URL,
        help="base of every alert's runbook_url (<URL>#<kind>), e.g. your copy of docs/runbook.md",
    )
    r.add_argument(
        "--monitor-selector",
        default=rules.DEFAULT_MONITOR_SELECTOR,
        help="selects the job's driver /metrics scrape job, inside braces "
        f"(default: {rules.DEFAULT_MONITOR_SELECTOR})",
    )
    r.add_argument(
        "--collector-selector",
        default=rules.DEFAULT_COLLECTOR_SELECTOR,
        help="selects the collector's scrape job, inside braces "
        f"(default: {rules.DEFAULT_COLLECTOR_SELECTOR})",
    )
    r.set_defaults(func=_rules)


def _list(args: argparse.Namespace) -> int:
    for name in assets.names():
        print(name)
    return 0


def _export(args: argparse.Namespace) -> int:
    written = assets.export(args.dir)
    print(f"wrote {len(written)} files below {args.dir}")
    return 0


def _rules(args: argparse.Namespace) -> int:
    try:
        files = rules.rendered(
            runbook_url=args.runbook_url,
            monitor_selector=args.monitor_selector,
            collector_selector=args.collector_selector,
        )
    except ValueError as e:
        print(f"monitor assets rules: {e}", file=sys.stderr)
        return 64  # monitor.cli.EXIT_USAGE
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text)
        print(f"wrote {args.out / name}")
    return 0


def _spark_jars(args: argparse.Namespace) -> int:
    from monitor.jars import JarError, export_spark_kafka_jars

    try:
        written = export_spark_kafka_jars(args.dir)
    except JarError as e:
        print(f"monitor assets spark-jars: {e}", file=sys.stderr)
        return 78  # monitor.cli.EXIT_CONFIG
    print(f"wrote {len(written)} jars to {args.dir}")
    return 0
