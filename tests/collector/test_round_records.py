"""Round records (``round_records = "partition"``, the default): one ``partition`` event per
partition and round, carrying its replicas' samples, means exactly what the ``replica``
events of ``round_records = "replica"`` mean -- the same model events, the same findings,
the same events and samples left out -- in one record instead of one per replica.

And the events built without pydantic on the hot path (:mod:`monitor.collector.build`) are
the events pydantic builds: equal, the same bytes on the wire, valid contract JSON."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.collector import build
from monitor.collector.admin import PartitionMetadata, Reads
from monitor.collector.collector import RoundResult
from monitor.collector.config import CollectorConfig
from monitor.collector.jmx import BrokerScrape
from monitor.contract.events import (
    INT32_MAX,
    INT64_MAX,
    AnyEvent,
    PartitionEvent,
    ReplicaEvent,
    dumps,
    parse_event,
    to_model,
)
from monitor.model import BrokerReport, ClusterModel, ModelEvent, TopicConfigReport
from monitor.model.order import event_order, unfold
from tests.collector.helpers import offline_collector

TOPIC_ID = "kOqT6kqVQnC4mA8-cUxTwQ"
#: A broker id beyond the contract's int32: every sample of its page breaks the contract.
BAD_BROKER = INT32_MAX + 1


def _page(leo: dict[tuple[str, int], int], lag: dict[tuple[str, int], int]) -> str:
    """A broker's exporter page: these log ends (log start 10 each), these lags."""
    lines = ["# TYPE kafka_log_log_end_offset gauge"]
    lines += [
        f'kafka_log_log_end_offset{{partition="{p}",topic="{t}"}} {v}.0'
        for (t, p), v in sorted(leo.items(), key=lambda kv: (str(kv[0][1]), kv[0][0]))
    ]
    lines += [
        f'kafka_log_log_start_offset{{partition="{p}",topic="{t}"}} 10.0'
        for (t, p) in sorted(leo, key=lambda k: (str(k[1]), k[0]))
    ]
    fetcher = 'kafka_server_replica_fetcher_lag{client_id="ReplicaFetcherThread-0-1"'
    lines += [
        f'{fetcher},partition="{p}",topic="{t}"}} {v}.0'
        for (t, p), v in sorted(lag.items(), key=lambda kv: (str(kv[0][1]), kv[0][0]))
    ]
    lines += ["kafka_server_replica_manager_isrshrinkspersec_total 1.0"]
    return "\n".join(lines) + "\n"


def _rounds() -> Iterator[tuple[dict[int, str], list[PartitionMetadata], bool]]:
    """Three rounds of a cluster: each broker's page, the metadata, whether it is complete.

    ``orders`` (RF 3) and ``pay`` (RF 2), led by broker 1; broker 3 falls behind on
    ``orders-0`` and leaves its ISR. On every page: the monitor's own topic (excluded) and
    ``gone`` (a topic no metadata lists). Round 2: ``orders-2``'s metadata breaks the
    contract (a leader epoch of -1: that partition event is left out, its samples are sent
    as replica events). Round 3: a metadata read that failed in part: ``orders-1`` is not
    in it (its samples are sent as replica events). Broker BAD_BROKER holds a replica of
    ``pay``: its samples break the contract.
    """
    for r, (leader_end, lagging_end) in enumerate([(100, 100), (5_000, 100), (9_000, 150)]):
        parts = [("orders", 0), ("orders", 1), ("orders", 2), ("pay", 0)]
        own = {("__replication_monitor_events", 0): 5, ("gone", 0): 3}
        ends = {k: leader_end + 7 * k[1] for k in parts}
        pages = {
            1: _page({**ends, **own}, {}),
            2: _page({**ends, **own}, dict.fromkeys(parts, 0)),
            3: _page(
                {**{k: ends[k] for k in parts[:3]}, ("orders", 0): lagging_end, **own},
                {("orders", 0): leader_end - lagging_end, ("orders", 1): 0, ("orders", 2): 0},
            ),
            BAD_BROKER: _page({("pay", 0): leader_end, **own}, {("pay", 0): 0}),
        }
        isr = (1, 2) if r == 2 else (1, 2, 3)
        meta = [
            PartitionMetadata("orders", 0, 1, 4, (1, 2, 3), isr, (), (), TOPIC_ID),
            PartitionMetadata("orders", 1, 1, 4, (1, 2, 3), (1, 2, 3), (), None, TOPIC_ID),
            PartitionMetadata("orders", 2, 1, -1 if r == 1 else 4, (1, 2, 3), (1, 2, 3), (), ()),
            PartitionMetadata("pay", 0, 1, 2, (1, 2), (1, 2), (), (2,)),
        ]
        complete = r != 2
        if not complete:
            meta = [p for p in meta if p.partition != 1 or p.topic != "orders"]
        yield pages, meta, complete


