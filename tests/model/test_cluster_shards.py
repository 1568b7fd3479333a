"""Several collectors on one cluster (issue 21, item 4): what the model forgets as absent.

Collectors split a cluster by topic (``shard = "i/N"``, docs/collector.md): each sends the
``partition`` events of its own topics, and every one sends every topic's ``topic_config``,
every ``topic_deleted`` and every broker's report. When one collector dies, its topics'
partitions fall silent while every topic's configuration goes on: they must go *stale*
(said), never be forgotten as deleted (an outage hidden). ``ClusterModel._forget_absent``
forgets a partition only when its topic left the topic reads, or when partitions of its own
topic went on being listed ``forget_absent_ms`` after it.

The scenario's file is ``tests/data/one_of_two_collectors_dies.jsonl``
(``python -m tests.model.test_cluster_shards`` writes it).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable

import pytest

from monitor.contract.events import to_model, validate_event
from monitor.dev.rounds import fold
from monitor.dev.testing import Timeline
from monitor.model import ClusterModel, Finding, FindingKind, ModelConfig
from monitor.query.replay import replay
from tests.scenarios import Scenario, label, matches, run

SECOND = 1_000
MINUTE = 60 * SECOND


def _round(tl: Timeline, topic: str, partition: int, hw: int) -> None:
    """One partition's round as ``monitor collect`` stamps it: every broker's sample at the
    round's start, the metadata 2 ms later (RF 3, led by broker 1, every replica in sync)."""
    for b in (1, 2, 3):
        tl.replica(b, leo=hw, hw=hw if b == 1 else None, topic=topic, partition=partition)
    tl.advance(2)
    tl.meta(leader=1, epoch=1, replicas=[1, 2, 3], isr=[1, 2, 3], hw=hw, topic=topic,
            partition=partition)  # fmt: skip
    tl.advance(-2)


def _collector_round(
    tl: Timeline, mine: dict[str, int], hw: int, configs: tuple[str, ...] = ("a", "b")
) -> None:
    """One collector's round: every broker's report and every topic's configuration (what
    each collector of a shared cluster sends), and the rounds of its own topics'
    partitions (``mine``: topic -> partitions)."""
    for b in (1, 2, 3):
        tl.broker(b)
    for topic in configs:
        tl.config(rf=3, min_isr=2, topic=topic)
    for topic, count in mine.items():
        for p in range(count):
            _round(tl, topic, p, hw)


def one_of_two_collectors_dies() -> Timeline:
    """Two collectors share a cluster by topic: shard 0/2 sends ``a``'s partitions, shard
    1/2 ``b``'s, 2.5 s apart; both send both topics' configurations and the brokers'
    reports. After four rounds collector 1/2 dies; 0/2 goes on for eleven minutes, a round
    every 10 s -- past ``forget_absent_ms`` (10 minutes)."""
    tl = Timeline(topic="a")
    hw = 1_000
    for _ in range(4):
        _collector_round(tl, {"a": 2}, hw)
        tl.advance(2_500)
        _collector_round(tl, {"b": 2}, hw)
        tl.advance(2_500)
        hw += 100
    for _ in range(66):
        _collector_round(tl, {"a": 2}, hw)
        tl.advance(10 * SECOND)
        hw += 100
    return tl


SCENARIO = Scenario(
    "one_of_two_collectors_dies",
    "Of two collectors sharing a cluster by topic, the one reading topic b dies: b's "
    "partitions go stale (their collector's outage, said) and stay stale; nothing is "
    "forgotten, since b is still in the topic reads of the collector that lives and none "
    "of b's partitions is listed any more (today: the cluster's newest topic_config is the "
    "clock, so after forget_absent_ms b/0 and b/1 are forgotten as deleted -- their "
    "stale_telemetry resolves: an outage hidden).",
    one_of_two_collectors_dies,
    expect=["stale_telemetry:open b/0", "stale_telemetry:open b/1"],
    forbid=[
        "stale_telemetry:resolved b/*",
        "topic_deleted",
        "stale_telemetry a/*",
        "stale_telemetry broker*",
    ],
)

SCENARIOS = [SCENARIO]


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_scenario_file_is_in_sync(sc: Scenario) -> None:
    """The committed JSON-lines file is exactly what the scenario builds."""
    assert sc.path.read_text() == sc.build().jsonl(), (
        "run: python -m tests.model.test_cluster_shards"
    )


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_scenario_findings(sc: Scenario) -> None:
    """``monitor replay`` of the file: every expected finding, none of the forbidden."""
    labels = [label(f) for f in run(sc)]
    missing = [e for e in sc.expect if e not in labels]
    assert not missing, f"{sc.name}: missing {missing}; got {labels}"
    forbidden = [lb for lb in labels for fb in sc.forbid if matches(fb, lb)]
    assert not forbidden, f"{sc.name}: forbidden {forbidden}"


