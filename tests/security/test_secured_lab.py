"""The collector and the Spark job against a real broker with SASL_SSL (SCRAM) and mutual TLS.

One module-scoped, one-broker lab per security mode (``sasl_ssl``, then ``mtls``; pytest
runs every test of one mode before starting the next lab). For each mode, one run:

1. the collector (settings from ``monitor.dev.lab.security.kafka_settings``: secrets
   as *files*) publishes two rounds to the events topic over the ``SECURE`` listener, with
   its /metrics served and every log record (kafka-python's DEBUG included) captured;
2. one malformed record goes to the events topic (so the dead-letter topic has content);
3. ``python -m streaming`` (a subprocess: its stdout/stderr are the job's logs, Spark's at
   INFO) reads the events over ``SECURE`` with ``MONITOR_STREAMING_*`` settings from the
   environment (secrets as files), writes findings and the dead letter back over
   ``SECURE``; its /metrics is scraped while it runs; SIGINT stops it.

Then every secret of the lab (SCRAM password, client key password, the client key's PEM
body, the broker store password) is searched for in everything the monitor emitted: the
collector's log records, both /metrics pages, the job's stdout/stderr, and the events,
findings and dead-letter topics' contents. Wrong credentials must fail with a message that
names the problem and contains no secret.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError

from monitor.collector import Collector, CollectorConfig
from monitor.collector.security import REDACTED, KafkaConnectError
from monitor.connection import KafkaConnection
from monitor.dev.lab import security
from monitor.dev.lab.admin import create_topic
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.ports import reserve_base_port
from tests.security.helpers import (
    LOG4J2_INFO,
    ONE_BROKER,
    Capture,
    consumer,
    free_port,
    get,
    raw,
    read_topic,
)

pytestmark = [pytest.mark.lab, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
BASE_PORT = int(os.environ.get("MONITOR_TEST_SECURITY_LAB_PORT", "27092"))


@dataclass
class Run:
    """Everything one mode's run left behind, for the tests to check."""

    lab: Lab
    mode: str
    settings: KafkaConnection
    topics: dict[str, str]
    secrets: dict[str, str]
    log_text: str = ""
    log_records: int = 0
    collector_metrics: str = ""
    job_metrics: str = ""
    job_output: str = ""  # stdout + stderr
    job_log: str = ""  # the JVM's log4j file
    job_returncode: int | None = None
    published: int = 0
    contents: dict[str, list[Any]] = field(default_factory=dict)


