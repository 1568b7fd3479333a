"""Draw the dashboards' key panels to PNG from a Prometheus, as Grafana would draw them.

Each panel's PromQL (from the committed ``dashboards/json``) is run as a range query
(``/api/v1/query_range``) with the template variables expanded, and drawn with matplotlib:
time series as lines (stepped where the panel is), stats as their last value, leader-epoch
annotations as vertical lines. Three sources:

  python -m monitor.dev.panels --prometheus-url http://127.0.0.1:9090 --var topic=orders
  python -m monitor.dev.panels --demo-dir .cache/demo     # the Prometheus data `monitor demo` left
  python -m monitor.dev.panels --replay                   # replayed incidents, played live

Writes ``docs/img/dashboard-*.png`` by default.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from dashboards.generate import load

ROOT = Path(__file__).resolve().parents[2]
IMG = ROOT / "docs" / "img"


class QueryError(RuntimeError):
    pass


# -- PromQL as Grafana sends it ------------------------------------------------------------


def expand(expr: str, variables: Mapping[str, str], step_s: float = 15.0) -> str:
    """Grafana's variable interpolation, for the forms the dashboards use: ``$name`` and
    ``${name}`` (a value, or a regex such as ``.*`` for "All"), and the built-in intervals
    ``$__rate_interval`` (at least 4 steps), ``$__interval`` and ``$__range``."""
    rate = f"{max(int(4 * step_s), 4)}s"
    builtins = {
        "__rate_interval": rate,
        "__interval": f"{max(int(step_s), 1)}s",
        "__range": variables.get("__range", "1h"),
    }

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in builtins:
            return builtins[name]
        if name not in variables:
            raise KeyError(f"no value for ${name} in {expr!r}")
        return variables[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, expr)


def label_values_as_promql(query: str) -> str:
    """``label_values(m{...}, l)`` (a Grafana variable query) as PromQL with the same
    answer: ``count by (l) (m{...})``."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query, flags=re.S)
    if not m:
        raise ValueError(f"not a label_values() query: {query!r}")
    return f"count by ({m.group(2)}) ({m.group(1)})"


def _get(url: str, timeout: float = 10.0) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise QueryError(e.read().decode(errors="replace")[:500]) from None
    if body.get("status") != "success":
        raise QueryError(str(body)[:500])
    return body["data"]


def query_range(
    base_url: str, expr: str, start: float, end: float, step: float
) -> list[dict[str, Any]]:
    """A range query; raises :class:`QueryError` with Prometheus's message when rejected."""
    params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
    try:
        data = _get(f"{base_url}/api/v1/query_range?{urllib.parse.urlencode(params)}")
    except QueryError as e:
        raise QueryError(f"{expr!r}: {e}") from None
    result: list[dict[str, Any]] = data["result"]
    return result


def legend(fmt: str, labels: Mapping[str, str]) -> str:
    if not fmt:
        return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt)


# -- drawing -------------------------------------------------------------------------------


@dataclass
class Window:
    start: float
    end: float
    step: float


def _panel(dashboard: dict[str, Any], title: str) -> dict[str, Any]:
    for p in dashboard["panels"]:
        if p.get("title") == title:
            found: dict[str, Any] = p
            return found
    raise KeyError(f"no panel {title!r} in {dashboard['title']!r}")


def _fmt_value(v: float, unit: str) -> str:
    if math.isnan(v):
        return "-"
    if unit == "s":
        return f"{v:.1f} s"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"


