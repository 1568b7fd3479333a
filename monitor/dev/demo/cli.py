"""``monitor demo``: a real cluster loses data, and the monitor says exactly what happened.

The command: ``monitor demo [--dir DIR] [--short] [--standalone]``; the work folder defaults
to ``.cache/demo``. Exit 0 when the loss verdict passes, 1 when it fails or a wait times
out, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from monitor.dev.demo.runner import Demo


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="play a scripted incident on a local cluster",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--dir", type=Path, default=None, help="work folder (default .cache/demo)")
    p.add_argument("--short", action="store_true", help="shorter waits (CI)")
    p.add_argument(
        "--standalone",
        action="store_true",
        help="run the Spark job on a local standalone cluster (master + 1 worker)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from monitor.dev.lab.paths import cache_root

    workdir = args.dir or cache_root() / "demo"
    demo = Demo(workdir, args.short, standalone=args.standalone)
    try:
        return demo.run()
    except TimeoutError as e:
        print(f"monitor demo: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("monitor demo: interrupted; everything it started has been stopped", file=sys.stderr)
        return 130
