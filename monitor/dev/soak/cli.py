"""``monitor soak``: the whole stack under steady load, lab faults and faults of the monitor.

The command's options make the plan (:class:`~monitor.dev.soak.plan.SoakPlan`); the work
folder defaults to ``.cache/soak``. Exit 0 only if the verdict is ``pass``; 1 when it fails
or a wait times out, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from monitor.dev.soak.plan import LAB_FAULTS, MONITOR_FAULTS, SoakPlan
from monitor.dev.soak.runner import Soak


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "soak",
        help="run the whole stack for a while under load, lab faults and monitor faults",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--minutes", type=float, default=30.0, help="how long to run (default 30)")
    p.add_argument("--cycles", type=int, help="exactly this many cycles (overrides --minutes)")
    p.add_argument("--dir", type=Path, default=None, help="work folder (default .cache/soak)")
    p.add_argument(
        "--cycle-seconds",
        type=float,
        default=150.0,
        help="period of a cycle; the quiet window fills what the fault leaves (default 150)",
    )
    p.add_argument("--quiet-seconds", type=float, default=20.0, help="shortest quiet window")
    p.add_argument("--fault-seconds", type=float, default=20.0, help="how long a lab fault lasts")
    p.add_argument(
        "--lab-faults",
        type=_lab_faults,
        default=LAB_FAULTS,
        help=f"the lab faults to rotate through, comma-separated (default {','.join(LAB_FAULTS)})",
    )
    p.add_argument(
        "--monitor-faults-per-cycle",
        type=int,
        default=1,
        choices=range(0, len(MONITOR_FAULTS) + 1),
        help="monitor faults injected during each lab fault (default 1)",
    )
    p.add_argument(
        "--outage-seconds",
        type=float,
        default=None,
        help="at the end, the Spark job down this long, so that monitor_down fires and "
        "pages (default 150 with --minutes >= 20, else 0: off)",
    )
    p.add_argument(
        "--warmup-seconds",
        type=float,
        default=300.0,
        help="RSS warm-up of each run of the Spark job (300); the collector's RSS is judged "
        "from the first quiet window of its run",
    )
    p.add_argument(
        "--rss-tolerance",
        type=float,
        default=0.25,
        help="largest RSS growth after warm-up, as a fraction (0.25)",
    )
    p.set_defaults(func=run)


def _lab_faults(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in LAB_FAULTS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"choose among {', '.join(LAB_FAULTS)}")
    return names


def run(args: argparse.Namespace) -> int:
    from monitor.dev.lab.paths import cache_root

    outage = args.outage_seconds
    if outage is None:
        outage = 150.0 if args.minutes >= 20 and args.cycles is None else 0.0
    plan = SoakPlan(
        minutes=args.minutes,
        cycles=args.cycles,
        cycle_seconds=args.cycle_seconds,
        quiet_seconds=args.quiet_seconds,
        fault_seconds=args.fault_seconds,
        monitor_faults_per_cycle=args.monitor_faults_per_cycle,
        outage_seconds=outage,
        warmup_seconds=args.warmup_seconds,
        rss_tolerance=args.rss_tolerance,
        lab_faults=args.lab_faults,
    )
    soak = Soak(args.dir or cache_root() / "soak", plan)
    try:
        return soak.run()
    except TimeoutError as e:
        print(f"monitor soak: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("monitor soak: interrupted; everything it started has been stopped", file=sys.stderr)
        return 130
