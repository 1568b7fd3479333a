"""The job's one entry point (``streaming.cli``): ``monitor stream``, ``python -m streaming``
and ``spark-submit streaming/cli.py`` say what is wrong with a setting in one line (exit 2)
before Spark starts -- never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["streaming/cli.py", "--conf", "spark.sql.shuffle.partitions"],
            "--conf expects KEY=VALUE",
        ),
        (["-m", "streaming", "--buckets", "0"], "buckets"),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_78(argv: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 78, proc.stderr  # monitor.cli.EXIT_CONFIG
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("monitor stream: invalid configuration:")