def draw_panel(
    ax: Any, panel: dict[str, Any], base_url: str, win: Window, variables: Mapping[str, str]
) -> int:
    """Draw one panel on ``ax``; returns the number of series drawn."""
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
    stepped = panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {}).get(
        "lineInterpolation"
    ) in ("stepAfter", "stepBefore")
    n = 0
    ax.set_title(panel["title"], loc="left", fontsize=10, fontweight="bold")
    if panel["type"] == "stat":
        t = panel["targets"][0]
        res = query_range(base_url, expand(t["expr"], variables, win.step), **_w(win))
        last = float(res[0]["values"][-1][1]) if res and res[0]["values"] else 0.0
        steps = panel["fieldConfig"]["defaults"].get("thresholds", {}).get("steps", [])
        colour = "#73BF69"
        for s in steps:
            if s.get("value") is None or last >= s["value"]:
                colour = {"green": "#73BF69", "red": "#F2495C"}.get(s["color"], s["color"])
        ax.set_facecolor(colour)
        ax.text(
            0.5,
            0.45,
            _fmt_value(last, unit),
            ha="center",
            va="center",
            fontsize=26,
            color="white",
            fontweight="bold",
            transform=ax.transAxes,
        )
        if res and len(res[0]["values"]) > 1:
            xs = [datetime.fromtimestamp(float(x)) for x, _ in res[0]["values"]]
            ys = [float(y) for _, y in res[0]["values"]]
            ax2 = ax.twinx()
            ax2.fill_between(xs, ys, step="post", color="white", alpha=0.25)
            ax2.set_ylim(0, max(max(ys) * 3, 1))
            ax2.axis("off")
        ax.set_xticks([])
        ax.set_yticks([])
        return len(res)
    for t in panel["targets"]:
        res = query_range(base_url, expand(t["expr"], variables, win.step), **_w(win))
        for s in res:
            xs = [datetime.fromtimestamp(float(x)) for x, _ in s["values"]]
            ys = [float(y) for _, y in s["values"]]
            label = legend(t.get("legendFormat", ""), s["metric"])
            if stepped:
                ax.step(xs, ys, where="post", label=label, linewidth=1.6)
            else:
                ax.plot(xs, ys, label=label, linewidth=1.6)
            n += 1
    ax.grid(True, alpha=0.3)
    if panel.get("fieldConfig", {}).get("defaults", {}).get("min") == 0:
        ax.set_ylim(bottom=0)
    ax.set_xlim(datetime.fromtimestamp(win.start), datetime.fromtimestamp(win.end))
    if unit == "s":
        ax.set_ylabel("seconds", fontsize=8)
    ax.tick_params(labelsize=8)
    if n:
        ax.legend(fontsize=7, loc="upper left", ncol=min(n, 4), framealpha=0.7)
    else:
        ax.text(0.5, 0.5, "No data", ha="center", va="center", transform=ax.transAxes, color="grey")
    return n


def draw_annotations(
    ax: Any, dashboard: dict[str, Any], base_url: str, win: Window, variables: Mapping[str, str]
) -> None:
    colours = {"orange": "#FF9830", "red": "#F2495C"}
    for a in dashboard.get("annotations", {}).get("list", []):
        if not a.get("expr") or not a.get("enable"):
            continue
        res = query_range(base_url, expand(a["expr"], variables, win.step), **_w(win))
        first = True
        for s in res:
            prev = None
            for x, _ in s["values"]:
                x = float(x)
                if prev is None or x - prev > win.step * 1.5:  # a new region starts
                    ax.axvline(
                        datetime.fromtimestamp(x),
                        color=colours.get(a.get("iconColor", ""), "grey"),
                        linestyle="--",
                        linewidth=1,
                        label=a["name"] if first else None,
                    )
                    first = False
                prev = x


def _w(win: Window) -> dict[str, float]:
    return {"start": win.start, "end": win.end, "step": win.step}


SHEETS: dict[str, tuple[str, list[str], bool]] = {
    # png name: (dashboard file, panel titles, draw annotations)
    "dashboard-partition.png": (
        "partition-drilldown.json",
        [
            "HW and each replica's LEO",
            "ISR size against min ISR",
            "Uncommitted backlog",
            "Leader and leader epoch",
            "Follower lag (offsets)",
            "Follower lag (seconds)",
        ],
        True,
    ),
    "dashboard-overview.png": (
        "cluster-overview.json",
        [
            "Under min ISR",
            "Offline",
            "Unclean elections",
            "Committed offsets lost",
            "Open findings by kind and severity",
            "One-off findings (cumulative)",
        ],
        False,
    ),
    "dashboard-elections.png": (
        "elections-and-data-loss.json",
        [
            "Clean elections",
            "Unclean elections",
            "Elections (cumulative)",
            "Committed offsets lost, by topic",
        ],
        False,
    ),
    "dashboard-brokers.png": (
        "broker-view.json",
        ["Broker up", "Leads", "Lagging replicas", "Sole-ISR partitions"],
        False,
    ),
}


