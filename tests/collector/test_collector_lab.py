"""The collector against the real lab: faults show up in the events it publishes.

Each test records the collector's events (one round a second, in a background thread) while
it injects a fault with the lab, then checks the recorded events — and, for the unclean
election, replays them through the model and checks the loss against a consumer.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer

from monitor.collector import Collector, CollectorConfig
from monitor.contract.events import (
    AnyEvent,
    BrokerEvent,
    PartitionEvent,
    dumps,
    parse_event,
    partition_key,
    to_model,
)
from monitor.dev.lab.admin import create_topic, delete_topic, elect_leader
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.load import produce, verify
from monitor.model import ClusterModel, FindingKind, Severity
from tests.collector.helpers import Recording, readings
from tests.dev.lab.helpers import VERSION_LABS, heal, version_lab

#: First base port tried for the version labs (the session lab's block is 29092).
VERSION_BASE_PORT = 33092

pytestmark = pytest.mark.lab


def _partition(topic: str, pred: Callable[[PartitionEvent], bool]) -> Callable[[AnyEvent], bool]:
    return lambda e: isinstance(e, PartitionEvent) and e.topic == topic and pred(e)


#: Where each test runs (issue 18's version matrix), and how the collector reads it: the
#: session lab (the default version) with every broker's exporter and with none (Admin API
#: only); then a lab of each other version and mode, with exporters. Module-scoped: pytest
#: runs one lab's tests together and stops it before the next starts.
DEFAULT = pytest.param(("default", "jmx"), id="default")
ADMIN_ONLY = pytest.param(("default", "admin_only"), id="default-admin_only")
VERSIONS = [pytest.param((f"{v}-{m}", "jmx"), id=f"kafka-{v}-{m}") for v, m in VERSION_LABS]

#: Every test runs on the default cluster. The focused subset elsewhere (issue 18: "a
#: focused subset per version; say which") is what a version or a mode can change:
#: - every version: the forced unclean election's exact loss (the epoch record, ELR under
#:   KIP-966 on 4.x, ZooKeeper's election path), a topic deleted and recreated (topic ids,
#:   ZooKeeper's deletion) and the events published (every broker's exporter page read, the
#:   records keyed);
#: - Admin API only: what it reads instead of the exporters -- the unclean election's loss,
#:   a restarted broker's HW and epoch record as soon as it leads, the events published.
#: The paused follower, the killed leader and the restarted broker read the same metadata
#: the same way on every version (the ISR and leader come from the Admin API in both
#: modes), so they run on the default cluster only.
everywhere = pytest.mark.parametrize("cluster", [DEFAULT, ADMIN_ONLY, *VERSIONS], indirect=True)
every_version = pytest.mark.parametrize("cluster", [DEFAULT, *VERSIONS], indirect=True)
both_modes = pytest.mark.parametrize("cluster", [DEFAULT, ADMIN_ONLY], indirect=True)
default_only = pytest.mark.parametrize("cluster", [DEFAULT], indirect=True)


@pytest.fixture(scope="module")
def cluster(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    lab_session: Lab,  # named, not looked up: conftest.py releases it after its last user
) -> Iterator[tuple[Lab, str]]:
    which, mode = request.param
    if which == "default":
        yield lab_session, mode
        return
    version, metadata = next((v, m) for v, m in VERSION_LABS if f"{v}-{m}" == which)
    lab_dir = tmp_path_factory.mktemp(f"kafka-lab-{which}")
    for lab in version_lab(lab_dir, VERSION_BASE_PORT, version, metadata):
        yield lab, mode


@pytest.fixture
def lab(cluster: tuple[Lab, str]) -> Iterator[Lab]:
    """This module's lab, every broker healthy before and after the test."""
    heal(cluster[0])
    yield cluster[0]
    heal(cluster[0])


@pytest.fixture
def recording(lab: Lab, cluster: tuple[Lab, str]) -> Iterator[Recording]:
    """The collector as configured on most clusters (every broker's exporter), or with no
    exporter endpoint at all: the Admin API only (issue 18, a cluster without JMX)."""
    with Recording(lab, jmx_urls=None if cluster[1] == "jmx" else {}) as rec:
        rec.wait_rounds(1)
        yield rec


