"""The watermark diagram's labels (epochs, findings, lost offsets) never overlap one another
and stay inside the figure, measured on the rendered text through the figure's renderer."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from monitor.query.plot import draw_watermarks
from monitor.query.sources import ReplaySource, Sample

DATA = Path(__file__).resolve().parents[1] / "data"


def _label_boxes(fig: Any) -> list[tuple[str, Any]]:
    """Every text label of the axes with its rendered box (pixels)."""
    renderer = fig.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for ax in fig.axes for t in ax.texts]


def _assert_readable(fig: Any) -> None:
    boxes = _label_boxes(fig)
    assert boxes
    for (a, box_a), (b, box_b) in combinations(boxes, 2):
        assert not box_a.overlaps(box_b), f"labels overlap: {a!r} and {b!r}"
    page = fig.bbox
    for text, box in boxes:
        assert (
            page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1
        ), f"label outside the figure: {text!r} {box.bounds} in {page.bounds}"


@pytest.mark.parametrize(
    ("scenario", "topic"),
    [
        # offline at 45 s, then unclean_election + committed_data_loss at 50 s (epoch 6):
        # the two red finding labels were drawn on top of each other
        ("unclean_election", "unclean"),
        # the same, and the epoch 5 and epoch 6 labels too
        ("old_leader_returns", "unclean"),
        # truncation_below_hw at 3 s, committed_data_loss at 4 s
        ("seed1_hw_truncation", "seed1"),
    ],
)
def test_election_labels_do_not_overlap(scenario: str, topic: str) -> None:
    import matplotlib.pyplot as plt

    src = ReplaySource(DATA / f"{scenario}.jsonl", cluster=None)
    v = src.partition(topic, 0)
    fig = draw_watermarks(v, src.history(topic, 0, 0), src.findings(topic, 0, 0))
    try:
        _assert_readable(fig)
    finally:
        plt.close(fig)


def _crowded_instant() -> tuple[list[Sample], list[dict[str, Any]]]:
    """Twelve epochs a millisecond apart at 10 s, and at that same instant 30 critical
    findings of different kinds (one label), 8 losses of the same range (8 labels) and 6
    findings a millisecond apart (6 labels): far more than fit one above the other."""
    history = [Sample(0, 100, 1, 1, (1, 2), ((1, 100), (2, 100)))]
    history += [
        Sample(10_000 + i, 100, 1 + i % 2, 2 + i, (1 + i % 2,), ((1, 100), (2, 90)))
        for i in range(12)
    ]
    history.append(Sample(20_000, 120, 2, 13, (1, 2), ((1, 120), (2, 120))))

    def finding(kind: str, at: int, **details: int) -> dict[str, Any]:
        return {
            "kind": kind,
            "at": at,
            "severity": "critical",
            "state": "event",
            "topic": "crowded",
            "details": details,
        }

    findings = [finding(f"kind_{i:02d}", 10_000) for i in range(30)]
    findings += [
        finding("committed_data_loss", 10_000, lost_from=90, lost_to=100, lost_count=10)
        for _ in range(8)
    ]
    findings += [finding(f"later_{i}", 10_001 + i) for i in range(6)]
    return history, findings


def test_many_labels_at_one_instant_do_not_overlap() -> None:
    import matplotlib.pyplot as plt

    v = ReplaySource(DATA / "unclean_election.jsonl", cluster=None).partition("unclean", 0)
    history, findings = _crowded_instant()
    fig = draw_watermarks(v, history, findings)
    try:
        assert len(_label_boxes(fig)) == 13 + 1 + 8 + 6
        _assert_readable(fig)
        first = [(t, b.bounds) for t, b in _label_boxes(fig)]
    finally:
        plt.close(fig)
    again = draw_watermarks(v, history, findings)  # deterministic: the same places
    try:
        assert [(t, b.bounds) for t, b in _label_boxes(again)] == first
    finally:
        plt.close(again)
