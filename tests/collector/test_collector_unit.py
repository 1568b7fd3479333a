"""The collector's pure parts: exporter parsing, event building, configuration errors."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from monitor.collector.admin import PartitionMetadata, TopicDurability
from monitor.collector.build import (
    broker_event,
    event_key,
    partition_events,
    replica_events,
    topic_config_events,
)
from monitor.collector.config import CollectorConfig
from monitor.collector.jmx import JmxNames, parse
from monitor.connection import KafkaConnection
from monitor.contract.events import dumps, parse_event
from tests.collector.helpers import offline_collector, readings

PAGE = """\
# HELP kafka_log_log_end_offset Log end offset
# TYPE kafka_log_log_end_offset gauge
kafka_log_log_end_offset{partition="0",topic="orders"} 1500.0
kafka_log_log_end_offset{partition="1",topic="orders"} 7.0
kafka_log_log_end_offset{partition="0",topic="__replication_monitor_events"} 99.0
kafka_log_log_start_offset{partition="0",topic="orders"} 100.0
kafka_server_replica_fetcher_lag{client_id="Fetcher-0-2",partition="1",topic="orders"} 3.0
kafka_server_replica_manager_isrshrinkspersec_total 4.0
kafka_server_replica_manager_underreplicatedpartitions 1.0
kafka_controller_activecontrollercount 1.0
kafka_controller_stats_uncleanleaderelectionspersec_total 2.0
kafka_log_log_end_offset{partition="x",topic="broken"} 5.0
kafka_log_log_end_offset{partition="2",topic="orders"} NaN
"""


def test_parse_picks_the_needed_series_and_skips_broken_lines() -> None:
    s = parse(PAGE, JmxNames())
    assert s.leo == {("orders", 0): 1500, ("orders", 1): 7, ("__replication_monitor_events", 0): 99}
    assert s.log_start == {("orders", 0): 100}
    assert s.fetch_lag == {("orders", 1): 3}
    assert s.counters == {
        "isr_shrinks_total": 4,
        "under_replicated_partitions": 1,
        "active_controller": 1,
        "unclean_elections_total": 2,
    }
    assert s.dropped == {"unreadable": 1, "not_finite": 1}  # partition "x"; NaN


def test_built_events_validate_and_carry_the_readings() -> None:
    s = parse(PAGE, JmxNames())
    reps = replica_events("c", 2, 1_000, s, keep={"orders"})
    assert sorted((e.topic, e.partition, e.log_end_offset) for e in reps) == [
        ("orders", 0, 1500),
        ("orders", 1, 7),
    ]
    assert next(e for e in reps if e.partition == 1).fetch_lag == 3
    meta = [PartitionMetadata("orders", 0, None, 4, (1, 2), (), (), (1,))]
    (pe,) = partition_events("c", 1_000, meta, {("orders", 0): 42})
    assert (pe.leader, pe.eligible_leader_replicas, pe.high_watermark) == (None, [1], 42)
    (tc,) = topic_config_events("c", 1_000, {"orders": TopicDurability(2, False)}, meta)
    assert (tc.replication_factor, tc.min_insync_replicas) == (2, 2)
    assert broker_event("c", 3, 1_000, None).alive is False
    be = broker_event("c", 2, 1_000, s)
    assert be.alive and be.active_controller and be.unclean_elections_total == 2
    assert event_key(pe) == b"krm1/0/orders/c" and event_key(be) == b"c/broker/2"


def test_what_the_collector_publishes_its_own_contract_accepts() -> None:
    """The wire form drops nulls (``dumps``): an offline partition's event has no ``leader``
    key at all, and must still be valid (found by the demo: the Spark job dead-lettered
    every offline partition's event while the in-process path never serialised them)."""
    s = parse(PAGE, JmxNames())
    meta = [
        PartitionMetadata("orders", 0, None, 4, (1, 2), (), (1,), (1,)),
        PartitionMetadata("orders", 1, 2, 7, (1, 2), (2,), (), None),
    ]
    events: list[object] = [
        *partition_events("c", 1_000, meta, {("orders", 1): 42}),
        *replica_events("c", 2, 1_000, s, keep={"orders"}),
        *topic_config_events("c", 1_000, {"orders": TopicDurability(2, False)}, meta),
        broker_event("c", 3, 1_000, None),
        broker_event("c", 2, 1_000, s),
    ]
    for ev in events:
        assert isinstance(ev, BaseModel)
        wire = dumps(ev)
        assert parse_event(wire.encode()) == ev, wire
    assert '"leader"' not in dumps(events[0])  # type: ignore[arg-type]


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ValidationError, match="jmx_urls"):
        CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}, jmx_urls={1: "ftp://x"})
    with pytest.raises(ValidationError, match="interval_s"):
        CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}, interval_s=0)
    with pytest.raises(ValidationError, match=r"unknown_key"):
        CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}, unknown_key=1)  # type: ignore[call-arg]
    # A round's deadline shorter than a page's would cut every page slower than it,
    # whatever jmx_timeout_s says: named, not silently in force.
    with pytest.raises(ValidationError, match=r"round_timeout_s .* jmx_timeout_s"):
        CollectorConfig(
            kafka={"bootstrap_servers": "127.0.0.1:9092"}, jmx_timeout_s=10, round_timeout_s=4
        )
    assert (
        CollectorConfig(
            kafka={"bootstrap_servers": "127.0.0.1:9092"}, jmx_timeout_s=10, round_timeout_s=10
        ).round_timeout_s
        == 10
    )