def _mode(recording: Recording) -> str:
    """A suffix for the test's topic: both modes run on the one session lab."""
    return "" if recording.config.jmx_urls else "-admin"


@default_only
def test_paused_follower_leaves_isr_and_returns(lab: Lab, recording: Recording) -> None:
    """SIGSTOP on a follower: its replica leaves the ISR (and its broker reads as not
    alive) in the collected events, and the model says isr_shrink of broker 3; SIGCONT
    brings it back into the ISR. With exporters, every broker's log end is read."""
    topic = "col-pause" + _mode(recording)
    create_topic(lab.bootstrap_servers, topic, assignments={0: [1, 2, 3]}, min_insync_replicas=2)
    recording.wait_for("with full ISR", _partition(topic, lambda e: sorted(e.isr) == [1, 2, 3]))
    if recording.config.jmx_urls:
        for b in (1, 2, 3):
            recording.wait_for(
                f"broker {b}'s log end",
                lambda e, b=b: any(r.topic == topic and r.broker == b for r in readings([e])),
            )
    lab.pause(3)
    recording.wait_for(
        "broker 3 not alive", lambda e: isinstance(e, BrokerEvent) and e.broker == 3 and not e.alive
    )
    shrunk = recording.wait_for("ISR without 3", _partition(topic, lambda e: 3 not in e.isr))
    assert isinstance(shrunk, PartitionEvent) and shrunk.leader == 1
    lab.resume(3)
    recording.wait_for("ISR with 3 again", _partition(topic, lambda e: 3 in e.isr), timeout=90)
    model = ClusterModel()
    found = [f for ev in recording.snapshot() for f in model.apply(to_model(ev))]
    shrinks = [f for f in found if f.topic == topic and f.kind == FindingKind.ISR_SHRINK]
    assert [f.broker for f in shrinks] == [3], [str(f.kind) for f in found if f.topic == topic]


@default_only
def test_killed_leader_yields_new_leader_and_higher_epoch(lab: Lab, recording: Recording) -> None:
    """SIGKILL on the leader's broker: a partition event with another leader, higher epoch."""
    topic = "col-kill" + _mode(recording)
    create_topic(lab.bootstrap_servers, topic, assignments={0: [2, 3, 1]}, min_insync_replicas=2)
    before = recording.wait_for("led by 2", _partition(topic, lambda e: e.leader == 2))
    assert isinstance(before, PartitionEvent)
    lab.kill(2)
    after = recording.wait_for(
        "a new leader", _partition(topic, lambda e: e.leader not in (None, 2)), timeout=90
    )
    assert isinstance(after, PartitionEvent)
    assert after.leader_epoch > before.leader_epoch
    assert after.leader in (3, 1)
    # The new epoch's start offset, from the new leader (nothing was written: 0).
    started = recording.wait_for(
        "the epoch's start offset",
        _partition(
            topic,
            lambda e: e.leader_epoch == after.leader_epoch and e.epoch_start_offset is not None,
        ),
    )
    assert isinstance(started, PartitionEvent) and started.epoch_start_offset == 0


