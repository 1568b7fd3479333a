"""The watermark diagram of one partition (``monitor explain --plot``), in the spirit of
the seeds' figures: each replica's LEO and the HW over time, epoch boundaries, ISR
membership, and the critical findings. Needs matplotlib (the ``plot`` extra)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.contract.state import PartitionView
from monitor.query.sources import Sample

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend
    from matplotlib.text import Annotation
    from matplotlib.transforms import Bbox

#: Clearance between two labels, and between a label and the axes' frame (pixels); also
#: the step in which a label moves looking for a free position.
_GAP_PX = 2.0


def plot_watermarks(
    v: PartitionView, history: Sequence[Sample], findings: Sequence[dict[str, Any]], out: Path
) -> None:
    """Draw the diagram (:func:`draw_watermarks`) into ``out`` (a PNG)."""
    import matplotlib.pyplot as plt

    fig = draw_watermarks(v, history, findings)
    try:
        fig.savefig(out, dpi=fig.dpi)
    finally:
        plt.close(fig)


def draw_watermarks(
    v: PartitionView, history: Sequence[Sample], findings: Sequence[dict[str, Any]]
) -> Figure:
    """The diagram as an open figure (the caller closes it), its labels already placed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = list(history)  # a copy: a live recorder may still be appending
    if not history:
        raise ValueError(f"no history recorded for {v.topic}/{v.partition}")
    t0 = history[0].at
    brokers = sorted({b for s in history for b, _ in s.leos} | set(v.replicas))
    fig, (ax, isr_ax) = plt.subplots(
        2, 1, figsize=(10, 6), dpi=110, sharex=True, gridspec_kw={"height_ratios": [4, 1]}
    )
    labels: list[Annotation] = []
    xs = [(s.at - t0) / 1000 for s in history]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, b in enumerate(brokers):
        pts = [(x, dict(s.leos).get(b)) for x, s in zip(xs, history, strict=True)]
        bx = [x for x, y in pts if y is not None]
        by = [y for _, y in pts if y is not None]
        if bx:
            ax.step(bx, by, where="post", color=colours[i % len(colours)], label=f"LEO broker {b}")
    hx = [x for x, s in zip(xs, history, strict=True) if s.high_watermark >= 0]
    hy = [s.high_watermark for s in history if s.high_watermark >= 0]
    ax.step(hx, hy, where="post", color="black", linewidth=2.5, label="HW (committed below)")
    last_epoch = None
    for x, s in zip(xs, history, strict=True):
        if s.leader_epoch != last_epoch:
            ax.axvline(x, color="grey", linestyle="--", linewidth=0.8)
            leader = "none" if s.leader is None else s.leader
            labels.append(
                ax.annotate(
                    f"epoch {s.leader_epoch}\nleader {leader}",
                    (x, 1.0),
                    xycoords=("data", "axes fraction"),
                    textcoords="offset points",
                    xytext=(0, 0),
                    fontsize=8,
                    va="top",
                    ha="left",
                )
            )
            last_epoch = s.leader_epoch
    marks: dict[float, list[str]] = {}
    for f in findings:
        if f["severity"] == "critical" and f["state"] in ("event", "open") and f["topic"]:
            marks.setdefault((f["at"] - t0) / 1000, []).append(str(f["kind"]))
        if f["kind"] == "committed_data_loss":
            d, x = f["details"], (f["at"] - t0) / 1000
            ax.axhspan(d["lost_from"], d["lost_to"], xmin=0, xmax=1, color="red", alpha=0.08)
            lost = f"lost committed offsets [{d['lost_from']}, {d['lost_to']}): {d['lost_count']}"
            labels.append(
                ax.annotate(
                    lost,
                    (x, (d["lost_from"] + d["lost_to"]) / 2),
                    annotation_clip=False,  # drawn (moved inside) even if x is off the axes
                    textcoords="offset points",
                    xytext=(0, 0),
                    color="darkred",
                    fontsize=9,
                    ha="right",
                    va="center",
                )
            )
    for x, kinds in marks.items():  # the findings of one instant: one label, a line each
        ax.axvline(x, color="red", linewidth=1.2, alpha=0.6)
        labels.append(
            ax.annotate(
                "\n".join(kinds),
                (x, 0.02),
                xycoords=("data", "axes fraction"),
                textcoords="offset points",
                xytext=(0, 0),
                color="red",
                fontsize=8,
                va="bottom",
                ha="right",
            )
        )
    ax.set_ylabel("offset")
    ax.set_title(f"{v.topic}/{v.partition} — replica LEOs, high watermark, leader epochs")
    legend = ax.legend(loc="center left", fontsize=8, framealpha=0.9)
    end = xs[-1] + max(1.0, (xs[-1] - xs[0]) * 0.02)
    for i, b in enumerate(brokers):
        spans = []
        for j, s in enumerate(history):
            if b in s.isr:
                nxt = xs[j + 1] if j + 1 < len(xs) else end
                spans.append((xs[j], nxt - xs[j]))
        isr_ax.broken_barh(spans, (i - 0.4, 0.8), color=colours[i % len(colours)])
    isr_ax.set_yticks(range(len(brokers)), [f"broker {b}" for b in brokers])
    isr_ax.set_ylabel("in ISR")
    isr_ax.set_xlabel("seconds since first sample")
    fig.tight_layout()
    # Taller until every label finds a free place: the axes grow with the figure while
    # the labels keep their size, so this ends (in practice at once).
    while not _place_labels(fig, ax, labels, legend):
        w, h = fig.get_size_inches()
        fig.set_size_inches(w, h * 1.5)
        fig.tight_layout()
    return fig


def _place_labels(fig: Figure, ax: Axes, labels: Sequence[Annotation], legend: Legend) -> bool:
    """Move the labels so that no two overlap; False when some label found no room.

    The rule: labels are placed one at a time, by x (then by text). A label keeps its x,
    shifted sideways only as far as needed to lie within the axes, and moves up or down
    to the free position nearest its anchor, in steps of ``_GAP_PX``: one where its
    rendered box (``get_window_extent``) lies inside the axes and stays ``_GAP_PX`` clear
    of the legend and of every label placed before it. Deterministic, whatever their
    number; labels at one instant end up stacked.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    assert isinstance(fig.canvas, FigureCanvasAgg)  # draw_watermarks chose Agg
    renderer = fig.canvas.get_renderer()  # type: ignore[no-untyped-call]
    frame = ax.get_window_extent(renderer).padded(-_GAP_PX)
    taken: list[Bbox] = [legend.get_window_extent(renderer).padded(_GAP_PX)]
    for label in labels:
        label.xyann = (0, 0)
    for label in sorted(labels, key=lambda t: (t.xy[0], t.get_text())):
        box = label.get_window_extent(renderer)
        dx = min(0.0, frame.x1 - box.x1)
        dx = max(dx, frame.x0 - box.x0)
        for dy in _nearest_first(frame.y0 - box.y0, frame.y1 - box.y1):
            moved = box.translated(dx, dy)
            if not any(moved.overlaps(other) for other in taken):
                break
        else:
            return False
        label.xyann = (dx * 72 / fig.dpi, dy * 72 / fig.dpi)  # pixels to points
        taken.append(moved.padded(_GAP_PX))
    return True


def _nearest_first(lo: float, hi: float) -> list[float]:
    """The multiples of ``_GAP_PX`` within [lo, hi], nearest to 0 first (up before down)."""
    steps = range(int(max(abs(lo), abs(hi)) / _GAP_PX) + 1)
    return [dy for k in steps for dy in (k * _GAP_PX, -k * _GAP_PX) if lo <= dy <= hi]