def test_the_scenario_as_round_records_gives_the_same_findings() -> None:
    """What the collectors send by default (one round record a partition and round) and
    the file's replica events: the same findings, byte for byte (as tests/model/test_rounds
    proves for the other scenarios)."""

    def replayed(events: list[dict[str, object]]) -> list[str]:
        found: list[Finding] = []
        lines = [json.dumps(e).encode() for e in events]
        replay(lines, ClusterModel(), found.append, lambda n, r: None)
        return [json.dumps(f.to_dict(), sort_keys=True) for f in found]

    events = one_of_two_collectors_dies().events
    folded = fold(events)
    assert len(folded) < len(events)
    assert replayed(folded) == replayed(events)


def _ticked(tl: Timeline, config: ModelConfig | None = None, step: int = 10 * SECOND) -> tuple[
    ClusterModel, list[Finding]
]:  # fmt: skip
    """The timeline applied in order with a tick every ``step`` of event time, as a replay."""
    m = ClusterModel(config)
    found: list[Finding] = []
    next_tick = -1
    for ev in tl.events:
        t = ev["observed_at"]
        if next_tick < 0:
            next_tick = t + step
        while t >= next_tick:
            found += m.tick(next_tick)
            next_tick += step
        found += m.apply(to_model(validate_event(ev)))
    found += m.tick(tl.now)
    return m, found


def test_a_dead_collectors_partitions_stay_in_the_model() -> None:
    """Eleven minutes after collector 1/2 died, b's partitions are still held (stale), none
    was taken as forgotten, and b's topic state is kept."""
    tl = one_of_two_collectors_dies()
    m, found = _ticked(tl)
    assert {k for k in m.partitions} == {
        ("lab", "a", 0), ("lab", "a", 1), ("lab", "b", 0), ("lab", "b", 1)
    }  # fmt: skip
    assert set(m.topics) == {("lab", "a"), ("lab", "b")}
    assert m.take_forgotten() == ([], [])
    stale = {
        (f.topic, f.partition, str(f.state)) for f in found if f.kind == FindingKind.STALE_TELEMETRY
    }
    assert stale == {("b", 0, "open"), ("b", 1, "open")}


def test_a_topic_never_configured_is_not_forgotten_with_its_dead_collector() -> None:
    """A topic whose configuration is never read (DescribeConfigs refused for it by an
    ACL, say) has no topic state: its partitions, sent by a collector that dies, go stale
    and stay, while the other collector's configurations of other topics go on (today:
    the cluster's clock forgets them after forget_absent_ms)."""
    tl = Timeline(topic="a")
    for i in range(4):
        _collector_round(tl, {"a": 1}, 100 + i, configs=("a",))
        tl.advance(2_500)
        _collector_round(tl, {"c": 1}, 100 + i, configs=("a",))
        tl.advance(2_500)
    for i in range(66):
        _collector_round(tl, {"a": 1}, 200 + i, configs=("a",))
        tl.advance(10 * SECOND)
    m, found = _ticked(tl)
    assert ("lab", "c", 0) in m.partitions
    assert m.take_forgotten() == ([], [])
    assert not [f for f in found if f.kind == FindingKind.TOPIC_DELETED]


def test_a_partition_its_siblings_outlive_is_forgotten() -> None:
    """One collector: a/1 stops being listed while a/0 (same topic, same collector) and the
    configurations go on -- a/1 is absent, forgotten after forget_absent_ms; a/0 and the
    topic stay (no topic_deleted: the topic is still read)."""
    tl = Timeline(topic="a")
    for i in range(70):
        _collector_round(tl, {"a": 2 if i < 4 else 1}, 100 + i, configs=("a",))
        tl.advance(10 * SECOND)
    m, found = _ticked(tl)
    assert set(m.partitions) == {("lab", "a", 0)}
    assert set(m.topics) == {("lab", "a")}
    gone, topics = m.take_forgotten()
    assert [ps.key for ps, _ in gone] == [("lab", "a", 1)] and topics == []
    labels = [label(f) for f in found]
    assert "stale_telemetry:resolved a/1" in labels
    assert not [lb for lb in labels if lb.startswith("topic_deleted")]


