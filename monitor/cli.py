"""The `monitor` command: one entry point, each stage registers its own subcommands.

Every command module exposes ``register(subparsers)``; it adds its parser(s) and sets
``func`` (a callable taking the parsed ``argparse.Namespace`` and returning an exit code).
Keeping registration in the stage's own module means stages can grow without touching
this file beyond one import line.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Modules that contribute subcommands, in the order they appear in `monitor --help`.
COMMAND_MODULES: tuple[str, ...] = (
    "monitor.commands.schema",
    "monitor.commands.replay",
    "monitor.collector.cli",
    "monitor.commands.runbook",
    "monitor.commands.dashboards",
    "monitor.dev.demo",
    "monitor.dev.soak",
    "streaming.cli",
    "monitor.dev.lab.cli",
)


#: The module that registers each command (``tests/test_cli.py`` checks it against the
#: modules themselves): ``monitor status`` imports the runbook's module only, not the Kafka
#: client, Spark settings and Grafana SDK of the others -- start-up is part of every answer.
COMMAND_OWNERS: dict[str, str] = {
    "schema": "monitor.commands.schema",
    "replay": "monitor.commands.replay",
    "collect": "monitor.collector.cli",
    **{
        name: "monitor.commands.runbook"
        for name in ("status", "partitions", "explain", "lineage", "what-if", "audit")
    },
    "dashboards": "monitor.commands.dashboards",
    "demo": "monitor.dev.demo",
    "soak": "monitor.dev.soak",
    "stream": "streaming.cli",
    "lab": "monitor.dev.lab.cli",
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the arguments, only the named command's module is imported."""
    parser = argparse.ArgumentParser(
        prog="monitor",
        description="Kafka replication monitor: watermarks, ISR and leader epochs, per partition.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    first = next((a for a in argv or () if not a.startswith("-")), None)
    owner = COMMAND_OWNERS.get(first) if first is not None else None
    for name in (owner,) if owner is not None else COMMAND_MODULES:
        module = importlib.import_module(name)
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
