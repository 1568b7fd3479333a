"""Fast checks of the lab's pure parts (no JVM): config validation, rendering, ack logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from monitor.dev.lab import load
from monitor.dev.lab.config import (
    EXPORTER_CONFIG,
    LAB_ONLY_SETTINGS,
    LabConfig,
    broker_properties,
    exporter_yaml,
    zookeeper_properties,
)
from monitor.dev.lab.errors import LabError


def test_default_ports_follow_the_documented_layout(tmp_path: Path) -> None:
    cfg = LabConfig(dir=tmp_path)
    assert [cfg.broker_port(n) for n in cfg.node_ids] == [19092, 19093, 19094]
    assert [cfg.controller_port(n) for n in cfg.node_ids] == [19192, 19193, 19194]
    assert [cfg.jmx_port(n) for n in cfg.node_ids] == [19292, 19293, 19294]
    assert cfg.quorum_voters == "1@127.0.0.1:19192,2@127.0.0.1:19193,3@127.0.0.1:19194"
    assert cfg.jmx_url(2) == "http://127.0.0.1:19293/metrics"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"heap": "lots"},
        {"brokers": 0},
        {"base_port": 80},
        {"base_port": 65400},
        {"bogus": 1},
        {"kafka_version": "2.8.2"},
        {"kafka_version": "latest"},
        {"kafka_version": "4.1.2", "metadata": "zookeeper"},  # removed in 4.0
        {"kafka_version": "3.9.2", "metadata": "zookeeper", "security": "mtls"},
    ],
)
def test_invalid_configs_are_rejected(tmp_path: Path, kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        LabConfig(dir=tmp_path, **kwargs)  # type: ignore[arg-type]


def test_broker_properties_carry_the_lab_settings_and_overrides(tmp_path: Path) -> None:
    cfg = LabConfig(dir=tmp_path, extra_broker_config={"replica.lag.time.max.ms": "6000"})
    props = broker_properties(cfg, 2)
    assert props["node.id"] == "2"
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19093,CONTROLLER://127.0.0.1:19193"
    assert props["replica.lag.time.max.ms"] == "6000"
    assert props["auto.create.topics.enable"] == "false"
    assert set(LAB_ONLY_SETTINGS) <= set(props)
    # The lag window must stay above the follower fetch wait (500 ms) Kafka requires.
    assert int(LAB_ONLY_SETTINGS["replica.lag.time.max.ms"][0]) > 500


def test_a_zookeeper_lab_has_brokers_registered_in_zookeeper(tmp_path: Path) -> None:
    """Kafka 3.9 in ZooKeeper mode: broker.id and zookeeper.connect, no KRaft key (the
    broker refuses controller.listener.names outside KRaft), ZooKeeper's session timeout in
    place of the KRaft one; no share-group keys (not in 3.x); nothing to format with."""
    cfg = LabConfig(dir=tmp_path, kafka_version="3.9.2", metadata="zookeeper")
    props = broker_properties(cfg, 2)
    assert props["broker.id"] == "2"
    assert props["zookeeper.connect"] == "127.0.0.1:19192"  # base port + 100
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19093"
    assert props["zookeeper.session.timeout.ms"] == "4000"
    kraft = {"process.roles", "node.id", "controller.quorum.voters", "controller.listener.names"}
    assert not kraft & set(props)
    assert not [k for k in props if k.startswith(("broker.session", "share.", "controller."))]
    assert cfg.elr_feature is None and cfg.ports(2) == [19093, 19293]
    assert zookeeper_properties(cfg)["tickTime"] == "1000"
    assert cfg.log4j_config_path.name == "log4j.properties"


def test_each_version_formats_with_the_features_it_has(tmp_path: Path) -> None:
    """3.9 rejects eligible.leader.replicas.version at format: left out there."""
    assert LabConfig(dir=tmp_path, kafka_version="3.9.2").elr_feature is None
    assert LabConfig(dir=tmp_path, kafka_version="4.4.0").elr_feature == "1"
    assert LabConfig(dir=tmp_path, elr=False).elr_feature == "0"
    kraft39 = broker_properties(LabConfig(dir=tmp_path, kafka_version="3.9.2"), 1)
    assert kraft39["process.roles"] == "broker,controller"
    assert "share.coordinator.state.topic.num.partitions" not in kraft39


def test_exporter_config_is_valid_json_yaml_with_the_documented_names() -> None:
    parsed = json.loads(exporter_yaml())
    assert parsed == json.loads(json.dumps(EXPORTER_CONFIG))
    names = {rule["name"] for rule in parsed["rules"]}
    assert "kafka_log_log_end_offset" in names
    assert "kafka_server_replica_fetcher_lag" in names
    assert "kafka_cluster_partition_$1" in names


def test_ack_log_round_trip_and_torn_last_line(tmp_path: Path) -> None:
    log = tmp_path / "acks.jsonl"
    lines = [
        {"topic": "t", "partition": 0, "offset": 5, "run": "r1", "seq": 0},
        {"topic": "u", "partition": 1, "offset": 7, "run": "r1", "seq": 1},
    ]
    log.write_text("\n".join(json.dumps(line) for line in lines) + '\n{"topic": "t", "parti')
    entries = load.read_ack_log(log, "t")
    assert entries == [load.AckEntry("t", 0, 5, "r1", 0)]
    assert entries[0].value() == b'{"run":"r1","seq":0}'

    log.write_text('not json\n{"topic": "t", "partition": 0, "offset": 1, "run": "r", "seq": 1}\n')
    with pytest.raises(LabError):
        load.read_ack_log(log)


def test_lost_offsets_render_as_ranges() -> None:
    report = load.VerifyReport(
        topic="t",
        partitions={
            0: load.PartitionReport(
                partition=0, acknowledged=9, intact=3, replaced=[3, 4], beyond_end=[5, 6, 9]
            )
        },
    )
    assert report.lost_count == 5
    assert report.partitions[0].lost == [3, 4, 5, 6, 9]
    assert "lost offsets: 3-6, 9" in report.render()


def test_lab_up_refuses_a_zookeeper_lab_on_kafka_4_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No JVM starts, no traceback: the line names the version and why."""
    from monitor.cli import main

    argv = ["lab", "up", "--kafka-version", "4.4.0", "--zookeeper", "--dir", str(tmp_path)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "kafka_version 4.4.0 has no ZooKeeper mode (removed in 4.0)" in err
    assert "Traceback" not in err and not (tmp_path / "lab.json").exists()


def test_a_state_file_from_before_versions_keeps_its_version(tmp_path: Path) -> None:
    """Found by review: a lab.json written when the lab ran one version (no
    config.kafka_version) read as today's default, and Lab refused it -- even `lab down`."""
    from monitor.dev.lab.cluster import Lab

    old = {
        "config": {"dir": str(tmp_path), "base_port": 19092},
        "cluster_id": "abc",
        "kafka_version": "4.1.2",
        "jmx_exporter_version": "1.0.1",
        "nodes": {},
    }
    (tmp_path / "lab.json").write_text(json.dumps(old))
    lab = Lab.load(tmp_path, progress=None)
    assert lab.config.kafka_version == "4.1.2"


def test_a_broker_whose_listener_does_not_answer_is_not_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Registered (a ZooKeeper lab can list a restarted broker under its old session) and
    its exporter answering (a JVM agent, up before the broker): not ready until the
    broker's own listener answers -- CI once healed a lab that way and the next admin
    request met ECONNREFUSED. The probes are stubbed: which port answers is the input."""
    from typing import Any, cast

    from monitor.dev.lab import readiness

    cfg = LabConfig(dir=tmp_path)
    closed = {cfg.broker_port(2)}
    monkeypatch.setattr(readiness, "registered_brokers", lambda bootstrap: {1, 2, 3})
    monkeypatch.setattr(readiness, "port_open", lambda host, port: port not in closed)
    monkeypatch.setattr(readiness.time, "sleep", lambda s: None)

    class Started:
        config = cfg

        def pid(self, node: int) -> int:
            return 1000 + node

        def log_tail(self, node: int, lines: int = 40) -> str:
            return f"(log of {node})"

        def say(self, text: str) -> None:
            pass

    nodes = cast(Any, Started())
    with pytest.raises(LabError, match=r"brokers \[2\] not ready .*listening \[1, 3\]"):
        readiness.wait_ready(nodes, [1, 2, 3], 0.0, lambda: "127.0.0.1:1")
    closed.clear()
    readiness.wait_ready(nodes, [1, 2, 3], 0.0, lambda: "127.0.0.1:1")  # all answer: ready


def test_a_broker_writes_the_class_archive_once_and_keeps_it_only_after_a_clean_exit(
    tmp_path: Path,
) -> None:
    """Class-data sharing (monitor.dev.lab.jvm): without an archive a broker is told to
    write one at exit into its node folder; it is moved where later starts find it only
    when the JVM exited by itself -- a JVM SIGKILLed mid-write leaves a partial file."""
    from monitor.dev.lab.jvm import (
        ARCHIVE_LOG,
        PARTIAL_ARCHIVE,
        class_archive,
        class_sharing_flags,
        keep_class_archive,
    )

    config = LabConfig(dir=tmp_path / "lab")
    config.node_dir(1).mkdir(parents=True)
    archive = class_archive(tmp_path / "cache", "a.jar:b.jar", Path("agent.jar"))
    assert archive != class_archive(tmp_path / "cache", "a.jar:c.jar", Path("agent.jar"))
    partial = config.node_dir(1) / PARTIAL_ARCHIVE
    writes = class_sharing_flags(config, 1, archive)
    assert f"-XX:ArchiveClassesAtExit={partial}" in writes
    partial.write_bytes(b"half")  # SIGKILLed while writing
    assert keep_class_archive(config, 1, clean_exit=False) is None
    assert not partial.exists() and not archive.exists()
    class_sharing_flags(config, 1, archive)
    partial.write_bytes(b"half")  # exited by itself, yet its log never said "written"
    assert keep_class_archive(config, 1, clean_exit=True) is None
    assert not partial.exists() and not archive.exists()
    class_sharing_flags(config, 1, archive)
    partial.write_bytes(b"whole")  # exited on SIGTERM, the archive written whole
    (config.node_dir(1) / ARCHIVE_LOG).write_text("[info][cds,dynamic] Written dynamic archive")
    assert keep_class_archive(config, 1, clean_exit=True) == archive
    assert archive.read_bytes() == b"whole" and not partial.exists()
    reads = class_sharing_flags(config, 1, archive)
    assert f"-XX:SharedArchiveFile={archive}" in reads
    assert "-XX:+AllowArchivingWithJavaAgent" in reads  # the exporter is a java agent