@both_modes
def test_a_restarted_broker_is_read_as_soon_as_it_leads(lab: Lab, recording: Recording) -> None:
    """Found by the demo: the client routes requests by its own broker list, which it
    refreshes every 5 minutes or after a connection error. Refreshed while broker 2 was
    down, the list lacked broker 2 after its restart, and the first 15 s of its leadership
    carried no HW and no epoch record (the loss was judged on a stale sample: under-reported).
    Now the first rounds of its leadership read both."""
    topic = "col-rejoin" + _mode(recording)
    create_topic(lab.bootstrap_servers, topic, assignments={0: [2, 1]}, min_insync_replicas=1)
    recording.wait_for("led by 2", _partition(topic, lambda e: e.leader == 2))
    produce(lab.bootstrap_servers, topic, rate=400, count=100, acks="all")
    cluster = recording.collector._admin._manager.cluster  # type: ignore[union-attr]
    # The trap: the client's list taken while 2 is down, and still without 2 once 2 is back
    # in the ISR. Something else can refresh the list meanwhile (CI saw it once on a 3.9
    # KRaft lab): then the scenario did not happen -- set it again, a few times at most.
    for _attempt in range(3):
        since = len(recording.snapshot())
        lab.stop(2)
        recording.wait_for(
            "led by 1", _partition(topic, lambda e: e.leader == 1), timeout=90, since=since
        )
        deadline = time.monotonic() + 30
        cluster.request_update()  # what a connection error does: the list is taken without 2
        while cluster.broker_metadata(2) is not None:
            assert time.monotonic() < deadline, "the client's broker list still has broker 2"
            time.sleep(0.2)
        lab.start(2)
        recording.wait_for(
            "ISR [1, 2]", _partition(topic, lambda e: sorted(e.isr) == [1, 2]), 90, since=since
        )
        if cluster.broker_metadata(2) is None:
            break
    assert cluster.broker_metadata(2) is None  # nothing has refreshed it: the trap is set
    since = len(recording.snapshot())
    elect_leader(lab.bootstrap_servers, topic, 0, unclean=False, timeout_s=60)  # back to 2
    led = recording.wait_for(
        "led by 2 again", _partition(topic, lambda e: e.leader == 2), since=since
    )
    assert isinstance(led, PartitionEvent)
    recording.wait_rounds(3)
    mine = [
        e
        for e in recording.snapshot(since)
        if isinstance(e, PartitionEvent) and e.topic == topic and e.leader_epoch == led.leader_epoch
    ]
    assert any(e.high_watermark == 100 for e in mine), mine
    assert any(e.epoch_start_offset == 100 for e in mine), mine


@everywhere
def test_unclean_election_loss_matches_what_a_consumer_reads(
    lab: Lab, recording: Recording, tmp_path: Path
) -> None:
    """Forced unclean election of a lagging replica: replaying the collected events reports
    unclean_election and committed_data_loss with exactly the count a consumer confirms."""
    topic = "col-unclean" + _mode(recording)
    acks = tmp_path / "acks.jsonl"
    create_topic(lab.bootstrap_servers, topic, assignments={0: [1, 2]}, min_insync_replicas=1)
    produce(lab.bootstrap_servers, topic, rate=400, count=200, acks="all", log_path=acks)
    # Broker 2's LEO must be sampled at 200 before it goes away.
    recording.wait_for("HW 200", _partition(topic, lambda e: (e.high_watermark or 0) >= 200))
    recording.wait_rounds(2)
    lab.stop(2)  # controlled shutdown: the follower's log is frozen at 200
    recording.wait_for("ISR [1]", _partition(topic, lambda e: e.isr == [1]), timeout=90)
    produce(lab.bootstrap_servers, topic, rate=400, count=300, acks="1", log_path=acks)
    recording.wait_for("HW 500", _partition(topic, lambda e: (e.high_watermark or 0) >= 500))
    # Killing 1 while 2 is down would leave 1 of 3 KRaft voters and freeze the metadata:
    # bring 2 back first, then the partition goes offline (ISR [], ELR [1] under KIP-966).
    lab.kill(1)
    lab.start(2)
    recording.wait_for("offline", _partition(topic, lambda e: e.leader is None), timeout=90)
    recording.wait_for(
        "broker 2 back", lambda e: isinstance(e, BrokerEvent) and e.broker == 2 and e.alive
    )
    recording.wait_rounds(2)
    elect_leader(lab.bootstrap_servers, topic, 0, unclean=True)
    recording.wait_for("led by 2", _partition(topic, lambda e: e.leader == 2))
    # The new leader's own record of where its epoch began (OffsetsForLeaderEpoch).
    started = recording.wait_for(
        "the epoch's start offset",
        _partition(topic, lambda e: e.leader == 2 and e.epoch_start_offset is not None),
    )
    assert isinstance(started, PartitionEvent) and started.epoch_start_offset == 200
    recording.wait_rounds(1)

    report = verify(lab.bootstrap_servers, topic, acks, settle_s=5)
    assert report.acknowledged == 500
    assert report.lost_count == 300, report.render()

    model = ClusterModel()
    findings = [f for ev in list(recording.events) for f in model.apply(to_model(ev))]
    mine = [f for f in findings if f.topic == topic]
    kinds = {f.kind for f in mine}
    assert FindingKind.UNCLEAN_ELECTION in kinds, [str(f.kind) for f in mine]
    loss = next(f for f in mine if f.kind == FindingKind.COMMITTED_DATA_LOSS)
    assert loss.details["lost_count"] == report.lost_count
    assert (loss.details["lost_from"], loss.details["lost_to"]) == (200, 500)
    assert loss.details["leo_sampled"] == "epoch"  # exact, not a sample
    if not recording.config.jmx_urls:
        # Admin API only: no replica sample at all, and still the exact loss.
        assert not readings(recording.events)