def _collect(monkeypatch: pytest.MonkeyPatch, mode: str) -> list[RoundResult]:
    """The three rounds of :func:`_rounds` through ``Collector.round`` in ``mode``."""
    from monitor.collector import collector as mod

    scripted = list(_rounds())
    pages: dict[int, str] = dict(scripted[0][0])
    now = iter(range(1_000_000, 10_000_000, 1_000))  # every clock read 1 s after the last
    current: dict[str, Any] = {}

    def metadata(admin: object, exclude: object, internal: bool, reads: Reads) -> bool:
        _, meta, complete = current["round"]
        reads.partitions.extend(meta)
        reads.listed = {"orders", "pay"}
        if not complete:
            reads.errors.append(("metadata", "orders: timed out"))
        return True

    def high_watermarks(admin: object, reads: Reads) -> None:
        reads.high_watermarks.update({(p.topic, p.partition): 90 for p in reads.partitions})

    c = offline_collector(
        monkeypatch,
        pages,
        read_metadata=metadata,
        clock=lambda: next(now),
        registered={1, 2, 3},
        round_records=mode,
        config_every_rounds=1,
    )
    monkeypatch.setattr(mod, "read_high_watermarks", high_watermarks)
    results = []
    try:
        for step in scripted:
            current["round"] = step
            pages.clear()
            pages.update(step[0])
            results.append(c.round())
    finally:
        c._pool.shutdown()
    return results


def _subject(ev: ModelEvent) -> tuple[str, int]:
    if isinstance(ev, BrokerReport):
        return ("", ev.broker)
    if isinstance(ev, TopicConfigReport):
        return (ev.topic, -1)
    return (ev.topic, getattr(ev, "partition", -1))


def _model_events(events: list[AnyEvent]) -> list[ModelEvent]:
    """The events as the model takes them: records unfolded, sorted by the one order
    (stably: a partition's events at one time and rank keep the collector's order)."""
    return sorted((m for ev in events for m in unfold(to_model(ev))), key=event_order)


def test_round_records_mean_what_replica_events_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    by_record = _collect(monkeypatch, "partition")
    by_replica = _collect(monkeypatch, "replica")
    records = [ev for res in by_record for ev in res.events]
    replicas = [ev for res in by_replica for ev in res.events]

    # What the collector sends: one partition event per partition of each round's metadata
    # (but orders-2's of round 2, which breaks the contract), carrying the samples; replica
    # events only for samples of partitions the metadata did not carry.
    assert Counter(ev.kind for ev in records)["partition"] == 4 + 3 + 3
    carried = [ev for ev in records if isinstance(ev, PartitionEvent) and ev.replica_samples]
    assert len(carried) == 4 + 3 + 3
    assert {
        (ev.topic, ev.partition, ev.observed_at) for ev in records if isinstance(ev, ReplicaEvent)
    } == {("orders", 2, _t_jmx(by_record[1])), ("orders", 1, _t_jmx(by_record[2]))}
    assert len(records) < len(replicas)
    # Each sample at the round's start, the record at the metadata's read, as the replica
    # events and the partition events were; a partition's samples in broker order.
    for res in by_record:
        for ev in res.events:
            if isinstance(ev, PartitionEvent) and ev.replica_samples:
                assert {s.observed_at for s in ev.replica_samples} == {_t_jmx(res)}
                assert ev.observed_at > _t_jmx(res)
                brokers = [s.broker for s in ev.replica_samples]
                assert brokers == sorted(brokers) and BAD_BROKER not in brokers

    # The same model events: each partition's (and broker's) in the same order. (Across
    # partitions they interleave differently -- a record holds one partition's samples,
    # the replica events came broker by broker -- which no partition's state can tell.)
    a, b = _model_events(records), _model_events(replicas)
    by_subject = lambda ev: (*event_order(ev), _subject(ev))  # noqa: E731
    assert sorted(a, key=by_subject) == sorted(b, key=by_subject)

    # The same findings, replayed in that order.
    def findings(events: list[ModelEvent]) -> list[str]:
        model = ClusterModel()
        return sorted(repr(f) for ev in events for f in model.apply(ev))

    found = findings(a)
    assert found == findings(b)
    assert any("ISR_SHRINK" in f for f in found), found

    # The same samples and events left out, counted alike.
    for x, y in zip(by_record, by_replica, strict=True):
        assert x.samples_dropped == y.samples_dropped
        assert x.events_dropped == y.events_dropped
    assert by_record[0].events_dropped == {("replica", "broker"): 1, ("broker", "broker"): 1}
    assert by_record[1].events_dropped == {
        ("replica", "broker"): 1,
        ("broker", "broker"): 1,
        ("partition", "leader_epoch"): 1,
    }