def test_secrets_never_print() -> None:
    """A password passes through to the client but not into repr/str/JSON of the config."""
    k = KafkaConnection(
        bootstrap_servers="k:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="mon",
        sasl_password="hunter2",  # type: ignore[arg-type]
    )
    cfg = CollectorConfig(kafka=k)
    for text in (repr(cfg), str(cfg), cfg.model_dump_json()):
        assert "hunter2" not in text
    assert k.client_kwargs()["sasl_plain_password"] == "hunter2"


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_COLLECTOR_CLUSTER", "prod-eu")
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__BOOTSTRAP_SERVERS", "k1:9092,k2:9092")
    cfg = CollectorConfig()
    assert cfg.cluster == "prod-eu"
    assert cfg.kafka.client_kwargs()["bootstrap_servers"] == ["k1:9092", "k2:9092"]


def test_a_round_without_metadata_keeps_filtering_by_the_last_topics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failed metadata read (a SIGSTOPped broker can hang the Admin client) must not let
    broker-internal logs through as partitions: found by the soak, where KRaft's
    ``__cluster_metadata`` opened a stale_telemetry that never resolved."""
    from monitor.collector.admin import Reads

    page = PAGE + 'kafka_log_log_end_offset{partition="0",topic="__cluster_metadata"} 9.0\n'
    rounds = iter([True, False])

    def fake_metadata(admin: object, exclude: object, internal: bool, reads: Reads) -> bool:
        if next(rounds):
            reads.partitions.append(PartitionMetadata("orders", 0, 1, 1, (1, 2), (1, 2), (), ()))
        else:
            reads.errors.append(("metadata", "timed out"))
        return True

    c = offline_collector(monkeypatch, page, read_metadata=fake_metadata)
    try:
        for _ in range(2):
            res = c.round()
            topics = {e.topic for e in readings(res.events)}
            assert "__cluster_metadata" not in topics, topics
            assert "orders" in topics
    finally:
        c._pool.shutdown()


def test_without_exporters_brokers_are_said_alive_as_the_metadata_lists_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Admin-API-only collection (issue 18): no replica events; a broker event for every
    broker listed or holding a replica, alive as listed (broker 3 holds a replica and is
    not listed: stopped, or fenced), with no counters; the partition events as always."""
    from monitor.collector.admin import Reads
    from monitor.contract.events import BrokerEvent, PartitionEvent

    def metadata(admin: object, exclude: object, internal: bool, reads: Reads) -> bool:
        reads.partitions.append(PartitionMetadata("orders", 0, 1, 4, (1, 3), (1,), (3,), ()))
        reads.listed = {"orders"}
        return True

    c = offline_collector(
        monkeypatch, PAGE, brokers=2, read_metadata=metadata, registered={1, 2}, jmx=False
    )
    try:
        res = c.round()
    finally:
        c._pool.shutdown()
    assert not readings(res.events)
    brokers = {e.broker: e for e in res.events if isinstance(e, BrokerEvent)}
    assert {b: e.alive for b, e in brokers.items()} == {1: True, 2: True, 3: False}
    assert all(e.isr_shrinks_total is None and e.started_at is None for e in brokers.values())
    (part,) = [e for e in res.events if isinstance(e, PartitionEvent)]
    assert (part.leader, part.leader_epoch, part.isr) == (1, 4, [1])


