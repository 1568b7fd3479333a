"""Shared helpers and fixtures for the tests that run Prometheus, promtool and Alertmanager.

The binaries come from Debian's ``prometheus`` and ``prometheus-alertmanager`` packages
(scripts/bootstrap.sh installs them; CI runs it). A missing binary FAILS the test with
an install hint instead of skipping it: a skipped alerting test looks like a passing one.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROM_DIR = REPO / "deploy" / "prometheus"
PROM_CONFIG = PROM_DIR / "prometheus.yml"
RULES_DIR = REPO / "monitor" / "assets" / "prometheus" / "rules"
RULE_TESTS_DIR = REPO / "monitor" / "assets" / "prometheus" / "tests"
AM_CONFIG = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
RUNBOOK = REPO / "docs" / "runbook.md"
FINDINGS_DOC = REPO / "docs" / "findings.md"
METRICS_DOC = REPO / "docs" / "metrics.md"

INSTALL_HINT = (
    "install Debian's packages: apt-get install -y --no-install-recommends "
    "prometheus prometheus-alertmanager (scripts/bootstrap.sh does this)"
)


def find_binary(*names: str) -> str:
    """Path of the first of ``names`` on PATH, or fail the test with an install hint."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(f"{' / '.join(names)} not found on PATH: {INSTALL_HINT}", pytrace=False)


def run_tool(argv: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a tool; on a non-zero exit fail the test with its full output."""
    proc = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False
    )
    if proc.returncode != 0:
        pytest.fail(
            f"`{' '.join(argv)}` exited {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}",
            pytrace=False,
        )
    return proc


@pytest.fixture(scope="session")
def promtool() -> str:
    return find_binary("promtool")


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    return find_binary("prometheus")


@pytest.fixture(scope="session")
def amtool() -> str:
    return find_binary("amtool")


@pytest.fixture(scope="session")
def alertmanager_bin() -> str:
    # Debian names it prometheus-alertmanager; upstream tarballs call it alertmanager.
    return find_binary("prometheus-alertmanager", "alertmanager")
