"""``--check`` on the real lab: every blocker of a first finding is one line saying what to
do -- a missing topic (the exact command, or ``--create-topics``), a topic set up against
its role, the job's topics and its machine (issue 49, item 4)."""

from __future__ import annotations

import re
import uuid

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from monitor.cli import main
from monitor.dev.lab.admin import create_topic
from monitor.dev.lab.cluster import Lab

pytestmark = pytest.mark.lab


def _check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(list(argv))
    return code, capsys.readouterr().out.splitlines()


def _line(lines: list[str], head: str) -> str:
    (found,) = [ln for ln in lines if ln.startswith(head)]
    return found


def _describe(bootstrap: str, topic: str) -> tuple[int, int, dict[str, str]]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        (t,) = admin.describe_topics([topic])
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs=None)
        entries = admin.describe_configs([resource], config_filter="all")["topic"][topic]
    finally:
        admin.close()
    rf = len(t["partitions"][0]["replica_nodes"])
    return len(t["partitions"]), rf, {k: str(v["value"]) for k, v in entries.items()}


def test_a_missing_events_topic_is_named_with_its_command_and_created_on_request(
    lab: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    """1: missing -- FAIL, with the check's own command plus --create-topics, and the
    kafka-topics.sh line; 2: --create-topics makes it with the documented settings; 3: it
    is then fit, Write allowed, and the whole check passes."""
    topic = f"__replication_monitor_events_{uuid.uuid4().hex[:8]}"
    argv = ["collect", "--check", "--bootstrap", lab.bootstrap_servers,
            "--events-bootstrap", lab.bootstrap_servers, "--topic", topic]  # fmt: skip
    for broker, url in sorted(lab.jmx_urls.items()):
        argv += ["--jmx", f"{broker}={url}"]
    code, lines = _check(capsys, *argv)
    assert code == 2
    line = _line(lines, f"events topic {topic}: FAIL -- missing on {lab.bootstrap_servers}")
    assert f"`monitor {' '.join(argv)} --create-topics`" in line, line
    assert (
        f"kafka-topics.sh --bootstrap-server {lab.bootstrap_servers} --create --topic {topic} "
        "--partitions 12 --replication-factor 3 --config cleanup.policy=delete --config "
        "unclean.leader.election.enable=false --config min.insync.replicas=2 "
        "--config retention.ms=86400000`"
    ) in line, line

    code, lines = _check(capsys, *argv, "--create-topics")
    assert "created: 12 partition(s), replication factor 3" in _line(lines, f"events topic {topic}")
    partitions, rf, configs = _describe(lab.bootstrap_servers, topic)
    assert (partitions, rf) == (12, 3)
    assert {k: configs[k] for k in ("cleanup.policy", "min.insync.replicas", "retention.ms")} == {
        "cleanup.policy": "delete",
        "min.insync.replicas": "2",
        "retention.ms": "86400000",
    }
    assert configs["unclean.leader.election.enable"] == "false"

    code, lines = _check(capsys, *argv)
    assert re.fullmatch(
        rf"events topic {topic}: ok -- 12 partition\(s\), replication factor 3, "
        r"min.insync.replicas 2, retention.ms 86400000, Write allowed",
        _line(lines, f"events topic {topic}"),
    )
    assert code == 0, "\n".join(lines)
    assert lines[-1] == "result: ok"


def test_a_topic_set_up_against_its_role_is_named_with_the_mend(
    lab: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    """A compacted events topic would keep one event a key (the job's history gone), one
    with unclean elections would lose the monitor's own data in the failure it reports."""
    topic = f"__replication_monitor_events_{uuid.uuid4().hex[:8]}"
    create_topic(
        lab.bootstrap_servers, topic, partitions=2, unclean_leader_election=True,
        extra_configs={"cleanup.policy": "compact"},
    )  # fmt: skip
    code, lines = _check(
        capsys, "collect", "--check", "--bootstrap", lab.bootstrap_servers,
        "--events-bootstrap", lab.bootstrap_servers, "--topic", topic,
    )  # fmt: skip
    assert code == 2
    line = _line(lines, f"events topic {topic}: FAIL -- ")
    assert "cleanup.policy is compact, not delete" in line
    assert "unclean.leader.election.enable is true, not false" in line
    assert (
        f"mend it: kafka-configs.sh --bootstrap-server {lab.bootstrap_servers} --alter "
        f"--entity-type topics --entity-name {topic} --add-config "
        "cleanup.policy=delete,unclean.leader.election.enable=false"
    ) in line


def test_the_jobs_check_names_its_topics_and_its_machine(
    lab: Lab, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    """``monitor stream --check``: the three topics (created with --create-topics: the
    events one read by the job, the others written), pyspark, Java, Spark's Kafka source,
    the checkpoint and the store -- without starting Spark."""
    suffix = uuid.uuid4().hex[:8]
    names = {r: f"__replication_monitor_{r}_{suffix}" for r in ("events", "findings", "deadletter")}
    argv = ["stream", "--check", "--bootstrap", lab.bootstrap_servers,
            "--events-topic", names["events"], "--findings-topic", names["findings"],
            "--deadletter-topic", names["deadletter"],
            "--checkpoint", f"{tmp_path}/ck", "--store", f"{tmp_path}/store"]  # fmt: skip
    code, lines = _check(capsys, *argv)
    assert code == 2
    for role, name in names.items():
        assert _line(lines, f"{role} topic {name}: FAIL -- missing")
    code, lines = _check(capsys, *argv, "--create-topics")
    assert code == 0, "\n".join(lines)
    assert "replication factor 3" in _line(lines, f"findings topic {names['findings']}")
    code, lines = _check(capsys, *argv)
    assert code == 0, "\n".join(lines)
    assert _line(lines, f"events topic {names['events']}").endswith("Read allowed")
    assert _line(lines, f"findings topic {names['findings']}").endswith("Write allowed")
    for head in ("pyspark: ok", "java: ok", "Spark Kafka source: ok", "checkpoint: ok"):
        assert _line(lines, head)
