"""The `monitor` command: one entry point, each stage registers its own subcommands.

Every command module exposes ``register(subparsers)``; it adds its parser(s) and sets
``func`` (a callable taking the parsed ``argparse.Namespace`` and returning an exit code).
Keeping registration in the stage's own module means stages can grow without touching
this file beyond one import line.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from monitor import __version__

#: Exit codes every command shares (the README's table); ``monitor status`` keeps the monitoring-
#: plugin codes 0-3 and ``lab verify`` says 3 for a loss.
EXIT_USAGE = 64  # sysexits' EX_USAGE: an unknown flag, a missing argument
EXIT_CONFIG = 78  # sysexits' EX_CONFIG: invalid settings, an optional extra not installed
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE: the output's reader went away (``| head``)

#: The optional extra that provides each module a command may need.
EXTRAS: dict[str, str] = {"pyspark": "spark", "pyarrow": "spark", "pandas": "spark",
                          "matplotlib": "plot", "grafana_foundation_sdk": "dashboards"}  # fmt: skip

PACKAGE = "kafka-replication-monitor"


class _Parser(argparse.ArgumentParser):
    """argparse with its own exit code for usage errors (argparse's 2 is ``status``'s
    CRITICAL); the subcommands' parsers are of this class too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


# Modules that contribute subcommands, in the order they appear in `monitor --help`.
COMMAND_MODULES: tuple[str, ...] = (
    "monitor.commands.schema",
    "monitor.commands.replay",
    "monitor.collector.cli",
    "monitor.commands.runbook",
    "monitor.commands.dashboards",
    "monitor.commands.assets",
    "monitor.commands.run",
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
    "assets": "monitor.commands.assets",
    "run": "monitor.commands.run",
    "demo": "monitor.dev.demo",
    "soak": "monitor.dev.soak",
    "stream": "streaming.cli",
    "lab": "monitor.dev.lab.cli",
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the arguments, only the named command's module is imported."""
    parser = _Parser(
        prog="monitor",
        description="Kafka replication monitor: watermarks, ISR and leader epochs, per partition.",
    )
    parser.add_argument("--version", action="version", version=f"monitor {__version__} ({PACKAGE})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    first = next((a for a in argv or () if not a.startswith("-")), None)
    owner = COMMAND_OWNERS.get(first) if first is not None else None
    for name in (owner,) if owner is not None else COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if not name.startswith(DEV_PACKAGE) or not (e.name or "").startswith(DEV_PACKAGE):
                raise
            _register_left_out(sub, name)
            continue
        module.register(sub)
    return parser


#: The development package (lab, demo, soak): in a checkout, not in the wheel.
DEV_PACKAGE = "monitor.dev"


def _register_left_out(sub: Any, module: str) -> None:
    """A command of the development package, in an installation without it: the command
    exists, and says where to get it."""
    for command in (c for c, owner in COMMAND_OWNERS.items() if owner == module):
        p = sub.add_parser(command, help="(development tools: in a checkout, see docs/lab.md)")
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=lambda args, command=command: _left_out(command))


def _left_out(command: str) -> int:
    print(
        f"monitor {command}: a development command, not in the installed wheel: clone the "
        "repository and run `make setup`, then `.venv/bin/monitor "
        f"{command}` (docs/lab.md)",
        file=sys.stderr,
    )
    return EXIT_CONFIG


#: Flags that would carry a secret, refused by their commands (a secret on a command line
#: shows in ``ps`` and the shell's history): their values are taken out before parsing, so
#: no message -- argparse's own included -- can echo them.
SECRET_FLAGS = ("--token", "--password")


def without_secrets(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of each secret flag (or an abbreviation of one) taken out:
    ``--token S`` and ``--token=S`` become ``--token``.

    >>> without_secrets(["push", "--token", "S", "--password=P", "--url", "u"])
    ['push', '--token', '--password', '--url', 'u']
    >>> without_secrets(["push", "--token-file", "f", "--token", "--url", "u"])
    ['push', '--token-file', 'f', '--token', '--url', 'u']
    """
    out: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        name, eq, _ = arg.partition("=")
        secret = len(name) > 3 and any(f.startswith(name) for f in SECRET_FLAGS)
        if secret and name.startswith("--"):
            out.append(name)
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            skip = not eq and nxt is not None and not nxt.startswith("-")
            continue
        out.append(arg)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    given = without_secrets(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["--version"]:  # before importing every command's module
        print(f"monitor {__version__} ({PACKAGE})")
        return 0
    command = next((a for a in given if not a.startswith("-")), "")
    try:
        parser = build_parser(given)
        args = parser.parse_args(given)
        args.argv = given  # as given: for lines that say which command to run again
        code: int = args.func(args)
        sys.stdout.flush()  # here, where a closed pipe can be told apart (not at exit)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ModuleNotFoundError as e:
        extra = EXTRAS.get((e.name or "").split(".")[0])
        if extra is None:
            raise
        print(
            f"monitor {command}: needs the '{extra}' extra (no module {e.name}): "
            f"pip install './[{extra}]' from a clone of the repository (README.md, Install)",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    except BrokenPipeError:
        # The reader went away (`monitor schema | head`): nothing left to say, no traceback.
        # Python flushes stdout again at exit: point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLOSED_PIPE
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
