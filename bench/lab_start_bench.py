"""A lab broker's start with and without class-data sharing (``LabConfig.class_sharing``).

One lab (3 KRaft brokers of the default version, on its own port block); each round stops
broker 2 and starts it again, alternately without and with the archive, and reads the
broker JVM's CPU seconds (user + system, /proc) once it is ready. The archive is written at
the first clean stop if ``<cache>/cds`` has none yet. Medians and their ratio::

    python -m bench.lab_start_bench --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from bench.spark_bench import _cpu_s
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.ports import reserve_base_port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    sides: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp, reserve_base_port(45092) as port:
        lab = Lab(LabConfig(dir=Path(tmp), base_port=port), progress=None)
        lab.up()
        try:
            for i in range(args.runs):
                for sharing in (False, True):
                    lab.stop(2)  # a clean stop: the first writes the archive if none yet
                    # The one setting flipped on the running lab (its node launcher reads
                    # the same config object's copy): a bench's shortcut, not an API.
                    lab.config = lab.config.model_copy(update={"class_sharing": sharing})
                    lab._nodes.config = lab.config
                    lab.start(2)
                    pid = lab.pid(2)
                    assert pid is not None
                    cpu = _cpu_s(pid)
                    sides[sharing].append(cpu)
                    label = "with" if sharing else "without"
                    print(
                        f"run {i + 1} {label:>7} class sharing: broker 2 ready at {cpu:.2f} CPU-s"
                    )
        finally:
            lab.down()
    without, with_ = statistics.median(sides[False]), statistics.median(sides[True])
    print(
        f"median CPU-s to ready: without {without:.2f}, with {with_:.2f}; "
        f"ratio with/without {with_ / without:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
