"""Prometheus, Alertmanager and a webhook receiver as managed local processes.

Configuration comes from ``deploy/prometheus`` and ``deploy/alertmanager`` with the default
addresses (``127.0.0.1:9478`` exporter, ``127.0.0.1:9479`` collector, ``127.0.0.1:9093``
Alertmanager, ``127.0.0.1:9099`` webhooks) substituted, so tests and the demo run the very
rules and routes that are shipped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from monitor import assets

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


class ProcessError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _binary(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise ProcessError(
        f"none of {', '.join(names)} is installed: run scripts/bootstrap.sh "
        "(apt-get install prometheus prometheus-alertmanager)"
    )


def _get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


class _Managed:
    """A child process with a log file, stopped by PID (SIGTERM, then SIGKILL)."""

    name = "process"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"{self.name}.log"

    def _spawn(self, argv: list[str]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
            )

    def _wait_ready(self, url: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise ProcessError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(url, timeout=1).read()
                return
            except OSError:
                time.sleep(0.2)
        raise ProcessError(f"{self.name} not ready at {url} after {timeout}s")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def __enter__(self) -> _Managed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class PrometheusProcess(_Managed):
    name = "prometheus"

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        exporter: str = "127.0.0.1:9478",
        collector: str = "127.0.0.1:9479",
        alertmanager: str = "127.0.0.1:9093",
        scrape_interval: str | None = None,
        evaluation_interval: str | None = None,
    ) -> None:
        super().__init__(workdir)
        self.port = port or free_port()
        config = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
        config = (
            config.replace("127.0.0.1:9478", exporter)
            .replace("127.0.0.1:9479", collector)
            .replace("127.0.0.1:9093", alertmanager)
        )
        if scrape_interval:
            config = config.replace("scrape_interval: 15s", f"scrape_interval: {scrape_interval}")
            # a timeout may not exceed the interval
            config = config.replace("scrape_timeout: 10s", f"scrape_timeout: {scrape_interval}")
        if evaluation_interval:
            config = config.replace(
                "evaluation_interval: 15s", f"evaluation_interval: {evaluation_interval}"
            )
        workdir.mkdir(parents=True, exist_ok=True)
        rules = workdir / "rules"
        rules.mkdir(exist_ok=True)
        for name in assets.names():
            if name.startswith("prometheus/rules/"):
                (rules / name.rsplit("/", 1)[1]).write_text(assets.read_text(name))
        self.config_path = workdir / "prometheus.yml"
        self.config_path.write_text(config)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        self._spawn(
            [
                _binary("prometheus"),
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
            ]
        )
        self._wait_ready(f"{self.url}/-/ready", timeout)

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant query; raises ProcessError with Prometheus's message on a bad query."""
        params = {"query": promql}
        if at is not None:
            params["time"] = str(at)
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"
        try:
            body = _get_json(url)
        except urllib.error.HTTPError as e:
            raise ProcessError(f"query {promql!r}: {e.read().decode()[:500]}") from None
        if body.get("status") != "success":
            raise ProcessError(f"query {promql!r}: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = _get_json(f"{self.url}/api/v1/alerts")["data"]["alerts"]
        return alerts

    def targets_up(self) -> dict[str, str]:
        data = _get_json(f"{self.url}/api/v1/targets")["data"]["activeTargets"]
        return {t["labels"]["job"]: t["health"] for t in data}


class AlertmanagerProcess(_Managed):
    name = "alertmanager"

    def __init__(self, workdir: Path, *, port: int | None = None, webhook: str = "127.0.0.1:9099"):
        super().__init__(workdir)
        self.port = port or free_port()
        self.cluster_port = free_port()
        config = (DEPLOY / "alertmanager" / "alertmanager.yml").read_text()
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = workdir / "alertmanager.yml"
        self.config_path.write_text(config.replace("127.0.0.1:9099", webhook))

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        self._spawn(
            [
                _binary("prometheus-alertmanager", "alertmanager"),
                f"--config.file={self.config_path}",
                f"--storage.path={self.workdir / 'data'}",
                f"--web.listen-address={self.address}",
                f"--cluster.listen-address=127.0.0.1:{self.cluster_port}",
            ]
        )
        self._wait_ready(f"http://{self.address}/-/ready", timeout)

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = _get_json(f"http://{self.address}/api/v2/alerts")
        return alerts


class WebhookReceiver:
    """Records Alertmanager webhook notifications (what a pager would have received)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.notifications: list[dict[str, Any]] = []
        received = self.notifications

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                body["_path"] = self.path
                body["_received_monotonic"] = time.monotonic()
                received.append(body)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def kinds(self) -> set[str]:
        """The ``kind`` labels (finding kinds, monitor_down...) of every alert delivered."""
        return set(self.first_received())

    def first_received(self) -> dict[str, float]:
        """Each alert kind's first delivery, as ``time.monotonic()`` when the POST arrived
        (stamped by the handler, so a reader polling later still gets the true time). An
        alert without a ``kind`` label (not this monitor's) counts under its name."""
        first: dict[str, float] = {}
        for n in list(self.notifications):
            for a in n["alerts"]:
                labels = a["labels"]
                kind = labels.get("kind") or labels.get("alertname", "")
                first.setdefault(kind, n["_received_monotonic"])
        return first