def _t_jmx(res: RoundResult) -> int:
    """The round's start, as its broker events carry it."""
    return min(ev.observed_at for ev in res.events if ev.kind == "broker")


def test_round_records_are_the_default_and_replica_events_a_setting() -> None:
    from monitor.cli import build_parser
    from monitor.collector.cli import build_config

    assert (
        CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}).round_records == "partition"
    )
    args = build_parser(["collect"]).parse_args(
        ["collect", "--bootstrap", "k:9092", "--round-records", "replica"]
    )
    assert build_config(args).round_records == "replica"
    with pytest.raises(ValueError, match="round_records"):
        CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}, round_records="broker")


def test_round_records_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_COLLECTOR_ROUND_RECORDS", "replica")
    assert CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}).round_records == "replica"


# -- built without pydantic: what pydantic builds ------------------------------------------


def _wire(events: list[Any]) -> list[str]:
    """The bytes each event makes on the events topic, each checked to be contract JSON
    that reads back as the event."""
    out = []
    for ev in events:
        raw = dumps(ev)
        assert parse_event(raw.encode()) == ev, raw
        out.append(raw)
    return out


def _both(make: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any, Counter[Any], Counter[Any]]:
    """``make`` on the fast path and validating every event: (fast, pydantic, their drops)."""
    fast_dropped: build.Dropped = Counter()
    slow_dropped: build.Dropped = Counter()
    fast = make(*args, **kwargs, dropped=fast_dropped)
    slow = make(*args, **kwargs, dropped=slow_dropped, validate=True)
    return fast, slow, fast_dropped, slow_dropped


def _same(fast: list[Any], slow: list[Any]) -> None:
    assert fast == slow
    assert _wire(fast) == _wire(slow)
    for f, s in zip(fast, slow, strict=True):
        _same_model(f, s)
        samples = zip(
            f.__dict__.get("replica_samples") or [],
            s.__dict__.get("replica_samples") or [],
            strict=True,
        )
        for fs, ss in samples:
            _same_model(fs, ss)


def _same_model(f: Any, s: Any) -> None:
    """The same class, fields in the same order, and pydantic's own slots as pydantic leaves
    them (the fields it was given: ``model_dump(exclude_unset=True)`` reads them)."""
    assert type(f) is type(s) and list(f.__dict__) == list(s.__dict__)
    assert f.model_fields_set == s.model_fields_set
    assert (f.__pydantic_extra__, f.__pydantic_private__) == (None, None)
    assert (s.__pydantic_extra__, s.__pydantic_private__) == (None, None)


META = [
    PartitionMetadata("orders", 0, 1, 4, (1, 2, 3), (1, 2, 3), (), (), TOPIC_ID),
    PartitionMetadata("orders", 1, None, 0, (1, 2), (), (2,), None),
    PartitionMetadata("orders", 2, 2, INT32_MAX, (2, 1, 4), (2, 1), (), (1,)),
    PartitionMetadata("pay", 0, 0, 1, (0,), (0,), (), ()),
]
SCRAPE = BrokerScrape(
    replicas={
        ("orders", 0): (INT64_MAX, 0, None),
        ("orders", 1): (0, None, 5),
        ("orders", 2): (7, 3, 0),
        ("pay", 0): (12_345_678, 12_345_000, None),
        ("gone", 0): (4, None, None),
        ("orders", 9): (None, 4, None),  # no log end read: no sample
    }
)


