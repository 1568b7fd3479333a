"""The stamp guard (:mod:`monitor.model.stamps`) beyond its doctest and the
``future_stamped_event`` scenario."""

from __future__ import annotations

from monitor.model.events import BrokerReport, PartitionMeta
from monitor.model.stamps import StampGuard


def test_a_stream_going_on_in_step_is_admitted_as_it_comes() -> None:
    """Once another source confirmed a cluster's clock, events stamped in step -- here one
    broker alone for ten minutes, each a few seconds after the last -- are each admitted at
    once: the newest stamp follows them, so none is ever mistaken for a jump and held."""
    g = StampGuard(ahead_ms=60_000)
    g.admit(BrokerReport("c", 0, broker=1, alive=True))
    meta = PartitionMeta("c", 1, "t", 0, leader=1, leader_epoch=0, replicas=(1,), isr=(1,))
    assert len(g.admit(meta)) == 2
    for at in range(5_000, 600_000, 5_000):
        report = BrokerReport("c", at, broker=1, alive=True)
        assert g.admit(report) == [(report, None)], at
    assert g.flush() == []
