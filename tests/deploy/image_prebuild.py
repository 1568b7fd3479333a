"""The container image built in the background from the start of the test session.

``scripts/image.sh build`` takes ~3 minutes, most of them waiting on Debian's mirror, PyPI
and Maven Central, or unpacking -- time the rest of the suite can use. When the session has
collected ``tests/deploy/test_image.py`` (and the machine can build: root, buildah),
:func:`start` runs the build at the lowest CPU and I/O priority (``nice -n 19``, ``ionice
-c 3``): the tests running meanwhile keep the cores. The image tests' fixture then
:func:`wait` s for it -- and still builds in the foreground when nothing ran in the
background (the file run alone, a missing builder: the fixture's own checks say why).
:func:`stop` ends a build still running when the session ends, by its PID.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "image.sh"

_build: subprocess.Popen[bytes] | None = None
_log: Path | None = None


@dataclass(frozen=True)
class Built:
    returncode: int
    stderr: str


def wanted(nodeids: list[str]) -> bool:
    """Whether to build in the background: the image tests are collected, not left out,
    and the machine has what building needs (else the fixture fails, saying so)."""
    return (
        any(n.startswith("tests/deploy/test_image.py") for n in nodeids)
        and os.environ.get("MONITOR_IMAGE_TEST") != "0"
        and os.geteuid() == 0
        and shutil.which("buildah") is not None
        and shutil.which("debootstrap") is not None
    )


def start(log: Path) -> None:
    """Start ``scripts/image.sh build`` in its own process group, its output to ``log``."""
    global _build, _log
    if _build is not None:
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    low = ["nice", "-n", "19"] + (["ionice", "-c", "3"] if shutil.which("ionice") else [])
    with log.open("wb") as out:
        _build = subprocess.Popen(
            [*low, str(SCRIPT), "build"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    _log = log


def wait(timeout: float) -> Built | None:
    """The background build's outcome once it has ended (None: none was started)."""
    if _build is None or _log is None:
        return None
    try:
        returncode = _build.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop()
        return Built(-1, f"the background image build ran over {timeout:.0f} s ({_log})")
    return Built(returncode, _log.read_text(errors="replace"))


def stop() -> None:
    """End a build still running (its whole process group: buildah, its RUN steps)."""
    if _build is None or _build.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 30.0), (signal.SIGKILL, None)):
        try:
            os.killpg(_build.pid, sig)
        except ProcessLookupError:
            break
        try:
            _build.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        if _group_gone(_build.pid, grace or 10.0):
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
