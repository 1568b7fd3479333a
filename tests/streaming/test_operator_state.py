"""The operator's bucket state (snapshot + delta log + worker cache), without Spark.

The processor runs against in-memory fakes of Spark's state handle, batch after batch, on
two simulated Python workers (each with its own cache), with aborted batches (state rolled
back, cache kept: the next attempt must not trust it), processing-time ticks, and frequent
snapshots. After every batch, each bucket reloaded from the stored state alone must equal
the model the worker holds in memory: a state the batch changed but the delta left out
(a re-judged partition, a refreshed open condition) fails here. The findings must be
those of one ``ClusterModel`` fed the same events and ticks.
"""

from __future__ import annotations

import copy
import json
import pickle
import random
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

from monitor.contract.events import parse_event, to_model
from monitor.dev.synth import generate
from monitor.model import ClusterModel, ModelConfig
from monitor.model.order import event_order, unfold
from streaming import operator as op
from tests.scenarios import SCENARIOS, accepted_lines
from tests.streaming.helpers import Clock, FakeHandle, FakeMap, FakeValue, payload, renamed, route


def _findings(frames: Iterator[Any]) -> list[str]:
    """The ids of the findings in the operator's output (the key is the subject)."""
    out = []
    for f in frames:
        out.extend(
            json.loads(bytes(v))["id"]
            for o, v in zip(f["out"], f["value"], strict=True)
            if o == "finding"
        )
    return out


def _same_model(a: ClusterModel, b: ClusterModel) -> None:
    assert a.partitions == b.partitions
    assert list(a.partitions) == list(b.partitions)  # the order too: ticks walk it
    assert a.topics == b.topics
    assert a.brokers == b.brokers


def _records() -> list[bytes]:
    records: list[bytes] = []
    for sc in SCENARIOS:
        if not sc.config:
            records.extend(renamed(accepted_lines(sc), sc.name))
    synth = list(generate(300, 12, fault_rate=0.05, seed=3))
    # min.insync.replicas changes re-judge a topic's partitions (opening, resolving and
    # refreshing conditions of partitions that got no event).
    t = max(e["observed_at"] for e in synth)
    for i, min_isr in enumerate((3, 4, 5, 2)):
        synth.append(
            {"schema_version": 1, "kind": "topic_config", "cluster": "synth",
             "observed_at": t + 1_000 * (i + 1), "topic": "topic-00001",
             "replication_factor": 3, "min_insync_replicas": min_isr,
             "unclean_leader_election_enable": False}
        )  # fmt: skip
    # The same cluster's rounds as round records (the collector's default form), as
    # another cluster: most of them applied whole, some unfolded.
    rounds = [
        {**e, "cluster": "synth-rounds"}
        for e in generate(300, 12, fault_rate=0.05, seed=4, form="rounds")
    ]
    return records + [json.dumps(e, separators=(",", ":")).encode() for e in synth + rounds]


