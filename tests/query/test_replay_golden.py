"""``monitor replay --format json`` of every scenario file equals its golden file: the
findings (ids, order, every detail) do not change unless a commit says why
(``tests/golden.py``)."""

from __future__ import annotations

import contextlib
import io

import pytest

from monitor.cli import main
from tests.golden import check_golden
from tests.scenarios import SCENARIOS, Scenario


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_replay_json_equals_its_golden_file(sc: Scenario) -> None:
    flags = ["--pre-epoch-protocol"] if sc.config.get("epoch_truncation") is False else []
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["replay", "--format", "json", *flags, str(sc.path)])
    assert code == (1 if sc.rejects else 0)  # 1: lines were rejected
    check_golden(f"replay/{sc.name}.jsonl", out.getvalue())
