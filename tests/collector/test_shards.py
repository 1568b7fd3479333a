"""Several collectors on one cluster (``shard = "i/N"``): which partitions each sends.

Every partition is in exactly one shard, and a topic's partitions in the same one; one
shard (the default) is the whole cluster, as before shards; N collectors' rounds are the one
collector's round split by topic -- each partition's events in exactly one, byte for byte,
while the topic and broker events are every collector's, equal to the one collector's."""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from monitor.cli import build_parser, main
from monitor.collector.admin import PartitionMetadata, Reads, TopicDurability
from monitor.collector.cli import build_config
from monitor.collector.collector import RoundResult
from monitor.collector.config import CollectorConfig
from monitor.collector.shards import Shard, shard_of
from monitor.contract.events import AnyEvent, PartitionEvent, ReplicaEvent, dumps
from tests.collector.helpers import offline_collector, readings

TOPICS = [f"topic-{i:02d}" for i in range(24)]  # 1 to 4 partitions each (below)


def test_every_partition_is_in_exactly_one_shard() -> None:
    """For N from 1 to 8 and a thousand topics of 1 to 4 partitions: each partition is
    taken by exactly one shard i/N, a topic's partitions all by the same one, in the
    metadata's order; shard_of is CRC-32 (the same on every host, unlike ``hash``)."""
    rng = random.Random(21)
    parts = [
        PartitionMetadata(f"t{rng.getrandbits(32):08x}", p, 1, 0, (1,), (1,), (), None)
        for t in range(1_000)
        for p in range(1 + t % 4)
    ]
    for n in range(1, 9):
        taken = [Shard(i, n).partitions(parts) for i in range(n)]
        owners = Counter((p.topic, p.partition) for got in taken for p in got)
        assert len(owners) == len(parts) and set(owners.values()) == {1}, n
        for i, got in enumerate(taken):
            assert got == [p for p in parts if shard_of(p.topic, n) == i]  # order kept
            assert {shard_of(p.topic, n) for p in got} <= {i}
        if n > 1:  # spread: no shard empty, none with twice its share
            assert all(0 < len(got) < 2 * len(parts) / n for got in taken), n
    assert Shard(0, 1).partitions(parts) == parts
    assert shard_of("orders", 2) == 0 and shard_of("clicks", 2) == 1  # zlib.crc32


def _page(leo: dict[tuple[str, int], int]) -> str:
    lines = ["# TYPE kafka_log_log_end_offset gauge"]
    lines += [
        f'kafka_log_log_end_offset{{partition="{p}",topic="{t}"}} {v}.0'
        for (t, p), v in sorted(leo.items(), key=lambda kv: (str(kv[0][1]), kv[0][0]))
    ]
    lines += ["kafka_server_replica_manager_isrshrinkspersec_total 3.0"]
    return "\n".join(lines) + "\n"


def _cluster() -> Iterator[tuple[dict[int, str], list[PartitionMetadata], set[str], bool]]:
    """Four rounds of a 3-broker cluster of TOPICS (RF 2 or 3): the pages, the metadata,
    the topics listed, whether the read was complete. Every page also holds ``gone-x``,
    which no metadata lists. Round 2: the metadata read fails in part (partition 0 of
    ``topic-01`` and ``topic-02`` missing: their samples go as replica events). Round 3:
    ``topic-03`` was deleted (topic_deleted)."""
    for r in range(4):
        listed = [t for t in TOPICS if not (r == 3 and t == "topic-03")]
        meta: list[PartitionMetadata] = []
        for k, t in enumerate(listed):
            for p in range(1 + k % 4):
                rf = 2 + k % 2
                replicas = tuple(1 + (k + p + j) % 3 for j in range(rf))
                meta.append(PartitionMetadata(t, p, replicas[0], 1, replicas, replicas, (), ()))
        pages: dict[int, dict[tuple[str, int], int]] = {1: {}, 2: {}, 3: {}}
        for m in meta:
            for b in m.replicas:
                pages[b][(m.topic, m.partition)] = 100 * r + m.partition
        for b in pages:
            pages[b][("gone-x", 0)] = 5
        complete = r != 2
        if not complete:
            meta = [m for m in meta if m.topic not in ("topic-01", "topic-02") or m.partition]
        yield {b: _page(leo) for b, leo in pages.items()}, meta, set(listed), complete


