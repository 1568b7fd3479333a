"""A benchmark run again on the watermark model's source, for a side-by-side ratio.

Where ``make setup`` compiled the model (:mod:`monitor.model._native`), a benchmark runs the
compiled build; ``--compare-source`` in a benchmark re-runs it in a subprocess with
``MONITOR_MODEL_NATIVE=off`` on the same arguments, and reads one figure back from its
output (a line's first number after a label).
"""

from __future__ import annotations

import os
import subprocess
import sys

from monitor.model import _native


def on_source(module: str, argv: list[str]) -> str:
    """The output of ``python -m <module> <argv>`` with the model run from source."""
    env = {**os.environ, _native.ENV: "off"}
    cmd = [sys.executable, "-m", module, *argv]
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout


def figure(text: str, label: str) -> float:
    """The first number after ``label`` in ``text`` (thousands separators allowed)."""
    return float(text.split(label, 1)[1].split()[0].replace(",", ""))


def indented(text: str) -> str:
    return "".join("  " + line + "\n" for line in text.splitlines())
