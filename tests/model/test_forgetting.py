"""Forgetting deleted topics (issue 17): what the scenarios cannot show on their own."""

from __future__ import annotations

import pickle

from monitor.contract.events import to_model, validate_event
from monitor.dev.testing import Timeline
from monitor.model import ClusterModel, FindingKind, ModelConfig, TopicDeleted

SECOND = 1_000
OLD_ID, NEW_ID = "kDqT6kqVQnC4mA8-cUxTwQ", "Yx2Zt3PqRkWm0aBcDeFgHw"


def _model(tl: Timeline, config: ModelConfig | None = None) -> ClusterModel:
    m = ClusterModel(config)
    for ev in tl.events:
        m.apply(to_model(validate_event(ev)))
    return m


def _two_topics(rounds: int = 3) -> Timeline:
    tl = Timeline(topic="a")
    for _ in range(rounds):
        for topic in ("a", "b"):
            tl.config(rf=2, min_isr=1, topic=topic)
            tl.replica(1, leo=10, topic=topic)
            tl.meta(leader=1, epoch=0, replicas=[1, 2], isr=[1, 2], hw=10, topic=topic)
        tl.advance(5 * SECOND)
    return tl


def test_silence_alone_forgets_nothing() -> None:
    """A dead collector: every stamp stops. A day later the partitions are stale, not gone."""
    tl = _two_topics()
    m = _model(tl)
    found = m.tick(tl.now + 86_400 * SECOND)
    assert set(m.partitions) == {("lab", "a", 0), ("lab", "b", 0)}
    assert set(m.topics) == {("lab", "a"), ("lab", "b")}
    assert {f.kind for f in found} == {FindingKind.STALE_TELEMETRY}
    assert m.take_forgotten() == ([], [])


def test_a_deletion_of_the_old_incarnation_spares_the_new_one() -> None:
    """A deletion naming the old topic id, applied after the topic was recreated (a new id),
    forgets nothing of the new incarnation."""
    tl = Timeline(topic="t")
    tl.meta(leader=1, epoch=0, replicas=[1], isr=[1], hw=5, topic_id=NEW_ID)
    m = _model(tl)
    assert m.apply(TopicDeleted("lab", tl.now + 1, "t", OLD_ID)) == []
    assert ("lab", "t", 0) in m.partitions
    found = m.apply(TopicDeleted("lab", tl.now + 2, "t", NEW_ID))
    assert [f.kind for f in found] == [FindingKind.TOPIC_DELETED]
    assert ("lab", "t", 0) not in m.partitions
    gone, _ = m.take_forgotten()
    assert [(ps.key, at) for ps, at in gone] == [(("lab", "t", 0), tl.now + 2)]
    assert m.take_forgotten() == ([], [])  # taken once


def test_a_delta_forgets_what_the_model_forgot() -> None:
    """The Spark operator's deltas carry a forgotten state as None: restoring one removes it."""
    m = _model(_two_topics())
    m.restore({("lab", "a", 0): None}, {("lab", "a"): None}, {})
    assert set(m.partitions) == {("lab", "b", 0)}
    assert set(m.topics) == {("lab", "b")}


def test_a_model_pickled_before_forgetting_existed_loads_and_takes_new_settings() -> None:
    """A checkpoint's model from before these fields: loads with none forgotten, and a job
    restarted with other thresholds judges with them."""
    m = _model(_two_topics())
    state = m.__dict__.copy()
    for name in ("deleted", "_forgotten", "_forgotten_topics"):
        del state[name]
    old = ClusterModel.__new__(ClusterModel)
    old.__setstate__(state)
    back = pickle.loads(pickle.dumps(old))
    assert back.deleted == {} and back.take_forgotten() == ([], [])
    back.reconfigure(ModelConfig(forget_absent_ms=5))
    assert back.config.forget_absent_ms == 5
    assert set(back.partitions) == set(m.partitions)