def test_the_fast_path_builds_what_pydantic_builds() -> None:
    hws = {("orders", 0): 99, ("orders", 2): INT64_MAX}
    starts = {("orders", 2): 6}
    moves = {("orders", 2): ([4], [3])}
    for make, args in [
        (build.partition_events, ("c", 2_000, META, hws, starts, moves)),
        (build.replica_events, ("c", 3, 1_000, SCRAPE, None)),
        (build.replica_events, ("c", 3, 1_000, SCRAPE, {"orders"})),
    ]:
        fast, slow, fast_dropped, slow_dropped = _both(make, *args)
        assert fast and not fast_dropped and not slow_dropped
        _same(fast, slow)

    def records(validate: bool) -> tuple[list[Any], Counter[Any]]:
        dropped: build.Dropped = Counter()
        rounds = build.round_keys(META, None, build_exclude())
        rest = []
        for broker in (1, 2, 3):
            rest += build.sort_samples(
                "c", broker, 1_000, SCRAPE, None, rounds, dropped, validate=validate
            )
        made = build.round_records(
            "c", 2_000, META, hws, starts, moves, rounds, dropped, validate=validate
        )
        return [*rest, *made], dropped

    (fast, fast_dropped), (slow, slow_dropped) = records(False), records(True)
    assert not fast_dropped and not slow_dropped
    assert [len(ev.replica_samples or ()) for ev in fast if isinstance(ev, PartitionEvent)] == [
        3,
        3,
        3,
        3,
    ]
    _same(fast, slow)


def build_exclude() -> Any:
    import re

    return re.compile(r"^__replication_monitor_")


# Values the builders may be handed: in the contract's range (most events take the fast
# path), and now and then one value at its edge, beyond it, or of another type.
_ODD = [True, 1.0, "1", None]
_VALID: dict[str, list[Any]] = {
    "topic": ["orders", "a.b-c_D9", "t" * 249],
    "id": [0, 1, 2, 7, INT32_MAX],
    "offset": [0, 1, 7, 12_345_678, INT64_MAX],
    "topic_id": [None, TOPIC_ID],
    "brokers": [(), (1,), (1, 2, 3), (0, INT32_MAX)],
}
_INVALID: dict[str, list[Any]] = {
    "topic": ["t" * 250, "bad topic", "", "\u00fc"],  # always text: the page's, the metadata's
    "id": [-1, INT32_MAX + 1, *_ODD],
    "offset": [-1, INT64_MAX + 1, *_ODD],
    "topic_id": ["short", TOPIC_ID[:-1] + "!", 5],
    "brokers": [(1, -1), (INT32_MAX + 1,), (True,), (1, 1.0), [1, 2], tuple(range(1025))],
}
_FIELDS = ["topic", "id", "id", "id", "brokers", "brokers", "brokers", "brokers", "topic_id"]


@st.composite
def _values(draw: st.DrawFn, kinds: list[str]) -> list[Any]:
    """A value of each kind, valid; one of them, now and then, not."""
    values = [draw(st.sampled_from(_VALID[k])) for k in kinds]
    if kinds and draw(st.integers(0, 2)) == 0:
        i = draw(st.integers(0, len(kinds) - 1))
        values[i] = draw(st.sampled_from(_INVALID[kinds[i]]))
    return values


@st.composite
def _metadata(draw: st.DrawFn) -> PartitionMetadata:
    topic, partition, leader, epoch, replicas, isr, offline, elr, topic_id = draw(_values(_FIELDS))
    if draw(st.booleans()):
        leader = None
    if draw(st.booleans()):
        elr = None
    return PartitionMetadata(topic, partition, leader, epoch, replicas, isr, offline, elr, topic_id)


