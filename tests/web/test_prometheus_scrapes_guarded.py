"""The real Prometheus scrapes both ``/metrics`` -- the job's page and the collector's health
-- over TLS with basic auth and a client certificate, as its ``scrape_config`` says it
(``tls_config``, ``basic_auth``): up = 1; a wrong password is a 401 and up = 0; a scraper
without a client certificate is refused; a rotated password in the web configuration takes
effect without a restart. Then 500 half-open connections: the next real scrape is
answered in its timeout, the server's threads do not grow, and nothing logs a traceback.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import yaml  # type: ignore[import-untyped]

from monitor.collector.collector import _Health, health_server
from monitor.collector.config import CollectorConfig
from monitor.dev.pki import Pki, make_pki
from monitor.dev.processes.prom import free_port
from monitor.exporter import MetricsServer, Snapshot
from monitor.web import WebServer
from tests.promtools import find_binary

pytestmark = pytest.mark.prometheus

PASSWORD = "scraper's password"


def _web_config(pki: Pki, password: str) -> str:
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(10)).decode()
    return (
        "tls_server_config:\n"
        f"  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {pki.ca}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )


def _scrape_job(name: str, port: int, pki: Pki, password_file: Path, *, cert: bool) -> Any:
    tls: dict[str, str] = {"ca_file": str(pki.ca)}
    if cert:
        tls |= {"cert_file": str(pki.client_cert), "key_file": str(pki.client_key)}
    return {
        "job_name": name,
        "scheme": "https",
        "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
        "tls_config": tls,
        "basic_auth": {"username": "prometheus", "password_file": str(password_file)},
    }


class _Prometheus:
    def __init__(self, workdir: Path, jobs: list[Any]) -> None:
        self.port = free_port()
        self.workdir = workdir
        config = workdir / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                 "scrape_configs": jobs}
            )
        )  # fmt: skip
        self.log = (workdir / "prometheus.log").open("wb")

        self.proc = subprocess.Popen(
            [find_binary("prometheus"), f"--config.file={config}",
             f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def targets(self) -> dict[str, dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/targets"
        with urllib.request.urlopen(url, timeout=5) as r:
            data = json.loads(r.read())["data"]["activeTargets"]
        return {t["labels"]["job"]: t for t in data}

    def wait_for(self, want: dict[str, str], timeout: float = 60.0) -> dict[str, dict[str, Any]]:
        """Until each job's last scrape has the health wanted ("up"/"down")."""
        deadline = time.monotonic() + timeout
        seen: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            try:
                seen = self.targets()
            except OSError:
                seen = {}
            if all(seen.get(j, {}).get("health") == h for j, h in want.items()):
                return seen
            time.sleep(0.5)
        pytest.fail(f"targets never became {want}: {json.dumps(seen, indent=1)[:3000]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except Exception:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


@pytest.fixture()
def guarded(tmp_path: Path) -> Iterator[dict[str, Any]]:
    pki = make_pki(tmp_path / "pki")
    web = tmp_path / "web.yml"
    web.write_text(_web_config(pki, PASSWORD))
    job = MetricsServer(Snapshot(), port=0, web_config_file=web)
    job.start()
    collector = health_server(
        CollectorConfig(
            kafka={"bootstrap_servers": "127.0.0.1:9"}, metrics_port=0, web_config_file=web
        ),
        _Health().registry,
    )
    collector.start()
    right, wrong = tmp_path / "right", tmp_path / "wrong"
    right.write_text(PASSWORD)
    wrong.write_text("not the password")
    jobs = [
        _scrape_job("job", job.bound_port, pki, right, cert=True),
        _scrape_job("collector", collector.bound_port, pki, right, cert=True),
        _scrape_job("wrong-password", job.bound_port, pki, wrong, cert=True),
        _scrape_job("no-client-cert", job.bound_port, pki, right, cert=False),
    ]
    prom = _Prometheus(tmp_path, jobs)
    try:
        yield {"pki": pki, "web": web, "job": job, "collector": collector, "prom": prom,
               "right": right}  # fmt: skip
    finally:
        prom.stop()
        job.stop()
        collector.stop()


def test_prometheus_scrapes_both_over_tls_basic_auth_and_client_certificates(
    guarded: dict[str, Any],
) -> None:
    prom: _Prometheus = guarded["prom"]
    seen = prom.wait_for(
        {"job": "up", "collector": "up", "wrong-password": "down", "no-client-cert": "down"}
    )
    assert "401" in seen["wrong-password"]["lastError"], seen["wrong-password"]
    # Refused in the handshake, before any HTTP (TLS 1.3: the client hears it as the
    # connection's end or reset, not as a status).
    refused = seen["no-client-cert"]["lastError"]
    assert refused and "401" not in refused and "status" not in refused, refused
    # The pages are the job's and the collector's own.
    job_page = _read(guarded, guarded["job"].bound_port)
    assert "kafka_replication_monitor_up" in job_page
    assert "kafka_replication_collector_rounds_total" in _read(
        guarded, guarded["collector"].bound_port
    )

    # Rotate the password in the web configuration: the running servers take it at once
    # (the scraper, still on the old one, is refused) ...
    web: Path = guarded["web"]
    web.write_text(_web_config(guarded["pki"], "rotated"))
    prom.wait_for({"job": "down", "collector": "down"})
    # ... and the scraper's new password file lets it in again: nothing was restarted.
    guarded["right"].write_text("rotated")
    prom.wait_for({"job": "up", "collector": "up"})
    assert guarded["job"].web.reloads >= 1 and guarded["collector"].reloads >= 1


def test_500_half_open_connections_do_not_keep_a_scrape_out(
    guarded: dict[str, Any], caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    prom: _Prometheus = guarded["prom"]
    server: WebServer = guarded["job"].web
    prom.wait_for({"job": "up"})
    threads = threading.active_count()
    port = guarded["job"].bound_port
    half_open: list[socket.socket] = []
    with caplog.at_level(logging.DEBUG):
        try:
            for i in range(500):
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                if i % 2:  # half of them start a TLS handshake and stop; half send nothing
                    s.sendall(b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03")
                half_open.append(s)
            # A real scrape now: Python's client, with the scraper's credentials, ...
            started = time.monotonic()
            page = _read(guarded, port, timeout=5)
            assert "kafka_replication_monitor_up" in page and time.monotonic() - started < 5
            # ... and Prometheus's next scrapes (timeout 1 s) stay up.
            before = prom.targets()["job"]["lastScrape"]
            deadline = time.monotonic() + 30
            while prom.targets()["job"]["lastScrape"] == before and time.monotonic() < deadline:
                time.sleep(0.3)
            after = prom.targets()["job"]
            assert after["lastScrape"] != before and after["health"] == "up", after
            assert threading.active_count() <= threads + 2  # the render pool, nothing per client
            assert server.evicted >= 500 - server.max_connections
        finally:
            for s in half_open:
                s.close()
    text = caplog.text + "".join(capfd.readouterr())
    assert "Traceback" not in text, text[-3000:]


def _read(guarded: dict[str, Any], port: int, timeout: float = 10) -> str:
    pki: Pki = guarded["pki"]
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    ctx.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    password = guarded["right"].read_text()
    auth = base64.b64encode(f"prometheus:{password}".encode()).decode()
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}/metrics", headers={"Authorization": f"Basic {auth}"}
    )
    with urllib.request.urlopen(request, timeout=timeout, context=ctx) as r:
        return str(r.read().decode())
