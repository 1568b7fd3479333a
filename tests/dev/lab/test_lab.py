"""Integration tests against a real 3-node Kafka 4.x KRaft lab (see conftest.py).

Every wait is bounded; every assertion can fail. Timings on a 2-core box: cluster start
~7-15 s, each fault scenario 5-30 s.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from monitor.dev.lab import admin, load, metrics, ports
from monitor.dev.lab.cluster import Lab, NodeStatus
from monitor.dev.lab.errors import LabError
from monitor.dev.lab.paths import REPO_ROOT
from tests.dev.lab.helpers import (
    run_unclean_election_scenario,
    topic_name,
    wait_metric,
    wait_partition,
)

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]


def test_cluster_has_three_registered_brokers(lab: Lab) -> None:
    assert admin.unfenced_brokers(lab.bootstrap_servers) == {1, 2, 3}
    infos = lab.status()
    assert [i.status for i in infos] == [NodeStatus.ALIVE] * 3
    assert len({i.pid for i in infos}) == 3
    base = lab.config.base_port
    assert [i.broker_port for i in infos] == [base, base + 1, base + 2]
    assert base != 19092  # never the CLI's default lab

    # Another process sees the same lab through the state file.
    out = subprocess.run(
        [sys.executable, "-m", "monitor", "lab", "status", "--json", "--dir", str(lab.config.dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    status = json.loads(out.stdout)
    assert status["bootstrap_servers"] == lab.config.bootstrap_servers
    assert [(b["broker"], b["pid"], b["status"]) for b in status["brokers"]] == [
        (i.node, i.pid, "alive") for i in infos
    ]


def test_jmx_exporters_serve_per_partition_log_end_offsets(lab: Lab) -> None:
    topic = topic_name("jmx")
    admin.create_topic(lab.bootstrap_servers, topic, partitions=2, replication_factor=3)
    stats = load.produce(lab.bootstrap_servers, topic, rate=2000, count=120, partition=0)
    assert stats.acked == 120

    for node, url in lab.jmx_urls.items():
        # Leader and both followers host a replica: every exporter reports its own LEO.
        assert wait_metric(url, topic, 0, 120) == 120, f"broker {node} LEO of {topic}-0"
        assert wait_metric(url, topic, 1, 0) == 0, f"broker {node} LEO of {topic}-1"
        samples = metrics.scrape(url)
        names = {s.name for s in samples}
        for expected in (
            "kafka_log_log_start_offset",
            "kafka_log_size_bytes",
            "kafka_cluster_partition_underreplicated",
            "kafka_cluster_partition_insyncreplicascount",
            "kafka_server_replica_manager_isrshrinkspersec_total",
            "kafka_server_replica_manager_underreplicatedpartitions",
            "kafka_controller_activecontrollercount",
            "kafka_controller_offlinepartitionscount",
            "kafka_controller_stats_uncleanleaderelectionspersec_total",
        ):
            assert expected in names, f"{expected} missing on broker {node}"

    # Exactly one active controller across the three combined nodes.
    active = sum(
        s.value
        for url in lab.jmx_urls.values()
        for s in metrics.scrape(url)
        if s.name == "kafka_controller_activecontrollercount"
    )
    assert active == 1


def test_paused_follower_leaves_isr_and_rejoins_after_resume(lab: Lab) -> None:
    topic = topic_name("pause")
    before = admin.create_topic(
        lab.bootstrap_servers, topic, assignments={0: [1, 2, 3]}, min_insync_replicas=1
    )[0]
    # Keep the leader's LEO moving: a follower that is idle *and* caught up never lags.
    # The producer starts before the pause: a client created afterwards may send its first
    # metadata request to the paused broker, which accepts the connection and never answers.
    stop = threading.Event()
    traffic = threading.Thread(
        target=load.produce,
        args=(lab.bootstrap_servers, topic),
        kwargs={"rate": 200, "acks": "1", "stop": stop},
        daemon=True,
    )
    traffic.start()
    time.sleep(1)
    lab.pause(3)
    assert lab.node_status(3) is NodeStatus.PAUSED
    try:
        state = wait_partition(lab, topic, lambda p: 3 not in p.isr, "broker 3 out of the ISR")
        # The ISR shrank while broker 3 was still paused (wait_partition's own timeout
        # bounds how long that may take; how long it did take is the benchmarks' business).
        assert lab.node_status(3) is NodeStatus.PAUSED
    finally:
        stop.set()
        traffic.join(timeout=60)
    assert state.isr == (1, 2)
    # A shrink, not an election: the same leader in the same epoch.
    assert (state.leader, state.leader_epoch) == (1, before.leader_epoch)

    lab.resume(3)
    assert lab.node_status(3) is NodeStatus.ALIVE
    state = wait_partition(
        lab, topic, lambda p: set(p.isr) == {1, 2, 3}, "broker 3 back in the ISR"
    )
    assert state.leader == 1


def test_killing_the_leader_elects_a_new_leader_with_a_higher_epoch(lab: Lab) -> None:
    topic = topic_name("kill")
    before = admin.create_topic(
        lab.bootstrap_servers, topic, assignments={0: [2, 3, 1]}, min_insync_replicas=2
    )[0]
    assert before.leader == 2
    load.produce(lab.bootstrap_servers, topic, rate=2000, count=50)

    lab.kill(2)
    assert lab.node_status(2) is NodeStatus.STOPPED
    after = wait_partition(lab, topic, lambda p: p.leader in (1, 3), "a new leader")
    assert after.leader_epoch > before.leader_epoch
    assert 2 not in after.isr
    # Clean election: nothing acknowledged with acks=all was lost.
    assert admin.end_offsets(lab.bootstrap_servers, topic) == {0: 50}

    lab.start(2)
    back = wait_partition(lab, topic, lambda p: 2 in p.isr, "broker 2 back in the ISR")
    assert back.leader_epoch >= after.leader_epoch


def test_a_restart_waits_out_a_connection_holding_the_brokers_port(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen in CI: while broker 2 was down, an outgoing connection took its exporter's port
    as its local port, and the restart failed at once with "port in use". A connection lets
    go of its port by itself; the restart now waits for it (a listener still fails).

    The connection holds the port when the restart begins and lets go only after the
    restart's port check has found it busy: the restart must have said it waits, checked
    again, and started the broker."""
    port = lab.config.jmx_port(2)
    lab.stop(2)
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
    deadline = time.monotonic() + 70  # the stopped exporter's closed scrapes: TIME_WAIT
    while True:
        try:
            holder.bind(("127.0.0.1", port))  # no SO_REUSEADDR, as a client's socket
            break
        except OSError:
            assert time.monotonic() < deadline, f"port {port} never came free"
            time.sleep(0.5)
    holder.connect(("127.0.0.1", lab.config.broker_port(1)))
    real_check, checks = ports.port_free, []

    def check(host: str, p: int) -> bool:
        free = real_check(host, p)
        if p == port:
            checks.append(free)
            if not free:
                holder.close()  # the connection lets go once the restart has seen it
        return free

    said: list[str] = []
    monkeypatch.setattr(ports, "port_free", check)
    monkeypatch.setattr(lab, "_progress", said.append)
    lab.start(2)
    assert checks == [False, True]  # busy when the restart began, free on the next look
    assert f"waiting for port {port} (node 2): held by a closing connection" in said
    assert lab.node_status(2) is NodeStatus.ALIVE
    assert metrics.scrape(lab.config.jmx_url(2)), "the restarted exporter serves metrics"