@pytest.mark.parametrize(("seed", "replays"), [(1, False), (2, False), (1, True), (2, True)])
def test_stored_state_equals_the_live_model(
    seed: int, replays: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``replays``: a batch that changes most of a bucket is stored as its input
    (``op.Replay``) whatever the cache did, so that loads and catch-ups apply batches again
    -- after aborted attempts, ticks and reconfigured topics."""
    # Small limits so that catch-ups, reloads, snapshots and log trimming all happen.
    monkeypatch.setattr(op, "KEEP_DELTAS", 2)
    monkeypatch.setattr(op, "MAX_CATCH_UP", 3)
    monkeypatch.setattr(op, "MAX_DELTAS", 5)
    monkeypatch.setattr(op, "REPLAY_AFTER_HITS", 0)  # stored inputs whatever the cache did
    stored_replays = 0
    rng = random.Random(seed)
    buckets, tick_ms = 3, 7_000
    settings = op.OperatorSettings(
        buckets=buckets, tick_ms=tick_ms, catchup_slack_ms=10**12, model=ModelConfig(),
        cache_scope=f"test-{seed}", replay_batches=4 if replays else 0,
    )  # fmt: skip
    records = _records()
    # Batches are contiguous slices (the job sorts within a batch; each scenario is its
    # own cluster, so cutting anywhere keeps every partition's order).
    cuts = sorted(rng.sample(range(1, len(records)), 80))
    batches = [records[i:j] for i, j in zip([0, *cuts], [*cuts, len(records)], strict=True)]

    state: dict[int, dict[str, Any]] = {b: {} for b in range(buckets)}
    workers: list[dict[Any, Any]] = [{}, {}]
    reference = ClusterModel(ModelConfig())
    ref_ids: list[str] = []
    job_ids: set[str] = set()
    counts = dict.fromkeys(("new", "hit", "catch_up", "full", "stale", "aborted", "ticks"), 0)
    offset = 0
    for n, batch in enumerate(batches):
        per_bucket: dict[int, list[str]] = {b: [] for b in range(buckets)}
        for raw in batch:
            for b, owner in route(raw, buckets):
                per_bucket[b].append(payload(raw, offset, owner))
            offset += 1
        # The reference: one model fed the batch's events one by one, in the model's order
        # (a partition's events are in one bucket, in the same order; the operator applies
        # rounds whole where that is the same).
        first = offset - len(batch)
        events = sorted(
            (
                (*event_order(ev), first + i, k, ev)
                for i, raw in enumerate(batch)
                for k, ev in enumerate(unfold(to_model(parse_event(raw))))
            ),
            key=lambda x: x[:4],
        )
        for *_, ev in events:
            ref_ids.extend(f.id for f in reference.apply(ev))
        newest = max(x[0] for x in events)
        # Processing time: just ahead of the events, sometimes far ahead (everything looks
        # silent): ticks open, refresh and, once events arrive again, resolve
        # stale_telemetry; scenarios that ended stay silent.
        tick = n % 2 == 1
        now = newest + (120_000 if n % 6 == 5 else 1_000)
        if tick:
            ref_ids.extend(f.id for f in reference.tick(now))
        attempts = 2 if rng.random() < 0.3 else 1
        for attempt in range(attempts):
            # An aborted attempt sees other input: a cache entry it leaves behind is
            # another history, which must never be trusted.
            last = attempt == attempts - 1
            saved = copy.deepcopy(state)
            for b in range(buckets):
                monkeypatch.setattr(op, "_CACHE", workers[rng.randrange(2)])
                proc = op.make_processor(settings)
                proc.init(FakeHandle(state[b]))
                frames: list[Any] = []
                mine = per_bucket[b] if last else per_bucket[b][::2]
                key = (op.bucket_keys(buckets)[b],)  # the grouping key of bucket b
                if mine:
                    rows = iter([pd.DataFrame({"payload": mine, "value": None})])
                    frames.extend(proc.handleInputRows(key, rows, Clock(now)))
                if tick:
                    counts["ticks"] += 1
                    frames.extend(proc.handleExpiredTimer(key, Clock(now), None))
                for how in proc.loaded:
                    counts[how] += 1
                if last:
                    job_ids.update(_findings(iter(frames)))
            if not last:  # the batch fails: the state store rolls back
                counts["aborted"] += 1
                state.clear()
                state.update(saved)
        # Every bucket reloaded from the store alone equals what the workers hold.
        for b in range(buckets):
            if "meta" not in state[b]:
                continue
            meta = op.Meta.of(state[b]["meta"])
            store = op.BucketStore(
                FakeValue(state[b], "meta"), FakeValue(state[b], "base"),
                FakeMap(state[b], "deltas"), "fresh", b, settings,
            )  # fmt: skip
            stored = store._load_stored(meta)
            live = [
                w[(settings.cache_scope, b)][1]
                for w in workers
                if w.get((settings.cache_scope, b), ((-1, ""),))[0] == (meta.seq, meta.tag)
            ]
            assert live, f"batch {n}: no worker holds bucket {b}'s current version"
            _same_model(stored.model, live[0].model)
            header = [getattr(stored, n) for n in op.HEADER_FIELDS]
            assert header == [getattr(live[0], n) for n in op.HEADER_FIELDS]
            assert min(state[b]["deltas"], default=(meta.log_start,))[0] >= meta.log_start
            stored_replays += sum(
                isinstance(op.loads_delta(bytes(blob)), op.Replay)
                for _, _, blob in state[b].get("deltas", {}).values()
            )
    assert set(ref_ids) == job_ids
    assert all(counts.values()), counts
    assert (stored_replays > 0) == replays


def test_a_stale_cache_of_another_history_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same version number, different content (a retried batch): the tag tells them apart."""
    monkeypatch.setattr(op, "_CACHE", {})
    settings = op.OperatorSettings(buckets=1, tick_ms=10**9, catchup_slack_ms=0,
                                   model=ModelConfig(), cache_scope="x")  # fmt: skip
    recs = [json.dumps(e, separators=(",", ":")).encode() for e in generate(5, 3, seed=1)]
    state: dict[str, Any] = {}

    def run(batch: list[bytes], first: int) -> None:
        proc = op.make_processor(settings)
        proc.init(FakeHandle(state))
        rows = [payload(r, first + i, True) for i, r in enumerate(batch)]
        list(proc.handleInputRows((0,), iter([pd.DataFrame({"payload": rows})]), Clock(1)))

    run(recs[:20], 0)
    saved = copy.deepcopy(state)
    run(recs[20:40], 20)  # attempt 1 of batch 2: cached as version 2 ...
    state.clear()
    state.update(saved)  # ... but rolled back
    other = dict(op._CACHE)
    op._CACHE.clear()
    run(recs[20:30], 20)  # version 2 again, other content, on another worker
    op._CACHE.clear()
    op._CACHE.update(other)  # the first worker gets the next batch with its stale version 2
    run(recs[40:50], 40)
    meta = op.Meta.of(state["meta"])
    store = op.BucketStore(
        FakeValue(state, "meta"), FakeValue(state, "base"), FakeMap(state, "deltas"), "y", 0,
        settings,
    )  # fmt: skip
    reference = ClusterModel()
    for r in recs[:30] + recs[40:50]:
        reference.apply(to_model(parse_event(r)))
    _same_model(store._load_stored(meta).model, reference)
    _same_model(op._CACHE[("x", 0)][1].model, reference)


def test_model_restore_replaces_states_and_drops_derived_contexts() -> None:
    recs = [to_model(parse_event(json.dumps(e))) for e in generate(20, 2, seed=5)]
    model = ClusterModel(ModelConfig())
    for ev in recs:
        model.apply(ev)
    key = next(iter(model.topics))
    assert model.context(*key).min_isr == 2
    other = copy.deepcopy(model)
    changed = other.topics[key].config
    assert changed is not None
    other.topics[key].config = type(changed)(3, 3, False)
    pkey = next(iter(model.partitions))
    other.partitions[pkey].late_events = 99
    model.restore({pkey: other.partitions[pkey]}, {key: other.topics[key]}, {})
    assert model.partitions[pkey].late_events == 99
    assert model.context(*key).min_isr == 3  # the cached context was dropped
    assert len(model.partitions) == len(other.partitions)


def test_a_restarted_job_judges_with_its_own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bucket's pickled model carries the thresholds it was created with; a job
    restarted from the same checkpoint with other settings judges with the new ones (from
    the stored snapshot and from a worker's cache alike)."""
    monkeypatch.setattr(op, "_CACHE", {})
    recs = [json.dumps(e, separators=(",", ":")).encode() for e in generate(5, 3, seed=1)]
    state: dict[str, Any] = {}

    def run(config: ModelConfig, batch: list[bytes], first: int) -> Any:
        settings = op.OperatorSettings(buckets=1, tick_ms=10**9, catchup_slack_ms=0,
                                       model=config, cache_scope="x")  # fmt: skip
        proc = op.make_processor(settings)
        proc.init(FakeHandle(state))
        rows = [payload(r, first + i, True) for i, r in enumerate(batch)]
        list(proc.handleInputRows((0,), iter([pd.DataFrame({"payload": rows})]), Clock(1)))
        return op._CACHE[("x", 0)][1].model

    assert run(ModelConfig(), recs[:20], 0).config == ModelConfig()
    strict = ModelConfig(follower_lag_ms=5_000)
    assert run(strict, recs[20:30], 20).config == strict  # from the cache
    op._CACHE.clear()
    assert run(strict, recs[30:40], 30).config == strict  # from the stored snapshot


def _rounds_model(seed: int) -> ClusterModel:
    """A model of 6 partitions after 3 synthetic rounds, applied in the one order."""
    model = ClusterModel()
    for e in sorted(
        (
            ev
            for rec in generate(6, 3, seed=seed, form="rounds")
            for ev in unfold(to_model(parse_event(json.dumps(rec))))
        ),
        key=event_order,
    ):
        model.apply(e)
    return model


def test_a_steady_partition_is_stored_and_read_back_field_for_field() -> None:
    """The packed form of a steady partition (:func:`streaming.operator._reduce_packed`)
    reads back equal: its leader history of 32-bit offsets (as bytes) or of 64-bit ones (a
    history that outgrew 32 bits, kept as its array), its replicas, and its stamps -- one
    object per stamp value across the bucket, the memory a worker holds per partition."""
    model = _rounds_model(seed=2)
    wide = next(iter(model.partitions.values()))
    t, leo = wide.leos_base_t, wide.leos_base_leo
    wide.record_leader_leo(t + 1_000, leo + 2**33, limit=32)  # the span no longer fits 32 bits
    assert wide.leader_leos.itemsize == 8
    bucket = op.Bucket(model=model)
    back = op.loads(op.dumps(bucket)).model
    assert list(back.partitions) == list(model.partitions)
    for key, ps in model.partitions.items():
        got = back.partitions[key]
        assert got == ps
        assert got.leader_leos.typecode == ps.leader_leos.typecode
    # The flat lists are pickled without a memo: the names and replica sets that many
    # partitions share are one object per value again once read back.
    for name in ("cluster", "topic", "replicas", "isr"):
        values = [getattr(ps, name) for ps in back.partitions.values()]
        assert len({id(v) for v in values}) == len(set(values)), name
    # From source a state holds its stamps and a replica's last truncation as objects, one
    # per value once read back; compiled, unboxed. tests/model/test_native.py checks the
    # source's (the suite runs the compiled model).


def test_state_stored_before_the_flat_lists_were_pickled_apart_still_loads() -> None:
    """A checkpoint written before the steady partitions' flat lists were pickled on their
    own holds them as a list inside the bucket's pickle: it reads back the same."""
    model = _rounds_model(seed=3)
    unpack, (blob, others) = op._reduce_packed(op._Packed(model.partitions))
    assert isinstance(blob, bytes)
    assert unpack(pickle.loads(blob), others) == unpack(blob, others) == model.partitions


def test_whole_rounds_are_stored_as_their_input_while_the_worker_keeps_the_bucket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch of whole collection rounds is stored as its input (``op.Replay``) only while
    the bucket's recent loads all hit the worker's cache, at most ``replay_batches`` of them
    after a snapshot; after a miss, snapshots until ``REPLAY_AFTER_HITS`` hits again. A
    fresh worker applies the stored inputs again to the same state."""
    monkeypatch.setattr(op, "_CACHE", {})
    settings = op.OperatorSettings(buckets=1, tick_ms=10**9, catchup_slack_ms=0,
                                   model=ModelConfig(), cache_scope="r")  # fmt: skip
    recs = [
        json.dumps(e, separators=(",", ":")).encode()
        for e in generate(20, 30, seed=5, form="rounds")
    ]
    # one batch per round: the round records of 20 partitions (rounds after the metadata)
    rounds = [recs[i : i + 20] for i in range(len(recs) - 20 * 30, len(recs), 20)]
    state: dict[str, Any] = {}
    kinds: list[str] = []
    for n, batch in enumerate(rounds):
        if n == 14:
            op._CACHE.clear()  # the bucket's task moves to another worker: a miss
        proc = op.make_processor(settings)
        proc.init(FakeHandle(state))
        rows = [payload(r, 20 * n + i, True) for i, r in enumerate(batch)]
        list(proc.handleInputRows((0,), iter([pd.DataFrame({"payload": rows})]), Clock(1)))
        meta = op.Meta.of(state["meta"])
        if meta.base_seq == meta.seq:
            kinds.append("snapshot")
        else:
            delta = op.loads_delta(bytes(state["deltas"][(meta.seq,)][2]))
            kinds.append("replay" if isinstance(delta, op.Replay) else "delta")
        # what a worker without the bucket reads equals what this one holds
        fresh = op.BucketStore(
            FakeValue(state, "meta"), FakeValue(state, "base"), FakeMap(state, "deltas"), "o",
            0, settings,
        )._load_stored(meta)  # fmt: skip
        _same_model(fresh.model, op._CACHE[("r", 0)][1].model)
    depth = settings.replay_batches
    first = ["snapshot"] + (["replay"] * depth + ["snapshot"]) * 3
    assert kinds[:14] == first[:14]
    hits = op.REPLAY_AFTER_HITS  # the miss, then hits until the last `hits` loads all hit
    assert kinds[14 : 14 + hits] == ["snapshot"] * hits
    assert kinds[14 + hits] == "replay"
    # A small batch after stored inputs (a batch cut a round short) writes a delta: the
    # inputs' bytes are bounded by their number, not counted against the snapshot's size.
    assert kinds[-3:] == ["replay"] * 3
    proc = op.make_processor(settings)
    proc.init(FakeHandle(state))
    rows = [payload(r, 10**6 + i, True) for i, r in enumerate(recs[-2:])]  # (duplicates)
    list(proc.handleInputRows((0,), iter([pd.DataFrame({"payload": rows})]), Clock(1)))
    meta = op.Meta.of(state["meta"])
    assert meta.base_seq < meta.seq
    assert isinstance(op.loads_delta(bytes(state["deltas"][(meta.seq,)][2])), op.Delta)
