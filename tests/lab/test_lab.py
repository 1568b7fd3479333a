"""Integration tests against a real 3-node Kafka 4.x KRaft lab (see conftest.py).

Every wait is bounded; every assertion can fail. Timings on a 2-core box: cluster start
~7-15 s, each fault scenario 5-30 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from monitor.cli import main as monitor_main
from monitor.lab import admin, load, metrics
from monitor.lab.admin import PartitionState
from monitor.lab.cluster import Lab, NodeStatus
from monitor.lab.paths import REPO_ROOT

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _wait(
    lab: Lab,
    topic: str,
    predicate: Callable[[PartitionState], bool],
    what: str,
    timeout_s: float = 40.0,
) -> PartitionState:
    states = admin.wait_for_partitions(
        lab.bootstrap_servers,
        topic,
        lambda ps: len(ps) == 1 and predicate(ps[0]),
        timeout_s=timeout_s,
        what=what,
        with_elr=True,
    )
    return states[0]


def _wait_metric(
    url: str, topic: str, partition: int, expected: int, timeout_s: float = 30.0
) -> int | None:
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        value = metrics.log_end_offset(url, topic, partition)
        if value == expected:
            return value
        time.sleep(0.5)
    return value


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
    topic = _topic("jmx")
    admin.create_topic(lab.bootstrap_servers, topic, partitions=2, replication_factor=3)
    stats = load.produce(lab.bootstrap_servers, topic, rate=2000, count=120, partition=0)
    assert stats.acked == 120

    for node, url in lab.jmx_urls.items():
        # Leader and both followers host a replica: every exporter reports its own LEO.
        assert _wait_metric(url, topic, 0, 120) == 120, f"broker {node} LEO of {topic}-0"
        assert _wait_metric(url, topic, 1, 0) == 0, f"broker {node} LEO of {topic}-1"
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
    topic = _topic("pause")
    admin.create_topic(
        lab.bootstrap_servers, topic, assignments={0: [1, 2, 3]}, min_insync_replicas=1
    )
    lab.pause(3)
    assert lab.node_status(3) is NodeStatus.PAUSED
    started = time.monotonic()
    # Keep the leader's LEO moving: a follower that is idle *and* caught up never lags.
    load.produce(lab.bootstrap_servers, topic, rate=200, count=200, acks="1")
    state = _wait(lab, topic, lambda p: 3 not in p.isr, "broker 3 out of the ISR")
    shrink_s = time.monotonic() - started
    assert state.isr == (1, 2)
    assert state.leader == 1
    assert shrink_s < 40

    lab.resume(3)
    assert lab.node_status(3) is NodeStatus.ALIVE
    state = _wait(lab, topic, lambda p: set(p.isr) == {1, 2, 3}, "broker 3 back in the ISR")
    assert state.leader == 1


def test_killing_the_leader_elects_a_new_leader_with_a_higher_epoch(lab: Lab) -> None:
    topic = _topic("kill")
    before = admin.create_topic(
        lab.bootstrap_servers, topic, assignments={0: [2, 3, 1]}, min_insync_replicas=2
    )[0]
    assert before.leader == 2
    load.produce(lab.bootstrap_servers, topic, rate=2000, count=50)

    lab.kill(2)
    assert lab.node_status(2) is NodeStatus.STOPPED
    after = _wait(lab, topic, lambda p: p.leader in (1, 3), "a new leader")
    assert after.leader_epoch > before.leader_epoch
    assert 2 not in after.isr
    # Clean election: nothing acknowledged with acks=all was lost.
    assert admin.end_offsets(lab.bootstrap_servers, topic) == {0: 50}

    lab.start(2)
    back = _wait(lab, topic, lambda p: 2 in p.isr, "broker 2 back in the ISR")
    assert back.leader_epoch >= after.leader_epoch


def test_forced_unclean_election_loses_exactly_the_unreplicated_acknowledged_records(
    lab: Lab, tmp_path: Path
) -> None:
    """RF 2, min ISR 1, unclean elections disabled on the topic.

    Leader 1, follower 2. Stop 2, keep writing to 1 (acks=1), crash 1, bring 2 back and
    force it to lead with ElectLeaders(UNCLEAN). Every record acknowledged while 2 was
    away is gone: count = leader LEO before the crash - follower LEO.
    """
    topic = _topic("unclean")
    acks = tmp_path / "acks.jsonl"
    admin.create_topic(lab.bootstrap_servers, topic, assignments={0: [1, 2]}, min_insync_replicas=1)

    replicated = load.produce(
        lab.bootstrap_servers, topic, rate=2000, count=150, acks="all", log_path=acks
    )
    assert replicated.acked == 150

    lab.stop(2)  # controlled shutdown: follower LEO frozen at 150 on disk
    _wait(lab, topic, lambda p: p.isr == (1,), "ISR = [1]")
    unreplicated = load.produce(
        lab.bootstrap_servers, topic, rate=2000, count=250, acks="1", log_path=acks
    )
    assert unreplicated.acked == 250
    leader_leo = _wait_metric(lab.jmx_urls[1], topic, 0, 400)
    assert leader_leo == 400

    # Crashing 1 while 2 is down leaves 1 of 3 KRaft voters: metadata freezes until 2 is
    # back, so bring 2 back first and only then wait for the partition to go offline.
    lab.kill(1)
    lab.start(2)
    follower_leo = _wait_metric(lab.jmx_urls[2], topic, 0, 150)
    assert follower_leo == 150
    offline = _wait(lab, topic, lambda p: p.leader == -1, "partition offline")
    assert offline.isr == ()
    # KIP-966 (ELR on by default in 4.1): the last ISR member is kept as eligible leader,
    # and the stale follower is not eligible, so no clean election can pick broker 2.
    assert offline.elr == (1,)

    assert monitor_main(["lab", "unclean-elect", topic, "0", "--dir", str(lab.config.dir)]) == 0
    elected = _wait(lab, topic, lambda p: p.leader == 2, "broker 2 leads")
    assert elected.leader_epoch > offline.leader_epoch
    assert elected.isr == (2,)
    assert elected.elr == ()
    # The controller that ran the election counts it (per process, so sum the live nodes).
    unclean_count = sum(
        s.value
        for node in (2, 3)
        for s in metrics.scrape(lab.jmx_urls[node])
        if s.name == "kafka_controller_stats_uncleanleaderelectionspersec_total"
    )
    assert unclean_count >= 1

    after = load.produce(
        lab.bootstrap_servers, topic, rate=2000, count=100, acks="1", log_path=acks
    )
    assert after.acked == 100

    report = load.verify(lab.bootstrap_servers, topic, acks, settle_s=3)
    part = report.partitions[0]
    expected_lost = leader_leo - follower_leo
    assert expected_lost == 250
    assert report.lost_count == expected_lost
    assert part.lost == list(range(follower_leo, leader_leo))
    # The 100 new records reuse offsets 150..249; 250..399 are beyond the new log end.
    assert part.replaced == list(range(150, 250))
    assert part.beyond_end == list(range(250, 400))
    assert part.missing == []
    assert part.intact == 150 + 100

    # The CLI reports the same and signals data loss with exit code 3.
    code = monitor_main(
        ["lab", "verify", topic, "--log", str(acks), "--settle", "1", "--dir", str(lab.config.dir)]
    )
    assert code == 3