def test_a_rounds_jmx_samples_share_one_stamp(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the soak: stamped before each request, a slow leader's older answer carried a
    later time than its follower's fresher one, and the model saw the follower "ahead" (a
    false log_divergence). Every JMX sample of a round now carries the round's start, however
    long each broker takes to answer."""
    from monitor.contract.events import BrokerEvent

    ticks = iter(range(1_000, 100_000, 7))  # every clock read is later than the one before
    c = offline_collector(monkeypatch, PAGE, brokers=3, clock=lambda: next(ticks))
    try:
        res = c.round()
    finally:
        c._pool.shutdown()
    jmx_events = [*(e for e in res.events if isinstance(e, BrokerEvent)), *readings(res.events)]
    assert {e.broker for e in jmx_events} == {1, 2, 3}
    assert len({e.observed_at for e in jmx_events}) == 1, sorted(
        (e.broker, e.observed_at) for e in jmx_events
    )


def test_reassignments_are_said_while_they_run_and_once_when_they_end() -> None:
    """Partition events carry adding / removing replicas for a running reassignment, ``[]``
    once when it ended, nothing otherwise -- and nothing at all after a failed read (the
    model keeps what it knew rather than take a failure for "no reassignment")."""
    from monitor.collector import collector as mod
    from monitor.collector.admin import PartitionMetadata, Reads
    from monitor.collector.build import partition_events

    c = mod.Collector(CollectorConfig(cluster="c", kafka={"bootstrap_servers": "127.0.0.1:1"}))
    parts = [PartitionMetadata("t", p, 1, 3, (1, 2, 4, 3), (1, 2, 3), (), None) for p in (0, 1)]

    def events(moving: dict[tuple[str, int], tuple[list[int], list[int]]] | None) -> list:
        reads = Reads(partitions=parts, reassignments=moving)
        return [
            (e.partition, e.adding_replicas, e.removing_replicas)
            for e in partition_events("c", 0, parts, {}, None, c._reassignments(reads))
        ]

    running = {("t", 0): ([4], [3])}
    assert events(running) == [(0, [4], [3]), (1, None, None)]
    assert events(None) == [(0, None, None), (1, None, None)]  # the read failed
    assert events({}) == [(0, [], []), (1, None, None)]  # ended: said once
    assert events({}) == [(0, None, None), (1, None, None)]


def test_topic_ids_as_kafka_prints_them() -> None:
    import uuid

    from monitor.collector.admin import topic_id

    u = uuid.UUID("90ea93ea-4a95-4270-b898-0f3e714c53c1")
    assert topic_id(u) == "kOqT6kqVQnC4mA8-cUxTwQ" == topic_id(str(u))
    assert topic_id(uuid.UUID(int=0)) is None  # brokers without topic ids say zero
    assert topic_id(None) is None and topic_id("") is None


def test_a_topic_is_said_deleted_only_by_a_complete_metadata_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``topic_deleted`` (with the last id seen) once, when a complete read no longer lists a
    topic the previous complete read listed; never from a read with metadata errors (a
    topic it could not describe is not gone)."""
    from monitor.collector.admin import Reads
    from monitor.contract.events import TopicDeletedEvent

    tid = "kDqT6kqVQnC4mA8-cUxTwQ"
    rounds = iter(
        [
            ({"orders", "gone"}, []),
            ({"orders"}, [("metadata", "gone: error 3")]),  # incomplete: says nothing
            ({"orders"}, []),  # complete: gone is gone
            ({"orders"}, []),  # once
        ]
    )

    def fake_metadata(admin: object, exclude: object, internal: bool, reads: Reads) -> bool:
        listed, errors = next(rounds)
        reads.listed = listed
        reads.errors.extend(errors)
        for t in sorted(listed):
            reads.partitions.append(
                PartitionMetadata(t, 0, 1, 1, (1,), (1,), (), (), tid if t == "gone" else None)
            )
        return True

    c = offline_collector(monkeypatch, PAGE, read_metadata=fake_metadata)
    try:
        said = [
            [(e.topic, e.topic_id) for e in c.round().events if isinstance(e, TopicDeletedEvent)]
            for _ in range(4)
        ]
    finally:
        c._pool.shutdown()
    assert said == [[], [], [("gone", tid)], []]


def test_a_moving_partition_keeps_its_topics_replication_factor() -> None:
    """Found by the soak: while a reassignment copies, the metadata lists the old and the new
    replicas; the replicas being added are not the topic's replication factor (an RF 2 topic
    with min ISR 1 read as RF 3, and durability_risk opened for the move's duration)."""
    meta = [
        PartitionMetadata("moving", 0, 1, 3, (1, 3, 2), (1, 2), (), ()),
        PartitionMetadata("moving", 1, 2, 3, (2, 1), (2, 1), (), ()),
    ]
    durability = {"moving": TopicDurability(1, False)}
    (tc,) = topic_config_events("c", 1, durability, meta, {("moving", 0): ([3], [2])})
    assert tc.replication_factor == 2
    (blind,) = topic_config_events("c", 1, durability, meta)  # the move's read failed
    assert blind.replication_factor == 3


