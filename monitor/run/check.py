"""``monitor run --check``: the collector's checks and the job's, for what ``monitor run``
would start -- with a local cluster, what it needs to start that one (Java, the broker's
jars) instead of a cluster to check."""

from __future__ import annotations

import shlex
import shutil
import socket
from pathlib import Path
from typing import Any

from monitor import jars
from monitor.collector import check as collector_check
from monitor.connection import KafkaConnection
from monitor.contract.events import DEADLETTER_TOPIC, FINDINGS_TOPIC
from monitor.contract.topics import Role
from monitor.preflight import runtime
from monitor.preflight.report import Report
from monitor.preflight.topics import Need, check_topics
from monitor.preflight.web import check_web_config


def check(
    config: Any,
    *,
    state_dir: Path,
    local: bool,
    create_topics: bool,
    metrics: tuple[str, int, int],
    argv: list[str],
    web_config_file: Path | None = None,
) -> int:
    report = Report()
    command = shlex.join(["monitor", *(a for a in argv if a != "--create-topics")])
    collector_check.checks(
        config, report, create_topics=create_topics, command=command, events=not local
    )
    if local:
        _check_local(report, state_dir)
    else:
        events = config.events_connection()
        _check_job_topics(report, events, create_topics=create_topics, command=command)
    runtime.check_java(report)
    if runtime.check_pyspark(report):
        runtime.check_kafka_source(report, None, {})
    runtime.check_writable(report, "state folder", str(state_dir))
    host, job_port, collector_port = metrics
    for what, port in (("job /metrics", job_port), ("collector /metrics", collector_port)):
        _check_port(report, what, host, port)
    check_web_config(report, "both /metrics", web_config_file, host)
    return report.result()


def _check_local(report: Report, state_dir: Path) -> None:
    cached = jars.cached_kafka()
    where = state_dir / "kafka"
    if cached is not None:
        report.ok("monitor's cluster", f"a one-broker Kafka monitor run starts, data in {where}")
    elif shutil.which("mvn") is not None:
        report.ok(
            "monitor's cluster",
            f"a one-broker Kafka monitor run starts (data in {where}); its jars are not "
            "resolved yet: Maven (on PATH) fetches them at the first start",
        )
    else:
        report.fail(
            "monitor's cluster",
            "the local Kafka's jars are not resolved, and no mvn on PATH to resolve them",
            "install Maven (apt-get install maven), or name a cluster of the monitor's own "
            "with --events-bootstrap",
        )


def _check_job_topics(
    report: Report, events: KafkaConnection, *, create_topics: bool, command: str
) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        admin = KafkaAdminClient(client_id="replication-monitor-check", **events.client_kwargs())
    except KafkaError as e:
        report.fail("monitor's cluster (the job)", repr(e))
        return
    try:
        needs = [
            Need(Role.FINDINGS, FINDINGS_TOPIC, ("WRITE",), "the job"),
            Need(Role.DEADLETTER, DEADLETTER_TOPIC, ("WRITE",), "the job"),
        ]
        check_topics(admin, report, events, needs, create=create_topics, command=command)
    finally:
        admin.close()


def _check_port(report: Report, what: str, host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            report.fail(
                what,
                f"cannot listen on {host}:{port}: {e.strerror or e}",
                "stop what holds it, or give another port",
            )
            return
    report.ok(what, f"{host}:{port} free")