def test_forced_unclean_election_loses_exactly_the_unreplicated_acknowledged_records(
    lab: Lab, tmp_path: Path
) -> None:
    """ELR on (the lab's default, Kafka 4.1's default): see run_unclean_election_scenario."""
    run_unclean_election_scenario(lab, tmp_path, elr=True)


def test_admin_calls_retry_an_unknown_broker_id_with_a_new_client(lab: Lab) -> None:
    """Just after a restart, kafka-python can be told to ask a broker its metadata does not
    list yet and raises UnknownBrokerIdError before sending (CI, 3.9 KRaft: a topic created
    just after the lab was healed). The lab's admin calls retry that with a new client; a
    non-retriable error still fails at once, naming what was being done."""
    import kafka.errors as kafka_errors

    topic = topic_name("retry")
    clients: list[object] = []

    def create_after_a_stale_client(client: object) -> None:
        clients.append(client)
        if len(clients) == 1:
            raise kafka_errors.UnknownBrokerIdError(2)
        client.create_topics(  # type: ignore[attr-defined]
            {topic: {"num_partitions": 1, "replication_factor": 3}}, timeout_ms=30_000
        )

    admin._retrying(lab.bootstrap_servers, 30, create_after_a_stale_client, f"creating {topic}")
    assert len(clients) == 2 and clients[0] is not clients[1]
    wait_partition(lab, topic, lambda p: p.leader > 0, "a leader")

    def refused(client: object) -> None:
        raise kafka_errors.TopicAuthorizationFailedError(topic)

    with pytest.raises(LabError, match=f"creating {topic} failed: .*TopicAuthorization"):
        admin._retrying(lab.bootstrap_servers, 30, refused, f"creating {topic}")


def test_a_broker_restarted_after_a_clean_stop_maps_the_class_archive(lab: Lab) -> None:
    """Class-data sharing: a clean stop leaves (or finds) the brokers' archive, and the
    restarted JVM maps it (monitor.dev.lab.jvm; ~5.2 -> 3.3 CPU-s a start,
    bench.lab_start_bench)."""
    from monitor import jars
    from monitor.dev.lab.jvm import class_archive

    lab.stop(3)
    classpath = jars.kafka_classpath(lab.config.kafka_version)
    archive = class_archive(jars.cache_root(), classpath, jars.jmx_agent_jar())
    assert archive.is_file(), "no archive after a clean stop"
    lab.start(3)
    pid = lab.pid(3)
    assert pid is not None
    assert str(archive) in Path(f"/proc/{pid}/maps").read_text()
