"""``monitor assets list|export``: the files shipped with the package (rules, Alertmanager
route, JMX exporter rules, POM, scenarios), for a stack that wants them on disk."""

from __future__ import annotations

import argparse
from pathlib import Path

from monitor import assets


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


def _list(args: argparse.Namespace) -> int:
    for name in assets.names():
        print(name)
    return 0


def _export(args: argparse.Namespace) -> int:
    written = assets.export(args.dir)
    print(f"wrote {len(written)} files below {args.dir}")
    return 0
