"""``monitor stream --check``: will the job start and reach a first finding?

One line per check (:class:`monitor.preflight.report.Report`), before Spark starts: the
monitor's cluster reachable, its three topics there with the documented settings (or
created, with ``--create-topics``) and the job allowed to read the events and write the
findings and dead letters; pyspark, Java and Spark's Kafka source on this machine; the
checkpoint and the store writable; the ``/metrics`` port free. Exit 0 when every check
passed, 2 otherwise.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from monitor.contract.topics import Role
from monitor.preflight.report import Report
from monitor.preflight.runtime import (
    check_java,
    check_kafka_source,
    check_pyspark,
    check_writable,
)
from monitor.preflight.topics import Need, check_topics
from monitor.preflight.web import check_web_config
from streaming.config import StreamingConfig


def check(
    cfg: StreamingConfig,
    say: Callable[[str], None] = print,
    *,
    create_topics: bool = False,
    command: str = "monitor stream --check",
) -> int:
    report = Report(say)
    checks(cfg, report, create_topics=create_topics, command=command)
    return report.result()


def checks(cfg: StreamingConfig, report: Report, *, create_topics: bool, command: str) -> None:
    """The job's checks, into ``report`` (``monitor run --check`` adds the collector's)."""
    report.ok(
        "job configuration",
        f"master {cfg.master or '(spark-submit)'}, {cfg.buckets} buckets, trigger "
        f"{cfg.trigger_seconds:g} s",
    )
    _check_cluster(cfg, report, create_topics=create_topics, command=command)
    if check_pyspark(report):
        check_java(report)
        check_kafka_source(report, cfg.jars, cfg.spark_conf)
    check_writable(report, "checkpoint", cfg.checkpoint_location)
    check_writable(report, "store", cfg.store_location)
    if cfg.metrics_port:
        _check_port(report, cfg.metrics_host, cfg.metrics_port)
        check_web_config(report, "/metrics", cfg.web_config_file, cfg.metrics_host)


def _check_cluster(
    cfg: StreamingConfig, report: Report, *, create_topics: bool, command: str
) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    from monitor.collector.security import explain_connect_failure, install_redaction

    what = "monitor's cluster"
    if cfg.kafka.java_only():
        report.say(
            f"{what}: not checked -- {', '.join(cfg.kafka.java_only())} are for the Java client "
            "only; the checks speak kafka-python (give PEM files to check from here)"
        )
        return
    install_redaction(cfg.kafka)
    admin: Any = None
    try:
        admin = KafkaAdminClient(client_id="replication-monitor-check", **cfg.kafka.client_kwargs())
    except KafkaError as e:
        report.fail(what, str(explain_connect_failure(cfg.kafka, e)))
        return
    try:
        brokers = admin.describe_cluster().get("brokers", [])
        report.ok(what, f"{cfg.kafka.bootstrap_servers}, {len(brokers)} broker(s)")
        needs = [
            Need(Role.EVENTS, cfg.events_topic, ("READ",), "the job"),
            Need(Role.FINDINGS, cfg.findings_topic, ("WRITE",), "the job"),
            Need(Role.DEADLETTER, cfg.deadletter_topic, ("WRITE",), "the job"),
        ]
        check_topics(admin, report, cfg.kafka, needs, create=create_topics, command=command)
    except KafkaError as e:
        report.fail(what, f"describing it: {e!r}")
    finally:
        admin.close()


def _check_port(report: Report, host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            report.fail(
                "/metrics",
                f"cannot listen on {host}:{port}: {e.strerror or e}",
                "stop what holds it, or give another --metrics-port",
            )
            return
    report.ok("/metrics", f"{host}:{port} free")
