"""Hypothesis strategies of model streams, shared by the model's property tests.

``streams``: random contract-valid events of one partition with random time steps;
``simulated``: a partition of :mod:`monitor.dev.kafka_sim` under random faults, sampled by a
simulated collector (its ground truth known). ``COMMON``/``SIMULATED``: their settings.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from monitor.dev.kafka_sim import Sim
from monitor.dev.testing import Timeline

BROKERS = [1, 2, 3]

broker_id = st.sampled_from(BROKERS)
isr_st = st.lists(broker_id, unique=True, max_size=3)


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A random but contract-valid stream for one partition, with random time steps."""
    tl = Timeline(topic="p")
    n = draw(st.integers(1, 60))
    for _ in range(n):
        tl.advance(draw(st.integers(0, 40_000)))
        what = draw(
            st.sampled_from(["meta", "meta", "replica", "replica", "replica", "config", "broker"])
        )
        if what == "meta":
            isr = draw(isr_st)
            leader = draw(st.one_of(st.none(), broker_id))
            tl.meta(
                leader=leader,
                epoch=draw(st.integers(0, 8)),
                replicas=BROKERS,
                isr=isr,
                hw=draw(st.one_of(st.none(), st.integers(0, 5_000))),
                elr=draw(st.one_of(st.none(), isr_st)),
                epoch_start=draw(st.one_of(st.none(), st.none(), st.integers(0, 5_000))),
            )
        elif what == "replica":
            tl.replica(
                draw(broker_id),
                leo=draw(st.integers(0, 5_000)),
                hw=draw(st.one_of(st.none(), st.integers(0, 5_000))),
            )
        elif what == "config":
            tl.config(rf=3, min_isr=draw(st.integers(1, 4)), unclean=draw(st.booleans()))
        else:
            tl.broker(draw(broker_id), alive=draw(st.booleans()))
    return tl.events


#: Faults a simulated run draws from (tests/kafka_sim.py). "isolate" is the usual road to
#: a loss: a follower drops out, the leader goes on alone and dies, the follower returns.
FAULTS = ["kill", "restart", "preferred", "unclean", "miss", "withhold", "isolate"]


@st.composite
def simulated(draw: st.DrawFn) -> Sim:
    """A simulated partition under random faults, sampled by a simulated collector."""
    sim = Sim(
        random.Random(draw(st.integers(0, 2**32))),
        min_isr=draw(st.sampled_from([1, 2])),
        acks_all=draw(st.booleans()),
        unclean_enabled=draw(st.booleans()),
        rate=draw(st.sampled_from([(0, 0), (0, 3), (1, 20)])),
    )
    for _ in range(draw(st.integers(1, 12))):
        sim.run(draw(st.integers(1, 40)) * 1_000)
        fault, b = draw(st.sampled_from(FAULTS)), draw(broker_id)
        if fault == "kill":
            sim.kill(b)
        elif fault == "restart":
            sim.restart(b)
        elif fault == "preferred":
            sim.preferred_election()
        elif fault == "unclean":
            sim.unclean_elect()
        elif fault == "miss":
            sim.miss_scrape[b] = draw(st.integers(1, 4))
        elif fault == "withhold":
            sim.withhold_epoch_rounds = draw(st.integers(1, 4))
        elif sim.leader is not None and sim.leader != b:
            leader = sim.leader
            sim.kill(b)
            sim.run(draw(st.integers(10, 40)) * 1_000)
            sim.kill(leader)
            sim.run(draw(st.integers(10, 20)) * 1_000)
            sim.restart(b)
            sim.run(draw(st.integers(0, 10)) * 1_000)
            sim.unclean_elect()
    for b in BROKERS:  # everyone back, and time to settle
        sim.restart(b)
    sim.run(60_000)
    return sim


#: derandomize: the same examples on every run and machine, so a failure in CI is one a
#: developer reproduces by running the test; no example database either (nothing hidden).
COMMON = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
SIMULATED = settings(COMMON, max_examples=150)
