"""Running the Spark job (``monitor stream``) as a child process, and reading its findings.

For the demo and the end-to-end tests: the job runs exactly as an operator would run it
(its own process, its own JVM, ``/metrics`` on a port), in a session of its own so that
stopping it stops its JVM too. :class:`FindingsReader` follows the findings topic.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from monitor.model import Finding


class StreamProcess:
    """``python -m monitor stream ...`` in its own process group; log in ``workdir/stream.log``."""

    def __init__(
        self,
        workdir: Path,
        bootstrap: str,
        *,
        metrics_port: int,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.bootstrap = bootstrap
        self.metrics_port = metrics_port
        self.args = list(args)
        self.env = dict(env or {})
        self.log_path = workdir / "stream.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def store(self) -> Path:
        return self.workdir / "store"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "monitor",
            "stream",
            "--bootstrap",
            self.bootstrap,
            "--checkpoint",
            str(self.workdir / "checkpoint"),
            "--store",
            str(self.store),
            "--metrics-port",
            str(self.metrics_port),
            *self.args,
        ]

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # its JVM shares the group: one signal stops both
            )

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the job and its JVM (a crash, for restart tests)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGINT to the job (it stops its query and exporter), then SIGKILL of the group."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGINT)
                self.proc.wait(timeout=grace_s)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        with contextlib.suppress(ProcessLookupError):  # whatever of the group is left
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def metric(self, name: str) -> float | None:
        """The value of an unlabelled metric on the job's /metrics (None: not up yet)."""
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def wait_processing(
        self, timeout_s: float, on_wait: Callable[[float], None] | None = None
    ) -> None:
        """Wait until the job has applied events (its first batch ran)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if not self.alive():
                raise RuntimeError(f"monitor stream exited; see {self.log_path}:\n{self.tail()}")
            done = self.metric("kafka_replication_monitor_events_processed_total")
            if done is not None and done > 0:
                return
            if on_wait is not None:
                on_wait(time.monotonic() - started)
            time.sleep(2)
        raise TimeoutError(
            f"monitor stream processed nothing in {timeout_s:.0f}s; see {self.log_path}"
        )

    def tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class FindingsReader:
    """Follows the findings topic from its start; each finding once (by id), in order."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        on_finding: Callable[[Finding], None] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.on_finding = on_finding
        self.findings: list[Finding] = []
        self.raw: list[dict[str, Any]] = []
        self._ids: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="findings-reader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def _run(self) -> None:
        from kafka import KafkaConsumer

        from monitor.model import Finding

        consumer = None
        while not self._stop.is_set():
            try:
                if consumer is None:
                    consumer = KafkaConsumer(
                        self.topic,
                        bootstrap_servers=self.bootstrap.split(","),
                        auto_offset_reset="earliest",
                        enable_auto_commit=False,
                        group_id=None,
                        consumer_timeout_ms=1000,
                    )
                for batch in consumer.poll(timeout_ms=500).values():
                    for rec in batch:
                        d = json.loads(rec.value)
                        if d["id"] in self._ids:
                            continue  # a replayed batch re-sends the same ids
                        self._ids.add(d["id"])
                        f = Finding.from_dict(d)
                        self.raw.append(d)
                        self.findings.append(f)
                        if self.on_finding is not None:
                            self.on_finding(f)
            except Exception:  # the broker is restarting: reconnect
                if consumer is not None:
                    consumer.close()
                consumer = None
                self._stop.wait(1.0)
        if consumer is not None:
            consumer.close()