@every_version
def test_a_topic_deleted_and_recreated_is_a_new_history(lab: Lab, recording: Recording) -> None:
    """The churn issue's recreation on every version and mode of the matrix: the new
    incarnation has a new topic id (ZooKeeper clusters have topic ids since 2.8), the model
    says topic_deleted (or topic_recreated, whichever it saw first) and nothing critical."""
    topic = "col-recreate" + _mode(recording)
    create_topic(lab.bootstrap_servers, topic, assignments={0: [1, 2, 3]}, min_insync_replicas=2)
    produce(lab.bootstrap_servers, topic, rate=400, count=200, acks="all")
    recording.wait_for("HW 200", _partition(topic, lambda e: (e.high_watermark or 0) >= 200))
    delete_topic(lab.bootstrap_servers, topic)
    recording.wait_rounds(2)
    create_topic(lab.bootstrap_servers, topic, assignments={0: [1, 2, 3]}, min_insync_replicas=2)
    produce(lab.bootstrap_servers, topic, rate=400, count=100, acks="all")
    recording.wait_for("HW 100 again", _partition(topic, lambda e: e.high_watermark == 100))
    recording.wait_rounds(3)
    events = recording.snapshot()
    ids = {e.topic_id for e in events if isinstance(e, PartitionEvent) and e.topic == topic}
    assert len(ids) == 2 and None not in ids, ids
    model = ClusterModel()
    mine = [f for ev in events for f in model.apply(to_model(ev)) if f.topic == topic]
    kinds = {f.kind for f in mine}
    assert kinds & {FindingKind.TOPIC_DELETED, FindingKind.TOPIC_RECREATED}, kinds
    assert not [f for f in mine if f.severity is Severity.CRITICAL], [str(f.kind) for f in mine]


@everywhere
def test_published_events_are_valid_and_keyed(lab: Lab, cluster: tuple[Lab, str]) -> None:
    """publish(): every record on the events topic parses under the contract, keyed by
    ``partition_key`` (or cluster/broker/ID, cluster/topic); the collector's own /metrics
    counts it."""
    jmx = cluster[1] == "jmx"
    topic = "__replication_monitor_events_test" + ("" if jmx else "_admin")
    create_topic(
        lab.bootstrap_servers, topic, partitions=3, replication_factor=3, min_insync_replicas=2
    )
    config = CollectorConfig(
        cluster="lab",
        kafka={"bootstrap_servers": lab.bootstrap_servers},
        jmx_urls=lab.jmx_urls if jmx else {},
        events_topic=topic,
        events_on_watched_cluster=True,  # the lab is both here
        metrics_port=0,
    )
    collector = Collector(config)
    collector.start()
    try:
        res = collector.round()
        sent = collector.publish(res.events)
        port = collector._metrics_server.bound_port
        health = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    finally:
        collector.stop()
    text = health.decode()
    assert "kafka_replication_collector_rounds_total 1.0" in text
    if jmx:  # (without exporters, no broker's page is read)
        for b in (1, 2, 3):
            assert f'kafka_replication_collector_broker_up{{broker="{b}"}} 1.0' in text
        # Every broker's log ends read off its page: the MBeans are the same on every
        # version of the matrix.
        read = readings(res.events)
        assert {r.broker for r in read} == {1, 2, 3}, sorted({r.broker for r in read})
    produced = sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("kafka_replication_collector_events_produced_total{")
    )
    assert produced == sent
    assert sent == len(res.events) > 0
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=lab.bootstrap_servers,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    try:
        records = list(consumer)
    finally:
        consumer.close()
    assert len(records) == sent
    for r in records:
        ev = parse_event(r.value)
        key = r.key.decode()
        if isinstance(ev, BrokerEvent):
            assert key == f"lab/broker/{ev.broker}"
        elif hasattr(ev, "partition"):  # what the job routes by without parsing the record
            assert key == partition_key("lab", ev.topic, ev.partition)
        else:
            assert key == f"lab/{ev.topic}"
        assert json.loads(r.value) == json.loads(dumps(ev))