_READINGS = _values(["offset", "offset", "offset"]).map(
    lambda v: (v[0], v[1] if v[1] != 7 else None, v[2] if v[2] != 1 else None)
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    meta=st.lists(_metadata(), max_size=6),
    readings_of=st.lists(_READINGS, max_size=8),
    extra=st.lists(st.tuples(_values(["topic", "id"]), _READINGS), max_size=3),
    common=_values(["id", "offset", "offset"]),
    cluster=st.sampled_from(["c", "c", "c", "", "k" * 257]),
)
def test_any_values_build_and_drop_as_pydantic_does(
    meta: list[PartitionMetadata],
    readings_of: list[Any],
    extra: list[Any],
    common: list[Any],
    cluster: str,
) -> None:
    """Whatever the values -- the fast path's checks pass them or pydantic judges them -- the
    events, the bytes and the events left out (by kind and field) are pydantic's."""
    broker, at, hw = common  # the broker, the round's time, the HWs
    keys = [(p.topic, p.partition) for p in meta]
    replicas: dict[Any, Any] = dict(zip(keys, readings_of, strict=False))
    replicas.update({(t, p): r for (t, p), r in extra})
    scrape = BrokerScrape(replicas=replicas)
    hws = dict.fromkeys(keys, hw)

    def run(validate: bool) -> tuple[list[Any], Counter[Any]]:
        dropped: build.Dropped = Counter()
        rounds = build.round_keys(meta, None, build_exclude())
        out: list[Any] = build.sort_samples(
            cluster, broker, at, scrape, None, rounds, dropped, build_exclude(), validate
        )
        later = at + 1 if type(at) is int else at
        out += build.round_records(cluster, later, meta, hws, {}, {}, rounds, dropped, validate)
        out += build.replica_events(cluster, broker, at, scrape, None, dropped, None, validate)
        out += build.partition_events(cluster, at, meta, hws, None, None, dropped, validate)
        return out, dropped

    (fast, fast_dropped), (slow, slow_dropped) = run(False), run(True)
    assert fast_dropped == slow_dropped
    _same(fast, slow)


_CORRUPT = [(i, bad) for i, kind in enumerate(_FIELDS) for bad in _INVALID[kind]]


@pytest.mark.parametrize(("field", "bad"), _CORRUPT, ids=[f"{i}-{b!r:.12}" for i, b in _CORRUPT])
def test_each_value_out_of_the_contract_is_judged_by_pydantic(field: int, bad: Any) -> None:
    """Every metadata field, every kind of value the contract refuses: pydantic's event and
    count, never the fast path's (the hypothesis test above meets them only now and then)."""
    values: list[Any] = ["orders", 3, 1, 4, (1, 2, 3), (1, 2), (3,), (2,), TOPIC_ID]
    values[field] = bad
    meta = [PartitionMetadata(*values), *META]
    scrape = BrokerScrape(replicas={("orders", 3): (5, 1, 0), ("orders", 0): (7, None, 1)})
    for reading in [(bad, 1, 0), (5, bad, 0), (5, 1, bad)] if field == 1 else [None]:
        if reading is not None:
            scrape = BrokerScrape(replicas={("orders", 3): reading, ("orders", 0): reading})

        def run(validate: bool, scrape: BrokerScrape = scrape) -> tuple[list[Any], Counter[Any]]:
            dropped: build.Dropped = Counter()
            rounds = build.round_keys(meta, None, build_exclude())
            out: list[Any] = build.sort_samples(
                "c", 2, 1_000, scrape, None, rounds, dropped, None, validate
            )
            out += build.round_records("c", 2_000, meta, {}, {}, {}, rounds, dropped, validate)
            out += build.replica_events("c", 2, 1_000, scrape, None, dropped, None, validate)
            return out, dropped

        (fast, fast_dropped), (slow, slow_dropped) = run(False), run(True)
        assert fast_dropped == slow_dropped
        _same(fast, slow)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (PartitionMetadata("orders", 3, 1, 4, (1, 2, 3), (1, 1), (), None), "isr"),
        (PartitionMetadata("orders", 3, 4, 4, (1, 2, 3), (1, 2), (), None), "leader"),
        (PartitionMetadata("orders", 3, 1, 4, (1, 2, 2), (1, 2), (), None), "replicas"),
        (PartitionMetadata("orders", 3, 1, 4, (1, 2, 3), (1,), (), (2, 2)),
         "eligible_leader_replicas"),
    ],
)  # fmt: skip
def test_metadata_kafka_could_never_give_is_dropped_by_its_field(
    bad: PartitionMetadata, field: str
) -> None:
    """Issue 50: an ISR listing a broker twice (counted as two in-sync replicas: a missed
    page), a leader outside the replicas, a replica or an ELR member twice -- a broken metadata
    read, never a cluster's state: left out and counted by the field on both paths, its
    samples sent as replica events; the other partitions' records as before."""
    scrape = BrokerScrape(replicas={("orders", 3): (5, 1, 0), ("orders", 0): (7, None, 1)})
    for validate in (False, True):
        dropped: build.Dropped = Counter()
        rounds = build.round_keys([bad, *META], None, build_exclude())
        build.sort_samples("c", 2, 1_000, scrape, None, rounds, dropped, None, validate)
        out = build.round_records("c", 2_000, [bad, *META], {}, {}, {}, rounds, dropped, validate)
        assert dropped == Counter({("partition", field): 1}), (validate, dropped)
        assert [e.partition for e in out if isinstance(e, PartitionEvent)] == [0, 1, 2, 0]
        assert [(e.kind, e.partition) for e in out if e.topic == "orders" and e.partition == 3] == [
            ("replica", 3)
        ]