def test_a_move_that_ends_between_the_reads_is_still_a_move(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by the soak: the metadata still listed the old and the new replicas while the
    one later reassignment read no longer listed the move -- under_replicated and an RF one
    too high (durability_risk). The reads on both sides of the metadata say it ran."""
    from monitor.collector import collector as mod
    from monitor.collector.admin import Reads
    from monitor.contract.events import PartitionEvent, TopicConfigEvent

    answers = iter([{("moving", 0): ([1], [3])}, {}])  # before the metadata, after it

    def reassignments(admin: object, reads: Reads) -> None:
        reads.reassignments = next(answers)

    def metadata(admin: object, exclude: object, internal: bool, reads: Reads) -> bool:
        reads.listed = {"moving"}
        reads.partitions.append(PartitionMetadata("moving", 0, 2, 5, (2, 3, 1), (2, 3), (), ()))
        return True

    c = offline_collector(monkeypatch, PAGE, read_metadata=metadata)
    monkeypatch.setattr(mod, "read_reassignments", reassignments)
    durability = {"moving": TopicDurability(1, False)}
    monkeypatch.setattr(mod, "read_topic_configs", lambda admin, topics, reads: durability)
    try:
        events = c.round().events
    finally:
        c._pool.shutdown()
    (pe,) = [e for e in events if isinstance(e, PartitionEvent)]
    (tc,) = [e for e in events if isinstance(e, TopicConfigEvent)]
    assert (pe.adding_replicas, pe.removing_replicas) == ([1], [3])
    assert tc.replication_factor == 2


def test_the_collectors_metrics_say_its_version() -> None:
    from importlib import metadata

    from prometheus_client import generate_latest

    from monitor.collector.collector import _Health

    text = generate_latest(_Health().registry).decode()
    version = metadata.version("kafka-replication-monitor")
    assert f'kafka_replication_collector_build_info{{version="{version}"}} 1.0' in text


def test_a_round_asks_an_unanswering_controller_for_moves_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The running moves are read before and after the metadata; when the first read fails
    (a paused controller: it timed out), the second is not made -- it would wait as long
    again, and in the CI short soak the round outlasted the model's stale_after_ms. The
    failure is said once; the round's events carry no moves (unknown: the model keeps what
    it knew)."""
    from monitor.collector import collector as mod
    from monitor.collector.admin import Reads
    from monitor.contract.events import PartitionEvent

    asked: list[int] = []

    def unanswered(admin: object, reads: Reads) -> None:
        asked.append(1)
        reads.errors.append(("reassignments", "RequestTimedOutError('timed out')"))

    def metadata(admin: object, exclude: object, internal: bool, reads: Reads) -> bool:
        reads.partitions.append(PartitionMetadata("orders", 0, 1, 4, (1, 2), (1, 2), (), ()))
        reads.listed = {"orders"}
        return True

    c = offline_collector(monkeypatch, PAGE, read_metadata=metadata)
    monkeypatch.setattr(mod, "read_reassignments", unanswered)
    try:
        res = c.round()
    finally:
        c._pool.shutdown()
    assert len(asked) == 1
    assert [e for e in res.errors if e[0] == "reassignments"] == [
        ("reassignments", "RequestTimedOutError('timed out')")
    ]
    (part,) = [e for e in res.events if isinstance(e, PartitionEvent)]
    assert part.adding_replicas is None and part.removing_replicas is None


def test_the_page_deadline_follows_the_interval_and_the_pages() -> None:
    """Unset, a page's deadline is the interval, longer for a broker whose pages are slow
    (three times its slowest recent one), never more than jmx_timeout_max_s -- a fixed
    3 s failed every page of exporter rules people run (1.5-2.9 s on a small lab broker).
    A set jmx_timeout_s is the deadline; a set round_timeout_s caps either."""
    k = {"bootstrap_servers": "127.0.0.1:9092"}
    cfg = CollectorConfig(kafka=k)
    assert cfg.jmx_timeout_s is None and cfg.round_timeout_s is None
    assert cfg.page_deadline([]) == 10  # a first page: the longest one may take
    assert cfg.page_deadline([0.08, 0.1]) == 5  # fast rules: the interval
    assert cfg.page_deadline([2.9, 1.5]) == 8.7  # broad rules: three times the slowest
    assert cfg.page_deadline([9.0]) == 10  # capped
    assert CollectorConfig(kafka=k, interval_s=2).page_deadline([0.1]) == 2
    assert CollectorConfig(kafka=k, jmx_timeout_s=3).page_deadline([2.9]) == 3
    assert CollectorConfig(kafka=k, round_timeout_s=4).page_deadline([2.9]) == 4


def test_a_codec_whose_package_is_missing_is_refused_by_name() -> None:
    """lz4 and snappy need packages the monitor does not install: refused when the settings
    are read, naming the setting and the package -- not a producer error at start."""
    from kafka import codec

    k = {"bootstrap_servers": "127.0.0.1:9092"}
    assert CollectorConfig(kafka=k).events_compression == "zstd" and codec.has_zstd()
    assert not codec.has_lz4(), "lz4 is installed here: this test needs a codec that is not"
    with pytest.raises(ValidationError, match=r"events_compression[\s\S]*lz4 needs the lz4"):
        CollectorConfig(kafka=k, events_compression="lz4")
