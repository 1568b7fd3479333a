"""`what-if` checked against reality: predict what stopping a broker does, stop it, compare.

Four partitions of known shapes; the collector's events feed the in-process engine; the
prediction for broker 3 is taken from the engine's views, then broker 3 is stopped and the
controller's metadata must agree with each predicted outcome.
"""

from __future__ import annotations

import time

import pytest

from monitor.collector import Collector, CollectorConfig
from monitor.dev.engine import LocalEngine
from monitor.dev.lab.admin import create_topic, describe_topic
from monitor.dev.lab.cluster import Lab
from monitor.query.questions import Outcome, what_if
from tests.dev.lab.helpers import topic_name

pytestmark = pytest.mark.lab

SHAPES = {  # name -> (replicas, min ISR, predicted outcome of stopping broker 3)
    "follower": ([1, 2, 3], 2, Outcome.DEGRADED),
    "leader": ([3, 1, 2], 2, Outcome.LEADER_MOVES),
    "minisr": ([1, 3], 2, Outcome.UNDER_MIN_ISR),
    "alone": ([3], 1, Outcome.LOST),
    "elsewhere": ([1, 2], 1, None),  # no replica on 3: not affected
}


def test_what_if_matches_what_stopping_the_broker_does(lab: Lab) -> None:
    topics = {name: topic_name(f"wi-{name}") for name in SHAPES}
    for name, (replicas, min_isr, _) in SHAPES.items():
        create_topic(
            lab.bootstrap_servers,
            topics[name],
            assignments={0: replicas},
            min_insync_replicas=min_isr,
        )
    engine = LocalEngine()
    collector = Collector(
        CollectorConfig(
            cluster="lab",
            kafka={"bootstrap_servers": lab.bootstrap_servers},
            jmx_urls=lab.jmx_urls,
            config_every_rounds=1,
        )
    )
    collector.start(produce=False)
    try:
        for _ in range(2):
            engine.feed(collector.round().events)
    finally:
        collector.stop()
    views = [v for v in engine.snapshot.partitions.values() if v.topic in topics.values()]
    assert len(views) == len(SHAPES)
    predicted = {i.topic: i for i in what_if(views, {3})}
    for name, (_, _, outcome) in SHAPES.items():
        got = predicted.get(topics[name])
        assert (got.outcome if got else None) == outcome, name

    lab.stop(3)
    deadline = time.monotonic() + 90
    while True:
        actual = {name: describe_topic(lab.bootstrap_servers, t)[0] for name, t in topics.items()}
        settled = all(3 not in p.isr and p.leader != 3 for p in actual.values())
        if settled or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert settled, actual
    assert actual["follower"].leader == 1 and sorted(actual["follower"].isr) == [1, 2]
    assert actual["leader"].leader in predicted[topics["leader"]].surviving_isr
    assert len(actual["minisr"].isr) < 2 and actual["minisr"].leader == 1
    assert actual["alone"].leader == -1  # offline: its only replica is gone
    assert sorted(actual["elsewhere"].isr) == [1, 2]
