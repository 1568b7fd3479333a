"""The README's demo (`make demo` runs `monitor demo`), shortened: a real incident on the lab
with the collector, engine, Prometheus and Alertmanager; findings appear, alerts fire and
page, and the loss the monitor reports brackets what a consumer reads back."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.prometheus, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parent.parent


def test_short_demo_detects_alerts_and_accounts_for_the_loss(tmp_path: Path) -> None:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "demo", "--short", "--dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    out = proc.stdout
    print(out[-4000:], proc.stderr[-2000:])
    print(f"demo wall time: {time.monotonic() - started:.0f}s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in (
        "under_min_isr        open",
        "an acks=all write is refused, as it must be: NotEnoughReplicas",
        "offline              open",
        "unclean_election     event",
        "committed_data_loss  event",
        "clean election: leader 2 -> 1",  # the preferred election at the end is clean
        ">> alert FIRING    under_min_isr",
        ">> alert FIRING    committed_data_loss",
        "verdict: consistent",
    ):
        assert line in out, f"missing from the demo's output: {line!r}"
    assert "delivered by Alertmanager: ['committed_data_loss', 'unclean_election'" in out
    assert (tmp_path / "explain-orders-0.png").stat().st_size > 10_000
    # Every process it started is gone: no JVM or Prometheus with its folder on the line.
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""
