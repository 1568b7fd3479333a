"""A Spark standalone cluster (master + workers) from the pyspark distribution, on 127.0.0.1.

For the demo (``monitor demo --standalone``) and the tests: ``spark-class ...Master`` and
``...Worker`` each in a process group of their own, stopped by that group id. The job then
runs with ``--master spark://127.0.0.1:<port>`` — from ``monitor stream`` (client mode) or
``spark-submit``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from monitor.dev.processes.prom import free_port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class SparkStandalone:
    """``start()`` waits until the master is ALIVE with ``workers`` workers; ``stop()``."""

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        workers: int = 1,
        worker_cores: int = 2,
        worker_memory: str = "3g",
        start_timeout_s: float = 120.0,
    ) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.ui_port = free_port()
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.start_timeout_s = start_timeout_s
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """What every process of the cluster (and a driver using it) runs with."""
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_WORKER_DIR": str(self.workdir / "work"),
            "SPARK_LOG_DIR": str(self.workdir / "logs"),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with (logs / log_name).open("ab") as out:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def state(self) -> dict[str, Any]:
        """The master's JSON status page."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
            data: dict[str, Any] = json.loads(r.read())
            return data

    def start(self) -> None:
        self._spawn(
            [
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1",
                "--port", str(self.port),
                "--webui-port", str(self.ui_port),
            ],
            "master.out",
        )  # fmt: skip
        for i in range(self.workers):
            self._spawn(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1",
                    "--cores", str(self.worker_cores),
                    "--memory", self.worker_memory,
                    "--webui-port", str(free_port()),
                    self.url,
                ],
                f"worker-{i + 1}.out",
            )  # fmt: skip
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            with contextlib.suppress(OSError, ValueError):
                st = self.state()
                if st.get("status") == "ALIVE" and int(st.get("aliveworkers", 0)) >= self.workers:
                    return
            dead = [p for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                log = (self.workdir / "logs" / "master.out").read_text(errors="replace")
                self.stop()
                raise RuntimeError(f"the Spark standalone cluster did not come up:\n{log[-2000:]}")
            time.sleep(0.5)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        self.procs.clear()
