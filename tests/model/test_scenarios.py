"""Correctness proof of the model: each failure mode of the seeds, replayed from its file.

One row per scenario (``tests/scenarios.py`` says why each expects what it expects); the
JSON-lines files in ``tests/data/`` are what ``monitor replay`` reads, kept in sync here.
"""

from __future__ import annotations

import pytest

from monitor.model import Severity
from tests.scenarios import SCENARIOS, Scenario, label, matches, run


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_scenario_file_is_in_sync(sc: Scenario) -> None:
    """The committed JSON-lines file is exactly what the scenario builds."""
    assert sc.path.read_text() == sc.build().jsonl(), "run: python -m tests.scenarios"


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_scenario_findings(sc: Scenario) -> None:
    """The replay yields every expected finding, none of the forbidden ones, right numbers."""
    findings = run(sc)
    labels = [label(f) for f in findings]
    missing = [e for e in sc.expect if e not in labels]
    assert not missing, f"{sc.name}: missing {missing}; got {labels}"
    forbidden = [lb for lb in labels for fb in sc.forbid if matches(fb, lb)]
    assert not forbidden, f"{sc.name}: forbidden {forbidden}"
    for pattern, key, value in sc.details:
        first = next((f for f in findings if matches(pattern, label(f))), None)
        assert first is not None, f"{sc.name}: no finding matches {pattern!r}"
        assert first.details[key] == value, (sc.name, pattern, key, first.details)


@pytest.mark.parametrize("sc", [s for s in SCENARIOS if s.routine], ids=lambda s: s.name)
def test_routine_operations_page_nobody(sc: Scenario) -> None:
    """A routine operation's scenario (failover, rolling restart, reassignment, topic
    recreation) yields no critical finding of any kind: there a page is a false page."""
    critical = [label(f) for f in run(sc) if f.severity >= Severity.CRITICAL]
    assert critical == [], f"{sc.name}: {critical}"


def test_healthy_cluster_has_nothing_above_info() -> None:
    """Steady load with sampling skew produces no warning or critical finding."""
    sc = next(s for s in SCENARIOS if s.name == "healthy_steady_state")
    assert [label(f) for f in run(sc) if f.severity > 0] == []