def render_sheet(
    png: str,
    base_url: str,
    win: Window,
    variables: Mapping[str, str],
    out_dir: Path,
    subtitle: str = "",
    prefix: str = "",
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    file, titles, annotate = SHEETS[png]
    dashboard = load()[file]
    panels = [_panel(dashboard, t) for t in titles]
    stats = [p for p in panels if p["type"] == "stat"]
    graphs = [p for p in panels if p["type"] != "stat"]
    rows = (1 if stats else 0) + math.ceil(len(graphs) / 2)
    fig = plt.figure(figsize=(13, 1.6 * bool(stats) + 3.4 * math.ceil(len(graphs) / 2)))
    heights = ([0.5] if stats else []) + [1.0] * math.ceil(len(graphs) / 2)
    gs = fig.add_gridspec(rows, max(len(stats), 2) * 2 if stats else 2, height_ratios=heights)
    ncols = gs.ncols
    for i, p in enumerate(stats):
        span = ncols // len(stats)
        ax = fig.add_subplot(gs[0, i * span : (i + 1) * span])
        draw_panel(ax, p, base_url, win, variables)
    half = ncols // 2
    for i, p in enumerate(graphs):
        r = (1 if stats else 0) + i // 2
        ax = fig.add_subplot(gs[r, (i % 2) * half : (i % 2 + 1) * half])
        draw_panel(ax, p, base_url, win, variables)
        if annotate:
            draw_annotations(ax, dashboard, base_url, win, variables)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7, loc="upper left", ncol=3, framealpha=0.7)
        ax.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=7))  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))  # type: ignore[no-untyped-call]
    used = {v["name"] for v in dashboard["templating"]["list"]} - {"datasource"}
    shown = ", ".join(f"{k}={v}" for k, v in variables.items() if k in used)
    fig.suptitle(f"{dashboard['title']}   ({shown}){subtitle}", fontsize=12, x=0.01, ha="left")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{prefix}{png}"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def render_all(
    base_url: str,
    win: Window,
    variables: Mapping[str, str],
    out_dir: Path = IMG,
    prefix: str = "",
    subtitle: str = "",
    sheets: Sequence[str] | None = None,
) -> list[Path]:
    out = []
    for png in sheets or SHEETS:
        out.append(render_sheet(png, base_url, win, variables, out_dir, subtitle, prefix))
    return out


def data_window(base_url: str, lookback_s: float = 6 * 3600) -> Window:
    """The span of the monitor's samples in the last ``lookback_s`` (a finished run)."""
    now = time.time()
    step = max(1.0, lookback_s / 10_000)
    # The samples' own times: a plain range query would repeat the last sample for the
    # 5-minute lookback after a Prometheus that stopped without writing stale markers.
    res = query_range(
        base_url, "timestamp(kafka_replication_monitor_up)", now - lookback_s, now, step
    )
    ts = [float(v) for s in res for _, v in s["values"]]
    if not ts:
        raise QueryError(f"no kafka_replication_monitor_up samples in the last {lookback_s}s")
    return Window(min(ts), max(ts), 2.0)


def _vars(pairs: Sequence[str]) -> dict[str, str]:
    out = {"datasource": "prometheus", "cluster": "lab", "broker": ".*"}
    for kv in pairs:
        k, _, v = kv.partition("=")
        out[k] = v
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--prometheus-url", help="a running Prometheus")
    src.add_argument("--demo-dir", type=Path, help="a `monitor demo --dir` folder, after the run")
    src.add_argument("--replay", action="store_true", help="replayed incidents, played live")
    parser.add_argument("--var", action="append", default=[], help="NAME=VALUE (repeatable)")
    parser.add_argument("--start", type=float, help="Unix seconds (default: the data's span)")
    parser.add_argument("--end", type=float, help="Unix seconds")
    parser.add_argument("--step", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=IMG)
    parser.add_argument("--prefix", default="", help="prefix of the PNG names")
    args = parser.parse_args(argv)
    variables = _vars(args.var)

    def window(url: str) -> Window:
        if args.start and args.end:
            return Window(args.start, args.end, args.step)
        w = data_window(url)
        return Window(args.start or w.start, args.end or w.end, args.step)

    if args.prometheus_url:
        paths = render_all(
            args.prometheus_url, window(args.prometheus_url), variables, args.out, args.prefix
        )
    elif args.demo_dir:
        from monitor.dev.processes.prom import PrometheusProcess, free_port

        # Reopen the run's TSDB; scrape nothing (closed ports), so no new samples are added.
        prom = PrometheusProcess(
            args.demo_dir / "prometheus",
            exporter=f"127.0.0.1:{free_port()}",
            collector=f"127.0.0.1:{free_port()}",
            alertmanager=f"127.0.0.1:{free_port()}",
        )
        prom.start()
        try:
            variables.setdefault("topic", "orders")
            variables.setdefault("partition", "0")
            paths = render_all(
                prom.url,
                window(prom.url),
                variables,
                args.out,
                args.prefix,
                "  - live lab incident (monitor demo)",
            )
        finally:
            prom.stop()
    else:
        from monitor.dev.feed import replayed_prometheus

        with tempfile.TemporaryDirectory() as tmp, replayed_prometheus(Path(tmp)) as (prom, feed):
            print("playing the replayed incidents ...", flush=True)
            start = time.time()
            feed.done.wait(300)
            time.sleep(6)
            variables.setdefault("topic", "unclean")
            variables.setdefault("partition", "0")
            paths = render_all(
                prom.url,
                Window(start - 2, time.time(), 1.0),
                variables,
                args.out,
                args.prefix,
                "  - replayed incidents",
            )
    for p in paths:
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
