"""The processes ``monitor run`` supervises: ``monitor collect`` and ``monitor stream`` as
children, each in a session of its own, known by pid, its output kept in a log file and
its notable lines echoed with its name.

A child is stopped by its pid with the signal it stops cleanly on (the collector: SIGTERM;
the job: SIGINT, on which it stops its query), then, after a grace, with SIGKILL to its
process group (the job's JVM is in it). On Linux each child also gets SIGTERM if
``monitor run`` itself dies without stopping it (``PR_SET_PDEATHSIG``): nothing is left
behind by a SIGKILLed supervisor.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

#: Lines of a child's output worth showing on the terminal (all go to its log file): the
#: monitor's own log records at WARNING and above (monitor.logs' text format; not its Kafka
#: client's retries), and the lines it says as ``monitor collect: ...`` / ``monitor stream:
#: ...`` (what it does; why it refuses).
NOTABLE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (WARNING|ERROR|CRITICAL) (monitor|streaming)"
    r"|^monitor (collect|stream):"
)

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """In the child, before exec: SIGTERM when the parent dies (Linux)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Child:
    """One supervised process: ``python -m monitor <argv>``."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log: Path,
        *,
        stop_signal: signal.Signals = signal.SIGTERM,
        grace_s: float = 30.0,
        env: Mapping[str, str] | None = None,
        say: Callable[[str], None] = print,
        verbose: bool = False,
    ) -> None:
        self.name = name
        self.argv = [sys.executable, "-m", "monitor", *argv]
        self.log = log
        self.stop_signal = stop_signal
        self.grace_s = grace_s
        self.env = dict(os.environ if env is None else env)
        self.say = say
        self.verbose = verbose
        self.proc: subprocess.Popen[bytes] | None = None
        self._tail: deque[str] = deque(maxlen=40)
        #: Set while it stops: what it logs then stays in its log.
        self.quiet = False
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**self.env, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,  # Ctrl-C reaches monitor run, which stops it in turn
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        self._reader = threading.Thread(target=self._read, name=f"{self.name}-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with self.log.open("ab") as log:
            for raw in self.proc.stdout:
                log.write(raw)
                log.flush()
                line = raw.decode(errors="replace").rstrip()
                self._tail.append(line)
                if not self.quiet and (self.verbose or NOTABLE.search(line)):
                    self.say(f"[{self.name}] {line}")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def exited(self) -> int | None:
        """Its exit code once it has exited (None while it runs)."""
        return None if self.proc is None else self.proc.poll()

    def tail(self) -> str:
        """Its last lines of output (for the line that says it died)."""
        if self._reader is not None:
            self._reader.join(timeout=2)
        return "\n".join(self._tail)

    def stop(self) -> None:
        """Its stop signal, a grace, then SIGKILL to its process group; by pid."""
        proc = self.proc
        if proc is None:
            return
        self.quiet = not self.verbose
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(self.stop_signal)
            try:
                proc.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                self.say(
                    f"[{self.name}] still up {self.grace_s:g} s after its stop signal: SIGKILL"
                )
        with contextlib.suppress(ProcessLookupError, PermissionError):  # its JVM, if any is left
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        if self._reader is not None:
            self._reader.join(timeout=5)