def lab_secrets(lab: Lab) -> dict[str, str]:
    """Every secret of the lab's security folder, and the client key's PEM body lines."""
    f = security.files_for(lab.config.dir)
    out = {
        "client key password": f.read(f.client_key_password),
        "broker store password": f.read(f.broker_store_password),
    }
    if f.scram_password.is_file():
        out["scram password"] = f.read(f.scram_password)
    pem = f.client_pem.read_text().splitlines()
    start = pem.index("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    body = pem[start + 1 : pem.index("-----END ENCRYPTED PRIVATE KEY-----")]
    for i, line in enumerate(body):
        if len(line) >= 40:
            out[f"client key PEM line {i}"] = line
    return out


def _collect(run: Run, tmp: Path) -> None:
    capture = Capture()
    root = logging.getLogger()
    old_level = root.level
    kafka_logger = logging.getLogger("kafka")
    old_kafka = kafka_logger.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    kafka_logger.setLevel(logging.DEBUG)
    port = free_port()
    try:
        collector = Collector(
            CollectorConfig(
                cluster="seclab",
                kafka=run.settings,
                jmx_urls=run.lab.jmx_urls,
                events_topic=run.topics["events"],
                events_on_watched_cluster=True,  # the secured lab is both here
                interval_s=0.5,
                config_every_rounds=1,
                jmx_timeout_s=2.0,
                metrics_port=port,
            )
        )
        collector.start()
        try:
            results: list[Any] = []
            collector.run(rounds=2, on_round=results.append)
            run.published = sum(len(r.events) for r in results)
            run.collector_metrics = get(f"http://127.0.0.1:{port}/metrics")
        finally:
            collector.stop()
    finally:
        root.removeHandler(capture)
        root.setLevel(old_level)
        kafka_logger.setLevel(old_kafka)
    run.log_text = "\n".join(capture.lines)
    run.log_records = len(capture.lines)


def _produce_garbage(run: Run) -> None:
    kw = run.settings.client_kwargs()
    producer = KafkaProducer(acks="all", **kw)
    try:
        producer.send(run.topics["events"], key=b"seclab/garbage", value=b'{"not": "an event"')
        producer.flush(30)
    finally:
        producer.close()


def _stream(run: Run, tmp: Path) -> None:
    """``python -m streaming`` over the secured listener until findings and the dead letter
    are out; /metrics scraped while it runs; then SIGINT."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MONITOR_STREAMING_") and k != "MONITOR_SPARK_LOG_LEVEL"
    }
    settings = security.kafka_settings(
        run.lab.config.dir, run.mode, run.lab.config.secure_bootstrap_servers
    )
    env.update({f"MONITOR_STREAMING_KAFKA__{k.upper()}": str(v) for k, v in settings.items()})
    port = free_port()
    # Spark's and the Kafka clients' INFO logs, to stderr.
    conf_dir = tmp / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "log4j2.properties").write_text(LOG4J2_INFO.format(log=tmp / "job.log"))
    env |= {
        "SPARK_CONF_DIR": str(conf_dir),
        "MONITOR_SPARK_LOG_LEVEL": "INFO",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    cmd = [
        sys.executable, "-m", "streaming",
        "--events-topic", run.topics["events"],
        "--findings-topic", run.topics["findings"],
        "--deadletter-topic", run.topics["deadletter"],
        "--checkpoint", str(tmp / "checkpoint"),
        "--store", str(tmp / "store"),
        "--trigger-seconds", "1",
        "--tick-ms", "3600000",
        "--buckets", "2",
        "--shuffle-partitions", "1",
        "--metrics-port", str(port),
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", "spark.driver.host=127.0.0.1",
    ]  # fmt: skip
    out_path = tmp / "job.out"
    with out_path.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, out_path.read_text()[-4000:]
            assert time.monotonic() < deadline, out_path.read_text()[-4000:]
            try:
                # The driver hook updates /metrics after the batch's Kafka and store writes.
                run.job_metrics = get(f"http://127.0.0.1:{port}/metrics")
            except OSError:
                run.job_metrics = ""
            if "durability_risk" in run.job_metrics:
                findings = read_topic(run.settings, run.topics["findings"], timeout_s=5)
                dead = read_topic(run.settings, run.topics["deadletter"], timeout_s=5)
                if findings and dead:
                    break
            time.sleep(2)
        time.sleep(2)  # let the batch finish (counters) before the SIGINT
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    run.job_returncode = proc.returncode
    run.job_output = out_path.read_text(errors="replace")
    run.job_log = (tmp / "job.log").read_text(errors="replace")


@pytest.fixture(scope="module", params=["sasl_ssl", "mtls"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    mode: str = request.param
    tmp = tmp_path_factory.mktemp(f"secured-{mode}")
    with reserve_base_port(BASE_PORT, brokers=1, secure=True) as base:
        lab = Lab(
            LabConfig(
                dir=tmp / "lab",
                base_port=base,
                brokers=1,
                heap="256m",
                security=mode,  # type: ignore[arg-type]
                extra_broker_config=ONE_BROKER,
            ),
            progress=None,
        )
        try:
            lab.up()
            tag = uuid.uuid4().hex[:6]
            topics = {r: f"{r}-{tag}" for r in ("events", "findings", "deadletter", "payments")}
            for name in topics.values():
                # Topics are made over the lab's PLAINTEXT listener (its own tooling); the
                # payments topic (RF 1) is what the job must find a durability risk in.
                create_topic(lab.bootstrap_servers, name, replication_factor=1,
                             min_insync_replicas=1)  # fmt: skip
            settings = KafkaConnection(
                **security.kafka_settings(  # type: ignore[arg-type]
                    lab.config.dir, mode, lab.config.secure_bootstrap_servers
                )
            )
            r = Run(lab, mode, settings, topics, lab_secrets(lab))
            _collect(r, tmp)
            _produce_garbage(r)
            _stream(r, tmp)
            for role in ("events", "findings", "deadletter"):
                r.contents[role] = read_topic(settings, topics[role])
            yield r
        finally:
            lab.down()


# --- it works over the secured listener --------------------------------------------------------


def test_collector_publishes_over_the_secured_listener(run: Run) -> None:
    assert run.published > 0
    values = [m.value for m in run.contents["events"] if m.key != b"seclab/garbage"]
    valid = [json.loads(v) for v in values]
    kinds = {e["kind"] for e in valid}
    assert {"partition", "broker", "topic_config"} <= kinds, kinds
    assert len(valid) == run.published
    payments = run.topics["payments"]
    assert any(e["kind"] == "partition" and e["topic"] == payments for e in valid)
    assert "kafka_replication_collector_rounds_total 2.0" in run.collector_metrics


def test_job_reads_and_writes_over_the_secured_listener(run: Run) -> None:
    findings = [json.loads(m.value) for m in run.contents["findings"]]
    risky = [
        f for f in findings
        if f["kind"] == "durability_risk" and f["topic"] == run.topics["payments"]
    ]  # fmt: skip
    assert risky, findings
    assert [m.value for m in run.contents["deadletter"]] == [b'{"not": "an event"']
    assert "kafka_replication" in run.job_metrics
    assert run.job_returncode == 0, run.job_output[-4000:]
    assert "events accepted" in run.job_output


def test_wrong_credentials_are_refused_with_a_clear_error(run: Run) -> None:
    kw = run.settings.model_dump()
    kw["bootstrap_timeout_ms"] = 3000
    if run.mode == "sasl_ssl":
        wrong = "Wrong-Password-" + uuid.uuid4().hex
        kw["sasl_password"], kw["sasl_password_file"] = wrong, None
        expected = "SASL authentication failed"
        refused = "invalid credentials with SASL mechanism SCRAM-SHA-512"
        hidden = [wrong, run.secrets["scram password"]]
    else:
        wrong = ""
        kw["ssl_certfile"], kw["ssl_key_password"], kw["ssl_key_password_file"] = None, None, None
        expected = "requires a client certificate"
        refused = "SSL handshake failed"
        hidden = [run.secrets["client key password"]]
    bad = KafkaConnection(**kw)
    log = run.lab.config.server_log(run.lab.node_ids[0])
    refusals_before = _refusals(log.read_text(errors="replace"), refused)
    collector = Collector(
        CollectorConfig(cluster="x", kafka=bad, jmx_urls=run.lab.jmx_urls, events_topic="x")
    )
    with pytest.raises(KafkaConnectError) as err:
        collector.start(produce=False)
    message = str(err.value)
    assert expected in message, message
    assert run.lab.config.secure_bootstrap_servers in message
    for secret in hidden:
        assert secret not in message
    # The broker really refuses, and says why in its own log (kafka-python 3.0 logs the
    # broker's answer only when it reads it before the broker closes the socket: a race). A
    # plain kafka-python client gets nowhere either: a bootstrap timeout.
    bootstrap = run.lab.config.secure_bootstrap_servers
    with pytest.raises(
        KafkaTimeoutError, match=re.escape(f"Unable to bootstrap from ['{bootstrap}']")
    ):
        consumer(bad).topics()
    text = log.read_text(errors="replace")
    assert _refusals(text, refused) > refusals_before, text[-3000:]
    for secret in hidden:
        assert secret not in text


def _refusals(server_log: str, reason: str) -> int:
    """The broker's INFO lines for a refused client (``Selector``: "Failed authentication
    with /127.0.0.1 (channelId=...) (<reason>)") that give ``reason``."""
    return sum(
        1
        for line in server_log.splitlines()
        if "Failed authentication with" in line and reason in line
    )


# --- no secret in anything the monitor emits ----------------------------------------------------


def _leaks(run: Run, text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [name for name, secret in run.secrets.items() if secret.encode() in data]


def test_secrets_are_real_and_used(run: Run) -> None:
    """The grep below can fail: the secrets are non-trivial strings the clients did use."""
    assert all(len(s) >= 20 for s in run.secrets.values())
    if run.mode == "sasl_ssl":
        assert run.secrets["scram password"].startswith("lab-scram-")
        # kafka-python logged its configuration (with the password slot redacted).
        assert f"'sasl_plain_password': '{REDACTED}'" in run.log_text
        # The job's Kafka clients logged theirs, with the JAAS line hidden.
        assert "sasl.jaas.config = [hidden]" in run.job_log
    else:
        assert f"'ssl_password': '{REDACTED}'" in run.log_text
        assert "ssl.key.password = [hidden]" in run.job_log
    assert f"security.protocol = {security.protocol(run.mode)}" in run.job_log


def test_no_secret_in_collector_logs_and_metrics(run: Run) -> None:
    assert run.log_records > 50  # kafka-python's DEBUG chatter was captured
    assert _leaks(run, run.log_text) == []
    assert _leaks(run, run.collector_metrics) == []


def test_no_secret_in_job_output_and_metrics(run: Run) -> None:
    assert run.job_log.count(" INFO ") > 200  # Spark's INFO logs were captured
    for text in (run.job_output, run.job_log, run.job_metrics):
        assert _leaks(run, text) == []
        assert "PRIVATE KEY" not in text


def test_no_secret_in_topics(run: Run) -> None:
    for role in ("events", "findings", "deadletter"):
        assert run.contents[role], role
        for record in run.contents[role]:
            assert _leaks(run, raw(record)) == [], role


# --- --check reads what the principal may do from the brokers ---------------------------------


def test_check_names_an_events_topic_the_user_may_not_write(run: Run) -> None:
    """An ACL that lets the monitor's user Read and Describe the events topic but not Write
    it (the lab's authorizer, security.AUTHORIZER): ``collect --check`` says so before any
    round, naming the principal and the kafka-acls.sh line that grants it; granted, it
    passes (issue 49: a blocker of a first finding, one line saying what to do)."""
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ResourcePattern,
        ResourceType,
    )

    from monitor.collector.check import check
    from monitor.preflight.topics import principal

    topic = f"events-readonly-{uuid.uuid4().hex[:6]}"
    create_topic(run.lab.bootstrap_servers, topic, replication_factor=1, min_insync_replicas=1)
    user = security.PRINCIPALS[run.mode]
    admin = KafkaAdminClient(bootstrap_servers=run.lab.bootstrap_servers.split(","))
    pattern = ResourcePattern(ResourceType.TOPIC, topic)

    def allow(*ops: ACLOperation) -> None:
        acls = [ACL(user, "*", op, ACLPermissionType.ALLOW, pattern) for op in ops]
        result = admin.create_acls(acls)
        assert not result["failed"], result

    config = CollectorConfig(
        cluster="seclab", kafka=run.settings, events_kafka=run.settings, events_topic=topic
    )
    try:
        allow(ACLOperation.DESCRIBE, ACLOperation.READ)
        lines: list[str] = []
        assert check(config, lines.append) == 2
        (line,) = [ln for ln in lines if ln.startswith(f"events topic {topic}:")]
        who = principal(run.settings)
        assert line == (
            f"events topic {topic}: FAIL -- the collector may not Write it (as {who}): grant "
            f"it: kafka-acls.sh --bootstrap-server {run.settings.bootstrap_servers} "
            f"--command-config admin.properties --add --allow-principal {who} --operation "
            f"Write --topic {topic}"
        ), line
        allow(ACLOperation.WRITE)
        lines.clear()
        check(config, lines.append)
        (line,) = [ln for ln in lines if ln.startswith(f"events topic {topic}:")]
        assert line.endswith("Write allowed"), line
    finally:
        admin.close()
