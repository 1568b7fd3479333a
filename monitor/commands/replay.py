"""``monitor replay FILE``: run JSON-lines events through the model and print the findings."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Iterator
from typing import IO

from monitor import assets
from monitor.model import ClusterModel, Finding, ModelConfig, Severity
from monitor.query.render import FINDING_HEADER, finding_row
from monitor.query.replay import replay


def add_model_options(p: argparse.ArgumentParser) -> None:
    """Model thresholds as flags (shared by every command that runs the model)."""
    d = ModelConfig()
    g = p.add_argument_group("model thresholds (milliseconds)")
    g.add_argument("--follower-lag-ms", type=int, default=d.follower_lag_ms)
    g.add_argument("--hw-lag-ms", type=int, default=d.hw_lag_ms)
    g.add_argument("--stale-after-ms", type=int, default=d.stale_after_ms)
    g.add_argument(
        "--pre-epoch-protocol",
        action="store_true",
        help="replay pre-KIP-101 walk-throughs: followers do not truncate to epoch starts",
    )


def model_config(args: argparse.Namespace) -> ModelConfig:
    return ModelConfig(
        follower_lag_ms=args.follower_lag_ms,
        hw_lag_ms=args.hw_lag_ms,
        stale_after_ms=args.stale_after_ms,
        epoch_truncation=not args.pre_epoch_protocol,
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "replay",
        help="replay JSON-lines telemetry events through the model and print findings",
        description="Reads one JSON event per line (FILE or - for stdin), prints the findings. "
        "Rejected lines are reported on stderr with their line number; the exit status is 1 "
        "when any line was rejected.",
    )
    p.add_argument(
        "file",
        metavar="FILE",
        help="JSON-lines events, - for standard input, or the name of a shipped scenario "
        "(`monitor assets list`: scenarios/NAME.jsonl), e.g. unclean_election",
    )
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument(
        "--json", dest="format", action="store_const", const="json", help="--format json"
    )
    p.add_argument(
        "--min-severity",
        choices=[s.label for s in Severity],
        default="info",
        help="print only findings at or above this severity",
    )
    p.add_argument("--tick-ms", type=int, default=5_000, help="event-time interval of checks")
    add_model_options(p)
    p.set_defaults(func=run)


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    for line in stream:
        yield line.rstrip(b"\r\n")


def _open(name: str) -> IO[bytes]:
    """Standard input, a file, or a scenario shipped with the package (by name)."""
    if name == "-":
        return sys.stdin.buffer
    shipped = f"scenarios/{name}.jsonl"
    if not os.path.exists(name) and "/" not in name and shipped in assets.names():
        return io.BytesIO(assets.read_text(shipped).encode())
    return open(name, "rb")


def run(args: argparse.Namespace) -> int:
    try:
        config = model_config(args)
    except ValueError as e:
        print(f"monitor replay: {e}", file=sys.stderr)
        return 78  # monitor.cli.EXIT_CONFIG: a threshold it cannot take
    try:
        stream = _open(args.file)
    except OSError as e:
        print(f"monitor replay: cannot read {args.file}: {e.strerror}", file=sys.stderr)
        return 2
    min_sev = Severity.parse(args.min_severity)
    rows: list[list[str]] = []
    out = sys.stdout

    def on_finding(f: Finding) -> None:
        if f.severity < min_sev:
            return
        if args.format == "json":
            out.write(json.dumps(f.to_dict(), separators=(",", ":")) + "\n")
        else:
            rows.append(finding_row(f))

    def on_reject(lineno: int, reason: str) -> None:
        print(f"{args.file}:{lineno}: rejected: {reason}", file=sys.stderr)

    with stream:
        stats = replay(_lines(stream), ClusterModel(config), on_finding, on_reject, args.tick_ms)
    if args.format == "table":
        from monitor.query.render import table

        print(table(rows, FINDING_HEADER) if rows else "no findings")
    print(stats.summary(), file=sys.stderr)
    return 1 if stats.rejected else 0
