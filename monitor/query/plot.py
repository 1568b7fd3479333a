"""The watermark diagram of one partition (``monitor explain --plot``), in the spirit of
the seeds' figures: each replica's LEO and the HW over time, epoch boundaries, ISR
membership, and the critical findings. Needs matplotlib (the ``plot`` extra)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from monitor.contract.state import PartitionView
from monitor.query.sources import Sample


def plot_watermarks(
    v: PartitionView, history: Sequence[Sample], findings: Sequence[dict[str, Any]], out: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = list(history)  # a copy: a live recorder may still be appending
    if not history:
        raise ValueError(f"no history recorded for {v.topic}/{v.partition}")
    t0 = history[0].at
    brokers = sorted({b for s in history for b, _ in s.leos} | set(v.replicas))
    fig, (ax, isr_ax) = plt.subplots(
        2, 1, figsize=(10, 6), sharex=True, gridspec_kw={"height_ratios": [4, 1]}
    )
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
            ax.annotate(
                f"epoch {s.leader_epoch}\nleader {leader}",
                (x, 1.0),
                xycoords=("data", "axes fraction"),
                fontsize=8,
                va="top",
                ha="left",
            )
            last_epoch = s.leader_epoch
    marks: dict[float, list[str]] = {}
    for f in findings:
        if f["severity"] == "critical" and f["state"] in ("event", "open") and f["topic"]:
            marks.setdefault((f["at"] - t0) / 1000, []).append(str(f["kind"]))
        if f["kind"] == "committed_data_loss":
            d, x = f["details"], (f["at"] - t0) / 1000
            ax.axhspan(d["lost_from"], d["lost_to"], xmin=0, xmax=1, color="red", alpha=0.08)
            ax.annotate(
                f"lost committed offsets [{d['lost_from']}, {d['lost_to']}): {d['lost_count']}",
                (x, (d["lost_from"] + d["lost_to"]) / 2),
                color="darkred",
                fontsize=9,
                ha="right",
                va="center",
            )
    for x, kinds in marks.items():
        ax.axvline(x, color="red", linewidth=1.2, alpha=0.6)
        ax.annotate(
            "\n".join(kinds),
            (x, 0.02),
            xycoords=("data", "axes fraction"),
            color="red",
            fontsize=8,
            va="bottom",
            ha="right",
        )
    ax.set_ylabel("offset")
    ax.set_title(f"{v.topic}/{v.partition} — replica LEOs, high watermark, leader epochs")
    ax.legend(loc="center left", fontsize=8, framealpha=0.9)
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
    fig.savefig(out, dpi=110)
    plt.close(fig)
