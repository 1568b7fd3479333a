"""The job's one entry point (``streaming.cli``): ``monitor stream``, ``python -m streaming``
and ``spark-submit streaming/cli.py`` say what is wrong with a setting in one line (exit 2)
before Spark starts -- never a traceback."""

from __future__ import annotations

import os
import shutil
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


def _stream(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "stream", "--once", "--bootstrap", "127.0.0.1:1",
         "--checkpoint", str(tmp_path / "cp"), "--store", str(tmp_path / "store")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip


def test_without_maven_the_kafka_source_is_one_line_naming_the_ways(tmp_path: Path) -> None:
    """No Maven on PATH and an empty cache: the job says how else to get the Kafka source
    (a local jars folder, spark.jars.packages) before Spark starts."""
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "java").symlink_to(shutil.which("java") or "/usr/bin/java")
    proc = _stream(tmp_path, {"PATH": str(bare), "MONITOR_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 78, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "`mvn`" in line and "MONITOR_STREAMING_JARS" in line and "spark.jars.packages" in line


def test_an_empty_jars_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "jars").mkdir()
    proc = _stream(tmp_path, {"MONITOR_STREAMING_JARS": f'["{tmp_path / "jars"}"]'})
    assert proc.returncode == 78, proc.stderr
    assert proc.stderr.strip() == f"monitor stream: jars folder {tmp_path / 'jars'} holds no *.jar"