def _collect(
    monkeypatch: pytest.MonkeyPatch, mode: str = "partition", **settings: Any
) -> tuple[list[RoundResult], list[set[tuple[str, int]]]]:
    """The rounds of :func:`_cluster` through ``Collector.round`` (the same clock each
    time: every collector's stamps alike), and the partitions whose HWs each round asked."""
    from monitor.collector import collector as mod

    scripted = list(_cluster())
    pages: dict[int, str] = dict(scripted[0][0])
    now = iter(range(1_000_000, 10_000_000, 1_000))
    current: dict[str, Any] = {}
    asked: list[set[tuple[str, int]]] = []

    def metadata(admin: object, exclude: object, internal: bool, reads: Reads) -> bool:
        _, meta, listed, complete = current["round"]
        reads.partitions.extend(meta)
        reads.listed = listed
        if not complete:
            reads.errors.append(("metadata", "topic-01: timed out"))
        return True

    def high_watermarks(admin: object, reads: Reads) -> None:
        asked.append({(p.topic, p.partition) for p in reads.partitions})
        reads.high_watermarks.update({(p.topic, p.partition): 90 for p in reads.partitions})

    def configs(admin: object, topics: list[str], reads: Reads) -> dict[str, TopicDurability]:
        return {t: TopicDurability(2, t == "topic-05") for t in topics}

    c = offline_collector(
        monkeypatch, pages, read_metadata=metadata, clock=lambda: next(now),
        registered={1, 2, 3}, round_records=mode, config_every_rounds=1, **settings,
    )  # fmt: skip
    monkeypatch.setattr(mod, "read_high_watermarks", high_watermarks)
    monkeypatch.setattr(mod, "read_topic_configs", configs)
    results = []
    try:
        for step in scripted:
            current["round"] = step
            pages.clear()
            pages.update(step[0])
            results.append(c.round())
    finally:
        c._pool.shutdown()
    return results, asked


def _partition_key(ev: AnyEvent) -> tuple[str, int] | None:
    if isinstance(ev, PartitionEvent | ReplicaEvent):
        return (ev.topic, ev.partition)
    return None


@pytest.mark.parametrize("mode", ["partition", "replica"])
@pytest.mark.parametrize("n", [2, 3])
def test_n_collectors_split_the_one_collectors_rounds(
    monkeypatch: pytest.MonkeyPatch, n: int, mode: str
) -> None:
    """Each round, the N shards' partition (and replica) events are the one collector's,
    each in exactly one shard -- the shard of its topic -- byte for byte; every shard sends
    the one collector's topic_config, topic_deleted and broker events, byte for byte (the
    replication factors and topic ids from the whole cluster's metadata); each asks the HWs
    of its own partitions only."""
    whole, whole_asked = _collect(monkeypatch, mode)
    shards = [_collect(monkeypatch, mode, shard=f"{i}/{n}") for i in range(n)]
    for r, res in enumerate(whole):
        everyone = [dumps(e) for e in res.events if _partition_key(e) is None]
        kinds = Counter(e.kind for e in res.events if _partition_key(e) is None)
        # Every topic's configuration (the deleted one's gone), from every collector.
        assert kinds["topic_config"] == [24, 24, 24, 23][r] and kinds["broker"] == 3
        assert kinds["topic_deleted"] == (r == 3)
        union: Counter[str] = Counter()
        for i, (results, asked) in enumerate(shards):
            mine = results[r].events
            assert [dumps(e) for e in mine if _partition_key(e) is None] == everyone
            keys = {k for e in mine if (k := _partition_key(e)) is not None}
            assert {shard_of(t, n) for t, _ in keys} <= {i}
            assert {shard_of(t, n) for t, _ in asked[r]} <= {i}
            union.update(dumps(e) for e in mine if _partition_key(e) is not None)
        ours = Counter(dumps(e) for e in res.events if _partition_key(e) is not None)
        assert union == ours, r  # every partition's events exactly once
        assert set().union(*(asked[r] for _, asked in shards)) == whole_asked[r]
    if mode == "partition":  # the partial read's samples went as replica events (above:
        # from their topic's shard only)
        orphans = {e.topic for e in whole[2].events if isinstance(e, ReplicaEvent)}
        assert orphans == {"topic-01", "topic-02"}
    samples = Counter(
        (s.topic, s.partition, s.broker) for res in whole for s in readings(res.events)
    )
    assert ("gone-x", 0, 1) not in samples
    assert sum(samples.values()) == sum(
        len(readings(results[r].events)) for results, _ in shards for r in range(len(whole))
    )


