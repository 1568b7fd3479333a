"""The controllers' unclean-election counter as a witness: exactly the rises of warm,
unrestarted controllers count (scenario ``controller_counts_unclean_election``)."""

from __future__ import annotations

from monitor.model import FindingKind
from tests.scenarios import SCENARIOS, run

SCENARIO = next(s for s in SCENARIOS if s.name == "controller_counts_unclean_election")


def test_each_warm_controller_reports_the_election_once_and_nothing_else_counts() -> None:
    """1 and 2 (warm) report the election at 90 s, once each; 3 (restarted at 70 s, still
    warming up) does not; 2's jump at 100 s across a restart between two scrapes (a new
    process start, no gap seen) is a baseline, not a second election."""
    counted = [
        (f.broker, f.at - SCENARIO.build().events[0]["observed_at"], f.details["counted"])
        for f in run(SCENARIO)
        if f.kind == FindingKind.UNCLEAN_ELECTION
    ]
    assert counted == [(1, 90_000, 1), (2, 90_000, 1)]


def test_a_restart_between_two_slow_scrapes_is_a_baseline_even_when_warm() -> None:
    """Scraped every 60 s: the controller restarted 40 s before the second scrape (up for
    longer than the warm-up) and replayed 2 old elections. A new process start means a new
    count, whatever its age: nothing is reported. The same rise without a restart is."""
    from monitor.model import ClusterModel
    from monitor.model.events import BrokerReport

    t0, minute = 1_700_000_000_000, 60_000

    def counted(started_second: int) -> list[int]:
        m = ClusterModel()
        out = []
        for t, n, started in (
            (t0, 1, t0 - 3_600_000),
            (t0 + minute, 1, t0 - 3_600_000),
            (t0 + 2 * minute, 3, started_second),
        ):
            out += m.apply(BrokerReport("c", t, 1, True, n, started_at=started))
        return [f.details["counted"] for f in out if f.kind == FindingKind.UNCLEAN_ELECTION]

    assert counted(t0 + 2 * minute - 40_000) == []
    assert counted(t0 - 3_600_000) == [2]
