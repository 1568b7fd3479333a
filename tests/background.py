"""Slow setup started in the background when the test session begins.

Two of the suite's setups take minutes, mostly waiting on mirrors, downloads and unpacking
-- time the rest of the suite can use: the container image (``scripts/image.sh build``, ~3
minutes, for ``tests/deploy/test_image.py``) and the chart's tools (``scripts/k8s-tools.sh
install``: Helm built from its Go module, ~2 minutes, for ``tests/deploy/test_chart.py``).
When the session has collected a job's tests (and the machine can run it), :func:`start`
runs it at the lowest CPU and I/O priority (``nice -n 19``, ``ionice -c 3``, its session's
autogroup at 19: :func:`lowest_session_priority`): the tests running meanwhile keep the
cores. Their fixtures :func:`wait` for it -- and still run the setup in the foreground when
nothing ran in the background (the file run alone, a missing builder: the fixture's own
checks say why). :func:`stop` ends a job still running when the session ends, by its
process group.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _can_build_image() -> bool:
    return (
        os.environ.get("MONITOR_IMAGE_TEST") != "0"
        and os.geteuid() == 0
        and shutil.which("buildah") is not None
        and shutil.which("debootstrap") is not None
    )


@dataclass(frozen=True)
class Job:
    #: The test file whose collection starts it.
    tests: str
    argv: tuple[str, ...]
    #: Where its output goes (under .cache, beside what it makes).
    log: Path
    can_run: Callable[[], bool] = lambda: True


JOBS: dict[str, Job] = {
    "image": Job(
        "tests/deploy/test_image.py",
        (str(ROOT / "scripts" / "image.sh"), "build"),
        ROOT / ".cache" / "image" / "background-build.log",
        _can_build_image,
    ),
    "stranger-install": Job(
        "tests/stranger/test_strangers_cluster.py",
        # into its default folder (tests/stranger/install.py FOLDER), outside the repository
        ("python3", str(ROOT / "tests" / "stranger" / "install.py")),
        ROOT / ".cache" / "stranger-install.log",
    ),
    "k8s-tools": Job(
        "tests/deploy/test_chart.py",
        (str(ROOT / "scripts" / "k8s-tools.sh"), "install"),
        ROOT / ".cache" / "tools" / "background-install.log",
    ),
}

_running: dict[str, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class Outcome:
    returncode: int
    #: The job's output (stdout and stderr together).
    stderr: str


def start(nodeids: list[str]) -> None:
    """Start every job whose tests are among ``nodeids`` and that can run here, each in its
    own process group."""
    low = ["nice", "-n", "19"] + (["ionice", "-c", "3"] if shutil.which("ionice") else [])
    for name, job in JOBS.items():
        if name in _running or not any(n.startswith(job.tests) for n in nodeids):
            continue
        if not job.can_run():
            continue
        job.log.parent.mkdir(parents=True, exist_ok=True)
        with job.log.open("wb") as out:
            _running[name] = subprocess.Popen(
                [*low, *job.argv],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        lowest_session_priority(_running[name].pid)


def lowest_session_priority(pid: int) -> None:
    """The lowest priority for the session ``pid`` leads, where the kernel schedules by
    session (autogroup: ``/proc/sys/kernel/sched_autogroup_enabled``). There a nice value
    only orders the processes of one session: without this, a job started in its own
    session competes with each of the tests' sessions as an equal, ``nice -n 19`` or not."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text("19")


def lowest_priority_session() -> None:
    """This process (the suite's light lane, scripts/test.sh) in a session of its own at the
    lowest priority, and Ctrl-C (SIGINT) working in it again: a shell without job control
    starts its background commands with SIGINT ignored, and Python keeps it so."""
    with contextlib.suppress(OSError):  # already a session or group leader: stays where it is
        os.setsid()
    lowest_session_priority(os.getpid())
    os.nice(10)  # where the kernel has no autogroups
    signal.signal(signal.SIGINT, signal.default_int_handler)


def wait(name: str, timeout: float) -> Outcome | None:
    """Job ``name``'s outcome once it has ended (None: it was not started)."""
    proc = _running.get(name)
    if proc is None:
        return None
    log = JOBS[name].log
    try:
        returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        return Outcome(-1, f"{name}: the background run went over {timeout:.0f} s ({log})")
    return Outcome(returncode, log.read_text(errors="replace"))


def stop() -> None:
    """End every job still running (its whole process group)."""
    for proc in _running.values():
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 30.0), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        if _group_gone(proc.pid, grace or 10.0):
            break


def _group_gone(pgid: int, within: float) -> bool:
    """Whether every process of the group has ended (its children outlive the script a
    moment: buildah cleaning up), waiting up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False