def test_one_shard_is_the_default_and_the_whole_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """No shard set, or 0/1: the same rounds, byte for byte (as before shards: the code
    path of one shard filters nothing)."""
    assert CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}).shard == "0/1"
    assert CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}).shard_spec() == Shard(
        0, 1
    )
    default, _ = _collect(monkeypatch)
    one, _ = _collect(monkeypatch, shard="0/1")
    assert [[dumps(e) for e in r.events] for r in default] == [
        [dumps(e) for e in r.events] for r in one
    ]
    assert sum(isinstance(e, PartitionEvent) for r in one for e in r.events) > 100


def test_the_shard_from_a_flag_the_environment_or_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """``--shard``, ``MONITOR_COLLECTOR_SHARD``, ``shard`` in the settings file: the flag
    over the variable over the file, as every setting."""
    for key in list(os.environ):
        if key.startswith("MONITOR_COLLECTOR_"):
            monkeypatch.delenv(key)
    file = tmp_path / "collector.toml"
    file.write_text('shard = "2/3"\n')

    def config(*argv: str) -> CollectorConfig:
        argv = ("--bootstrap", "k:9092", *argv)
        return build_config(build_parser(["collect"]).parse_args(["collect", *argv]))

    assert config("--config", str(file)).shard == "2/3"
    monkeypatch.setenv("MONITOR_COLLECTOR_SHARD", "1/3")
    assert config("--config", str(file)).shard == "1/3"
    assert config("--config", str(file), "--shard", "0/3").shard == "0/3"
    assert config("--shard", "0/3").shard_spec() == Shard(0, 3)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("2/2", "i counts from 0 to N-1"),
        ("1/0", "at least 1"),
        ("1", "is not i/N"),
        ("-1/2", "is not i/N"),
        ("a/b", "is not i/N"),
    ],
)
def test_a_shard_that_is_no_shard_is_refused(
    capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    """Before connecting, exit 78 (configuration), naming the setting and what is wrong."""
    with pytest.raises(ValueError, match="shard"):
        CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}, shard=text)
    code = main(["collect", "--once", "--out", "/dev/null", "--bootstrap", "127.0.0.1:9",
                 f"--shard={text}"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 78, err
    assert "shard" in err and says in err, err


@pytest.mark.parametrize(("shard", "says"), [("1/2", ", shard 1/2)"), ("0/1", "jmx_profile auto)")])
def test_check_names_the_shard(monkeypatch: pytest.MonkeyPatch, shard: str, says: str) -> None:
    """``collect --check`` says which shard the configuration is (not when it is the whole
    cluster: the line as before)."""
    from monitor.collector import check as mod
    from monitor.collector.collector import Collector
    from monitor.collector.security import KafkaConnectError

    def refused(self: object, produce: bool = True) -> None:
        raise KafkaConnectError("refused")

    monkeypatch.setattr(Collector, "start", refused)
    lines: list[str] = []
    mod.check(
        CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}, shard=shard), lines.append
    )
    assert lines[0].startswith("configuration: ok (cluster default") and lines[0].endswith(says)
