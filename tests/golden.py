"""Golden files: outputs recorded from a reviewed version, compared byte for byte.

A change of findings on purpose re-records them (``MONITOR_RECORD_GOLDEN=1 pytest ...``)
and the reviewed difference goes into the same commit; anything else that changes them is
a regression. ``tests/golden/replay/`` holds ``monitor replay --format json`` of every file
in ``tests/data/``; ``tests/golden/job_findings.jsonl`` the Spark job's findings on the
seed scenarios (tests/streaming/test_job.py).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    """``text`` must equal ``tests/golden/<name>`` (recorded instead when asked to)."""
    path = GOLDEN / name
    if os.environ.get("MONITOR_RECORD_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.is_file(), f"no golden file {path}: record it with MONITOR_RECORD_GOLDEN=1"
    expected = path.read_text()
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"golden/{name}",
                "now",
                n=1,
            )
        )
        raise AssertionError(f"{name} differs from its golden file:\n{diff[:6000]}")
