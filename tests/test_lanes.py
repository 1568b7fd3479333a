"""The suite's two lanes (scripts/test.sh): a test that uses a JVM fixture lands in the heavy
lane even where its author gave it no mark (tests/conftest.py marks it by its fixtures)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: scripts/test.sh's heavy lane.
HEAVY = "lab or spark or prometheus"


def test_unmarked_spark_tests_run_in_the_heavy_lane() -> None:
    # It uses the `spark` fixture with no `spark` mark of its own; its file has pure tests.
    spark_test = "tests/streaming/test_bucket_keys.py::test_spark_hashes_each_key_to_its_index"
    files = [spark_test.split("::")[0]]
    light = _collected(f"not ({HEAVY})", files)
    heavy = _collected(HEAVY, files)
    assert light and not any(n.startswith(spark_test) for n in light), light
    assert any(n.startswith(spark_test) for n in heavy), heavy


def _collected(expression: str, files: list[str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", expression, *files],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode in (0, 5), out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]
