"""The processes of a soak: the demo's stack -- a 3-broker lab, a one-broker monitor cluster
for the monitor's own topics, the Spark job with ``/metrics`` in its driver, Prometheus with
the shipped rules, Alertmanager with the shipped routes and a webhook pager -- except that
the collector runs as a child process (``monitor collect``) so that it can really be killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.dev.demo.monitor_stack import (
    EVENTS,
    FINDINGS,
    STREAM_ARGS,
    STREAM_ENV,
    create_monitor_topics,
    monitor_cluster,
)
from monitor.dev.processes.prom import AlertmanagerProcess, PrometheusProcess, WebhookReceiver
from monitor.dev.processes.stream import FindingsReader, StreamProcess
from monitor.dev.soak.plan import ASSIGNMENTS, MOVE_ASSIGNMENTS, MOVE_FILL_MB, MOVE_TOPIC, TOPIC
from monitor.model import Finding

if TYPE_CHECKING:
    from monitor.dev.lab.cluster import Lab


class CollectorProcess:
    """``python -m monitor collect --config FILE`` in a process group of its own."""

    def __init__(self, workdir: Path, config: dict[str, Any]) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = workdir / "collector.json"
        self.config_path.write_text(json.dumps(config, indent=2))
        self.metrics_url = f"http://127.0.0.1:{config['metrics_port']}/metrics"
        self.log_path = workdir / "collector.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "monitor", "collect", "--config", str(self.config_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def kill(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
        self.kill()


class Stack:
    """Every process of one run, on the ports reserved for it, and which of them are down
    on purpose (the faults' kills against the sampler's restarts of what died on its own).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        base_port: int,
        monitor_port: int,
        exporter_port: int,
        collector_port: int,
        hook: WebhookReceiver,
        on_finding: Callable[[Finding], None],
    ) -> None:
        from monitor.dev.lab.cluster import Lab
        from monitor.dev.lab.config import LabConfig

        self.hook = hook
        self.lab: Lab = Lab(LabConfig(dir=workdir / "lab", base_port=base_port))
        self.mon: Lab = monitor_cluster(workdir / "monitor-cluster", monitor_port)
        self.stream = StreamProcess(
            workdir / "stream",
            self.mon.bootstrap_servers,
            metrics_port=exporter_port,
            args=STREAM_ARGS,
            env=STREAM_ENV,
        )
        self.collector = CollectorProcess(
            workdir / "collector",
            {
                "cluster": "lab",
                "kafka": {
                    "bootstrap_servers": self.lab.config.bootstrap_servers,
                    "request_timeout_ms": 3000,
                },
                "events_kafka": {"bootstrap_servers": self.mon.bootstrap_servers},
                "events_topic": EVENTS,
                "jmx_urls": {str(k): v for k, v in self.lab.jmx_urls.items()},
                "interval_s": 1.0,
                "jmx_timeout_s": 1.0,
                "config_every_rounds": 5,
                "metrics_port": collector_port,
            },
        )
        self.reader = FindingsReader(self.mon.bootstrap_servers, FINDINGS, on_finding)
        self.am = AlertmanagerProcess(workdir / "alertmanager", webhook=hook.address)
        self.prom = PrometheusProcess(
            workdir / "prometheus",
            exporter=f"127.0.0.1:{exporter_port}",
            collector=f"127.0.0.1:{collector_port}",
            alertmanager=self.am.address,
            scrape_interval="2s",
            evaluation_interval="2s",
        )
        self.proc_lock = threading.Lock()  # the sampler's restarts vs the soak's kills
        self.expect_down: set[str] = set()  # components down on purpose (the outage)
        self.prom_down = threading.Event()  # Prometheus restarting: not asked meanwhile

    def start(self) -> None:
        """Both clusters, the monitor's topics and the soak's (``soak-move`` filled), then
        the monitor."""
        from monitor.dev.lab.admin import create_topic
        from monitor.dev.lab.load import fill

        self.lab.up()
        self.mon.up()
        create_monitor_topics(self.mon.bootstrap_servers)
        create_topic(
            self.lab.bootstrap_servers, TOPIC, assignments=ASSIGNMENTS, min_insync_replicas=2
        )
        create_topic(
            self.lab.bootstrap_servers,
            MOVE_TOPIC,
            assignments=MOVE_ASSIGNMENTS,
            min_insync_replicas=1,
        )
        fill(self.lab.bootstrap_servers, MOVE_TOPIC, list(MOVE_ASSIGNMENTS), MOVE_FILL_MB)
        self.stream.start()
        self.collector.start()
        self.hook.start()
        self.am.start()
        self.prom.start()
        self.reader.start()

    def stop(self, say: Callable[[str], None]) -> None:
        """Everything, whatever fails on the way."""
        for stop in (
            self.reader.stop,
            self.collector.stop,
            self.stream.stop,
            self.prom.stop,
            self.am.stop,
        ):
            try:
                stop()
            except Exception as e:  # keep stopping the rest
                say(f"   (while stopping: {e!r})")
        self.hook.stop()
        for cluster in (self.lab, self.mon):
            try:
                cluster.down()
            except Exception as e:
                say(f"   (while stopping: {e!r})")