def test_a_round_record_carries_at_most_1024_samples() -> None:
    """The contract's bound: a partition with more samples (more brokers than that reading
    it: hardly a cluster) sends its metadata alone and a replica event per sample."""
    meta = [PartitionMetadata("orders", 0, 1, 4, (1, 2, 3), (1, 2, 3), (), ())]

    def run(validate: bool) -> list[Any]:
        rounds = build.round_keys(meta, None, build_exclude())
        for broker in range(1, 1026):
            scrape = BrokerScrape(replicas={("orders", 0): (broker, None, None)})
            assert not build.sort_samples("c", broker, 1_000, scrape, None, rounds, None, None)
        return build.round_records("c", 2_000, meta, {}, None, None, rounds, None, validate)

    fast, slow = run(False), run(True)
    (record,) = [ev for ev in fast if isinstance(ev, PartitionEvent)]
    assert record.replica_samples is None and len(fast) == 1 + 1025
    _same(fast, slow)


def test_readings_parse_vouches_for_build_as_pydantic_does() -> None:
    """A page's readings (``jmx.parse``: ints in the contract's range, its ``checked``) go
    into samples unchecked: the events are pydantic's all the same."""
    from monitor.collector.jmx import PROFILES, parse

    page = "\n".join(
        [
            # 2^63 - 1 in digits: exact; written as a float above 2^53, no telling which
            # integer -- left out (issue 50: it was read rounded).
            'kafka_log_log_end_offset{partition="0",topic="orders"} 9223372036854775807',
            'kafka_log_log_end_offset{partition="3",topic="orders"} 9.223372036854775E18',
            'kafka_log_log_end_offset{partition="1",topic="orders"} 0.0',
            'kafka_log_log_end_offset{partition="2",topic="orders"} -1.0',
            'kafka_log_log_end_offset{partition="0",topic="pay"} 1.2345678E7',
            'kafka_log_log_start_offset{partition="0",topic="orders"} 100.0',
            'kafka_server_replica_fetcher_lag{client_id="F-0-1",partition="1",topic="orders"} 3.0',
        ]
    )
    scrape = parse(page, PROFILES["monitor"])
    assert scrape.checked and scrape.dropped == {"negative": 1, "imprecise": 1}
    assert scrape.leo[("orders", 0)] == 2**63 - 1

    def run(validate: bool) -> list[Any]:
        rounds = build.round_keys(META, None, build_exclude())
        out: list[Any] = build.sort_samples(
            "c", 2, 1_000, scrape, None, rounds, None, None, validate
        )
        return out + build.round_records("c", 2_000, META, {}, {}, {}, rounds, None, validate)

    fast, slow = run(False), run(True)
    assert sum(len(ev.replica_samples or ()) for ev in fast if ev.kind == "partition") == 3
    _same(fast, slow)