def test_a_topic_gone_from_the_topic_reads_takes_its_partitions() -> None:
    """Collector 1/2 dies, then its topic b is deleted and the deletion is not seen (no
    topic_deleted: say every collector restarted across it): the living collector stops
    sending b's configuration. b leaves the topic reads, and takes b/0 and b/1 with it after
    forget_absent_ms, in the same tick -- one topic_deleted, reason absent."""
    tl = Timeline(topic="a")
    for i in range(4):
        _collector_round(tl, {"a": 1}, 100 + i)
        tl.advance(2_500)
        _collector_round(tl, {"b": 2}, 100 + i)
        tl.advance(2_500)
    for i in range(3):  # 1/2 is dead; b still exists
        _collector_round(tl, {"a": 1}, 200 + i)
        tl.advance(10 * SECOND)
    for i in range(66):  # b deleted, unseen
        _collector_round(tl, {"a": 1}, 300 + i, configs=("a",))
        tl.advance(10 * SECOND)
    m, found = _ticked(tl)
    assert set(m.partitions) == {("lab", "a", 0)}
    assert set(m.topics) == {("lab", "a")}
    deleted = [f for f in found if f.kind == FindingKind.TOPIC_DELETED]
    assert [(f.topic, f.details["reason"]) for f in deleted] == [("b", "absent")]
    gone, topics = m.take_forgotten()  # with the topic, at its stamp
    assert sorted((ps.key, at) for ps, at in gone) == [
        (("lab", "b", 0), deleted[0].at), (("lab", "b", 1), deleted[0].at)
    ]  # fmt: skip
    assert topics == [("lab", "b")]
    resolved = {label(f) for f in found if f.kind == FindingKind.STALE_TELEMETRY}
    assert resolved >= {"stale_telemetry:resolved b/0", "stale_telemetry:resolved b/1"}


def _bucket_of(cluster: str, topic: str, partition: int, buckets: int) -> int:
    return zlib.crc32(f"{cluster}/{topic}/{partition}".encode()) % buckets


def test_the_job_s_buckets_judge_a_dead_collector_alike() -> None:
    """As the Spark job holds the model: partitions spread over buckets by partition, topic
    and broker events delivered to every bucket, a topic's own findings from the bucket
    owning it. No bucket forgets the dead collector's partitions; a topic that leaves the
    topic reads is forgotten in every bucket holding its partitions, at the same stamp."""
    buckets = 4
    tl = Timeline(topic="a")
    for i in range(4):
        _collector_round(tl, {"a": 3}, 100 + i, configs=("a", "b", "gone"))
        tl.advance(2_500)
        _collector_round(tl, {"b": 3, "gone": 3}, 100 + i, configs=("a", "b", "gone"))
        tl.advance(2_500)
    for i in range(66):
        _collector_round(tl, {"a": 3}, 200 + i)  # "gone" deleted, unseen: its configs stop
        tl.advance(10 * SECOND)

    def owner(key: str) -> int:
        return zlib.crc32(key.encode()) % buckets

    def owns(i: int) -> Callable[[str], bool]:
        return lambda key: owner(key) == i

    models = [ClusterModel(owns_global=owns(i)) for i in range(buckets)]
    found: list[list[Finding]] = [[] for _ in models]
    next_tick = tl.events[0]["observed_at"] + 10 * SECOND
    for raw in tl.events:
        while raw["observed_at"] >= next_tick:
            for i, m in enumerate(models):
                found[i] += m.tick(next_tick)
            next_tick += 10 * SECOND
        ev = to_model(validate_event(raw))
        if raw["kind"] in ("partition", "replica"):
            i = _bucket_of(raw["cluster"], raw["topic"], raw["partition"], buckets)
            found[i] += models[i].apply(ev)
        else:
            for i, m in enumerate(models):
                found[i] += m.apply(ev)
    held = {k for m in models for k in m.partitions}
    assert {k for k in held if k[1] == "b"} == {("lab", "b", p) for p in range(3)}
    assert not {k for k in held if k[1] == "gone"}
    forgotten = [(ps.key, at) for m in models for ps, at in m.take_forgotten()[0]]
    assert sorted(k for k, _ in forgotten) == [("lab", "gone", p) for p in range(3)]
    assert len({at for _, at in forgotten}) == 1  # every bucket, the same stamp
    every = [f for fs in found for f in fs]
    assert [f.topic for f in every if f.kind == FindingKind.TOPIC_DELETED] == ["gone"]
    assert not [f for f in every if f.kind == FindingKind.STALE_TELEMETRY and f.topic == "b"
                and str(f.state) == "resolved"]  # fmt: skip


def write() -> None:
    for sc in SCENARIOS:
        sc.path.write_text(sc.build().jsonl())


if __name__ == "__main__":
    write()
    print(f"wrote {', '.join(str(sc.path) for sc in SCENARIOS)}")
