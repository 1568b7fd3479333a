"""``monitor replay`` applies events in the model's one order (``monitor.model.order``), the
order the Spark operator uses: a file whose events of equal time come in another kind
order gives the same findings as the file in order."""

from __future__ import annotations

import json
from itertools import groupby

import pytest

from monitor.model import ClusterModel, Finding, ModelConfig
from monitor.query.replay import replay
from tests.scenarios import SCENARIOS, Scenario


def _findings(lines: list[bytes], sc: Scenario) -> list[str]:
    out: list[Finding] = []
    replay(lines, ClusterModel(ModelConfig(**sc.config)), out.append, lambda n, r: None)
    return [f.id for f in out]


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_kinds_out_of_order_at_equal_times_replay_the_same(sc: Scenario) -> None:
    lines = sc.path.read_bytes().splitlines()

    def rank(line: bytes) -> int:
        return {"topic_config": 0, "broker": 1}.get(json.loads(line)["kind"], 2)

    # Within each timestamp, put the partition-level events first and the configuration
    # last: the opposite of the order the model applies.
    shuffled: list[bytes] = []
    for _t, group in groupby(lines, key=lambda line: json.loads(line)["observed_at"]):
        shuffled.extend(sorted(group, key=lambda line: -rank(line)))
    assert _findings(shuffled, sc) == _findings(lines, sc)


def test_an_event_older_than_what_was_applied_is_late_not_reordered() -> None:
    """The buffer holds one timestamp: an event from long before is applied late and the
    model ignores it (counted), as the Spark job does -- the replay never holds the file."""
    sc = next(s for s in SCENARIOS if s.name == "hw_regression")
    lines = sc.path.read_bytes().splitlines()
    first = lines[1]  # the first partition event
    model = ClusterModel()
    replay([*lines, first], model, lambda f: None, lambda n, r: None)
    assert model.partitions[("lab", "hwreg", 0)].late_events == 1
