"""``monitor schema``: print the JSON Schema of the telemetry event contract."""

from __future__ import annotations

import argparse
import json

from monitor.contract.events import json_schema


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of the telemetry events")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(json.dumps(json_schema(), indent=2))
    return 0
