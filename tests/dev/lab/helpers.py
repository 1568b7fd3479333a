"""Shared steps of the lab integration tests (not a test module itself)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from monitor.cli import main as monitor_main
from monitor.dev.lab import admin, load, metrics
from monitor.dev.lab.admin import PartitionState
from monitor.dev.lab.cluster import Lab, NodeStatus
from monitor.dev.lab.config import LabConfig, LabMetadata
from monitor.dev.lab.ports import reserve_base_port
from monitor.dev.lab.readiness import registered_brokers

#: The Kafka versions and metadata modes of the version matrix (issue 18), besides the
#: session lab's default (the newest release): the newest 3.9 in ZooKeeper and in KRaft
#: mode, and 4.1 (the first 4.x that counts unclean elections correctly).
VERSION_LABS: list[tuple[str, LabMetadata]] = [
    ("3.9.2", "zookeeper"),
    ("3.9.2", "kraft"),
    ("4.1.2", "kraft"),
]


def run_lab(config: LabConfig) -> Iterator[Lab]:
    """Up, yield, down -- and kill by pid anything of the lab's still running."""
    lab = Lab(config)
    try:
        lab.up()
        yield lab
    finally:
        try:
            lab.down()
        finally:
            # Belt and braces: anything still carrying our marker is ours; kill it by pid.
            leftovers = our_jvms(lab.config.dir)
            for pid in leftovers:
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while our_jvms(lab.config.dir) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not leftovers, f"lab.down() left JVMs running: {leftovers}"


def version_lab(
    lab_dir: Path, first_port: int, version: str, metadata: LabMetadata
) -> Iterator[Lab]:
    """A lab of another Kafka version on its own reserved port block."""
    with reserve_base_port(first_port) as base_port:
        config = LabConfig(
            dir=lab_dir, base_port=base_port, kafka_version=version, metadata=metadata
        )
        yield from run_lab(config)


def heal(lab: Lab) -> None:
    """Every broker back: paused ones resumed, stopped ones restarted, all unfenced."""
    for node in lab.node_ids:
        status = lab.node_status(node)
        if status is NodeStatus.PAUSED:
            lab.resume(node)
        elif status is NodeStatus.STOPPED:
            lab.start(node, wait=False)
    lab.wait_ready(lab.node_ids, timeout=120)
    deadline = time.monotonic() + 60
    # (an admin request can still meet a broker that is not answering yet: then not yet)
    while registered_brokers(lab.bootstrap_servers) != set(lab.node_ids):
        assert time.monotonic() < deadline, "brokers did not all come back unfenced"
        time.sleep(0.5)


def our_jvms(lab_dir: Path) -> list[int]:
    """Pids whose command line carries this lab's marker (only JVMs the lab started)."""
    marker = f"-Dmonitor.lab.node={lab_dir}#"
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(part.decode(errors="replace").startswith(marker) for part in cmdline):
            pids.append(int(proc.name))
    return pids


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_partition(
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


def wait_metric(
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


def run_unclean_election_scenario(lab: Lab, tmp_path: Path, *, elr: bool) -> None:
    """RF 2, min ISR 1, unclean elections disabled on the topic.

    Leader 1, follower 2. Stop 2, keep writing to 1 (acks=1), crash 1, bring 2 back and
    force it to lead with ElectLeaders(UNCLEAN). Every record acknowledged while 2 was
    away is gone: count = leader LEO before the crash - follower LEO.

    ``elr`` says how the lab was formatted (eligible.leader.replicas.version 1 or 0); only
    the offline partition's ISR/ELR differ, the loss is the same.
    """
    topic = topic_name("unclean")
    acks = tmp_path / "acks.jsonl"
    admin.create_topic(lab.bootstrap_servers, topic, assignments={0: [1, 2]}, min_insync_replicas=1)

    replicated = load.produce(
        lab.bootstrap_servers, topic, rate=2000, count=150, acks="all", log_path=acks
    )
    assert replicated.acked == 150

    lab.stop(2)  # controlled shutdown: follower LEO frozen at 150 on disk
    wait_partition(lab, topic, lambda p: p.isr == (1,), "ISR = [1]")
    unreplicated = load.produce(
        lab.bootstrap_servers, topic, rate=2000, count=250, acks="1", log_path=acks
    )
    assert unreplicated.acked == 250
    leader_leo = wait_metric(lab.jmx_urls[1], topic, 0, 400)
    assert leader_leo == 400

    # Crashing 1 while 2 is down leaves 1 of 3 KRaft voters: metadata freezes until 2 is
    # back, so bring 2 back first and only then wait for the partition to go offline.
    lab.kill(1)
    lab.start(2)
    follower_leo = wait_metric(lab.jmx_urls[2], topic, 0, 150)
    assert follower_leo == 150
    offline = wait_partition(lab, topic, lambda p: p.leader == -1, "partition offline")
    if elr:
        # KIP-966: the ISR may empty; its last member is kept as eligible leader. The
        # stale follower is not eligible, so no clean election can pick broker 2.
        assert (offline.isr, offline.elr) == ((), (1,))
    else:
        # Classic KRaft: the ISR never empties; the dead leader stays its only member.
        assert (offline.isr, offline.elr) == ((1,), ())

    assert monitor_main(["lab", "unclean-elect", topic, "0", "--dir", str(lab.config.dir)]) == 0
    elected = wait_partition(lab, topic, lambda p: p.leader == 2, "broker 2 leads")
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
    # Each lost offset's acknowledgement, whole: the unreplicated run's 250 (the new ones at
    # the same offsets are intact).
    assert sorted(e.offset for e in part.lost_entries) == part.lost
    assert {e.run for e in part.lost_entries} == {unreplicated.run}
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
