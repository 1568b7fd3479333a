"""The unclean-election counter is forwarded only from versions that count correctly."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from monitor.collector.build import broker_event
from monitor.collector.jmx import BrokerScrape
from monitor.collector.versions import broker_version, trust_unclean_counter


@pytest.mark.parametrize(
    ("setting", "version", "trusted"),
    [
        ("auto", (4, 1), True),
        ("auto", (4, 2, 0), True),
        ("auto", (4, 0), False),  # KRaft 4.0 counts reassignment elections (KAFKA-19212)
        ("auto", (3, 9), False),  # KRaft or ZooKeeper: cannot tell; "on" for ZooKeeper
        ("auto", None, False),
        ("on", (3, 9), True),
        ("off", (4, 1), False),
    ],
)
def test_which_versions_are_trusted(
    setting: str, version: tuple[int, ...] | None, trusted: bool
) -> None:
    ok, why = trust_unclean_counter(setting, version)  # type: ignore[arg-type]
    assert ok is trusted and why


def test_the_version_kafka_python_inferred() -> None:
    assert broker_version(SimpleNamespace(_manager=SimpleNamespace(broker_version=(4, 1)))) == (
        4, 1,
    )  # fmt: skip
    assert broker_version(SimpleNamespace(config={"api_version": (3, 9)})) == (3, 9)  # pinned
    assert broker_version(SimpleNamespace(config={"api_version": None})) is None
    assert broker_version(object()) is None


def test_an_untrusted_counter_is_left_out_of_the_broker_event() -> None:
    scrape = BrokerScrape(counters={"unclean_elections_total": 4, "isr_shrinks_total": 9})
    assert broker_event("c", 1, 0, scrape, unclean_counter=True).unclean_elections_total == 4
    ev = broker_event("c", 1, 0, scrape, unclean_counter=False)
    assert ev.unclean_elections_total is None and ev.isr_shrinks_total == 9
