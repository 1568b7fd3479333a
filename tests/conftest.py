"""Shared fixtures. One real 3-node Kafka lab for the whole test session (every stage's
integration tests use the same cluster), started on first use and always torn down by pid.

The lab runs on base port 29092 (controllers 29192.., exporters 29292..), away from the
CLI default 19092 so a developer's own `monitor lab up` does not collide with the tests;
if that block is taken (another test session), the next free one (30092, 31092, ...) is
reserved instead. ``MONITOR_LAB_TEST_BASE_PORT`` pins it.
Tests share the cluster, so the ``lab`` fixture brings every broker back (resume paused,
restart stopped) after each test: each test starts from three healthy brokers and uses
its own topics.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.dev.lab.admin import unfenced_brokers
from monitor.dev.lab.cluster import Lab, NodeStatus
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.ports import ephemeral_range, reserve_base_port
from tests.dev.lab.helpers import our_jvms

#: Fixtures shared by the packages' tests: the real Prometheus/Alertmanager binaries, the
#: local SparkSession and the streaming tests' own lab.
pytest_plugins = ["tests.promtools", "tests.spark_fixtures"]

PINNED = "MONITOR_LAB_TEST_BASE_PORT" in os.environ
TEST_BASE_PORT = int(os.environ.get("MONITOR_LAB_TEST_BASE_PORT", "29092"))


def pytest_report_header() -> str:
    # The lab's ports must stay clear of this range (docs/lab.md "Ports"); printed so a CI
    # log says which range its machine had.
    return f"kernel ephemeral port range: {ephemeral_range()}"


@pytest.fixture(scope="session")
def lab_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab_dir = tmp_path_factory.mktemp("kafka-lab")
    # A locked, free port block: another test session on this machine gets the next one.
    with reserve_base_port(TEST_BASE_PORT, tries=1 if PINNED else 20) as base_port:
        yield from _run_lab(lab_dir, base_port)


def _run_lab(lab_dir: Path, base_port: int) -> Iterator[Lab]:
    # Remote JMX open: the exporter profile tests run standalone exporters beside it.
    lab = Lab(LabConfig(dir=lab_dir, base_port=base_port, jmx_remote=True))
    try:
        lab.up()
        yield lab
    finally:
        try:
            lab.down()
        finally:
            # Belt and braces: anything still carrying our marker is ours; kill it by pid.
            leftovers = our_jvms(lab.config.dir)
            for pid in leftovers:
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while our_jvms(lab.config.dir) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not leftovers, f"lab.down() left JVMs running: {leftovers}"


@pytest.fixture
def lab(lab_session: Lab) -> Iterator[Lab]:
    """The session lab, with all brokers healthy before and after the test."""
    _heal(lab_session)
    yield lab_session
    _heal(lab_session)


def _heal(lab: Lab) -> None:
    for node in lab.node_ids:
        status = lab.node_status(node)
        if status is NodeStatus.PAUSED:
            lab.resume(node)
        elif status is NodeStatus.STOPPED:
            lab.start(node, wait=False)
    lab.wait_ready(lab.node_ids, timeout=120)
    deadline = time.monotonic() + 60
    while unfenced_brokers(lab.bootstrap_servers) != set(lab.node_ids):
        assert time.monotonic() < deadline, "brokers did not all come back unfenced"
        time.sleep(0.5)
