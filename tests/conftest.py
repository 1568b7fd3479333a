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
from collections import defaultdict
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.ports import ephemeral_range, reserve_base_port
from tests import background, released
from tests.dev.lab.helpers import heal, run_lab

#: Fixtures shared by the packages' tests: the real Prometheus/Alertmanager binaries, the
#: local SparkSession and the Spark tests' view of the session lab (``kafka_lab``).
pytest_plugins = ["tests.promtools", "tests.spark_fixtures"]

PINNED = "MONITOR_LAB_TEST_BASE_PORT" in os.environ
TEST_BASE_PORT = int(os.environ.get("MONITOR_LAB_TEST_BASE_PORT", "29092"))


# No per-example deadline, no "too slow" health check: the suite runs in two lanes at once
# (scripts/test.sh), the pure tests at low priority beside the lab's, so an example's wall
# time says how busy the machine was, not how fast the code is (speed is bench/'s).
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

#: A test using one of these fixtures starts a JVM (Kafka, Spark): it gets the fixture's
#: mark, and with it the heavy lane (scripts/test.sh), without relying on its author.
_FIXTURE_MARKS = {"spark": "spark", "lab": "lab", "lab_session": "lab", "kafka_lab": "lab"}


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("MONITOR_TEST_LANE") == "light":  # scripts/test.sh
        background.lowest_priority_session()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            mark = _FIXTURE_MARKS.get(fixture)
            if mark and item.get_closest_marker(mark) is None:
                item.add_marker(mark)
    # The tests of a background job (tests/background.py) last: its build has had the whole
    # run to finish before they wait on it. Before them, the files using the session lab or
    # the Spark driver first, so that both stop early (tests/released.py).
    late = tuple(job.tests for job in background.JOBS.values())
    users = {_file(i) for i in items if set(released.RELEASED) & set(_fixtures(i))}
    items.sort(key=lambda item: (item.nodeid.startswith(late), _file(item) not in users))
    _LAST_USE.clear()
    for name in released.RELEASED:
        last = [i.nodeid for i in items if name in _fixtures(i)]
        if last:
            _LAST_USE.setdefault(last[-1], []).append(name)


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _fixtures(item: pytest.Item) -> tuple[str, ...]:
    return tuple(getattr(item, "fixturenames", ()))


#: nodeid -> the session fixtures (tests/released.py) whose last user in this run it is.
_LAST_USE: dict[str, list[str]] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    try:
        return (yield)
    finally:
        for name in _LAST_USE.get(item.nodeid, ()):
            released.release(name)


#: Wall time of the version matrix (tests/collector/test_collector_lab.py), by cluster id:
#: setup (a lab's start), calls and teardown (its stop) -- printed at the end of the run.
_MATRIX_S: dict[str, float] = defaultdict(float)


#: Wall time of each test file: its tests' setups, calls and teardowns (module fixtures
#: included) -- the CI budget's ledger (docs/benchmarks.md, "The test suite's wall time").
_FILE_S: dict[str, float] = defaultdict(float)


#: The machine's CPU-seconds (every process: the lab's JVMs, Spark, Prometheus, this one --
#: and the other lane's, scripts/test.sh, running meanwhile) spent while each test file's
#: tests ran -- where the suite's CPU goes, beside its wall time (a test waiting on a timer
#: costs wall time, not CPU; a 2-core box is CPU-bound).
_FILE_CPU_S: dict[str, float] = defaultdict(float)


def _machine_cpu_s() -> float:
    """User + system CPU-seconds of every core since boot (/proc/stat), 0 where absent."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return 0.0
    busy = sum(int(v) for v in fields[:3]) + sum(int(v) for v in fields[5:8])
    return busy / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    before = _machine_cpu_s()
    try:
        return (yield)
    finally:
        _FILE_CPU_S[item.nodeid.split("::", 1)[0]] += _machine_cpu_s() - before


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _FILE_S[report.nodeid.split("::", 1)[0]] += report.duration
    if "test_collector_lab.py::" in report.nodeid and report.nodeid.endswith("]"):
        _MATRIX_S[report.nodeid.rsplit("[", 1)[1][:-1]] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _MATRIX_S:
        times = ", ".join(f"{k} {v:.0f} s" for k, v in _MATRIX_S.items())
        terminalreporter.write_line(f"version matrix wall time: {times}")
    if _FILE_S:
        top = sorted(_FILE_S.items(), key=lambda kv: -kv[1])[:15]
        total = sum(_FILE_S.values())
        terminalreporter.write_line(f"wall time by test file (of {total:.0f} s):")
        for name, secs in top:
            terminalreporter.write_line(f"  {secs:7.1f} s  {name}")
    if _FILE_CPU_S:
        top = sorted(_FILE_CPU_S.items(), key=lambda kv: -kv[1])[:15]
        total = sum(_FILE_CPU_S.values())
        terminalreporter.write_line(f"machine CPU-seconds by test file (of {total:.0f}):")
        for name, secs in top:
            wall = _FILE_S.get(name, 0.0)
            terminalreporter.write_line(f"  {secs:7.1f} CPU-s  {wall:7.1f} s  {name}")


def pytest_collection_finish(session: pytest.Session) -> None:
    # The image and the chart's tools take minutes, mostly waiting on mirrors: started now,
    # in the background at the lowest priority, for their tests to pick up (tests/background.py).
    if not session.config.option.collectonly:
        background.start([item.nodeid for item in session.items])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    background.stop()


def pytest_report_header() -> str:
    # The lab's ports must stay clear of this range (docs/lab.md "Ports"); printed so a CI
    # log says which range its machine had.
    return f"kernel ephemeral port range: {ephemeral_range()}"


@pytest.fixture(scope="session")
def lab_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab_dir = tmp_path_factory.mktemp("kafka-lab")
    # A locked, free port block: another test session on this machine gets the next one.
    with reserve_base_port(TEST_BASE_PORT, tries=1 if PINNED else 20) as base_port:
        # Remote JMX open: the exporter profile tests run standalone exporters beside it.
        for lab in run_lab(LabConfig(dir=lab_dir, base_port=base_port, jmx_remote=True)):
            released.on_release("lab_session", lab.down)  # (run_lab's down again: a no-op)
            yield lab


@pytest.fixture
def lab(lab_session: Lab) -> Iterator[Lab]:
    """The session lab, with all brokers healthy before and after the test."""
    heal(lab_session)
    yield lab_session
    heal(lab_session)
