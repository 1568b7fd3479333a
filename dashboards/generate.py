"""The Grafana dashboards, as code: ``python -m dashboards.generate`` (or
``monitor dashboards generate``) writes ``dashboards/json/*.json``.

Built with Grafana's foundation SDK (``grafana-foundation-sdk``): its typed builders produce
the dashboard model Grafana loads, so a field of the wrong shape is a type error here, not
a broken dashboard there. The generated JSON is committed (file provisioning reads it) and
a test regenerates it and compares.

Every expression uses only the metrics of docs/metrics.md (a test checks). The dashboards
share one Prometheus datasource, chosen by the ``datasource`` variable, whose default is
the datasource ``monitor dashboards push`` and ``deploy/grafana/provisioning`` create with
the fixed uid :data:`DATASOURCE_UID`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.builders import stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import prometheus as prom_model

from dashboards import DATASOURCE_NAME as DATASOURCE_NAME
from dashboards import DATASOURCE_UID as DATASOURCE_UID
from dashboards import FOLDER_UID as FOLDER_UID

OUT_DIR = Path(__file__).resolve().parent / "json"
TAGS = ["kafka", "replication"]

DS = model.DataSourceRef(type_val="prometheus", uid="${datasource}")

# Label matchers reused by the expressions. Single-valued variables match with `=`,
# multi-valued ones (with an "All" of `.*`) with `=~`.
C = 'cluster="$cluster"'
P = 'cluster="$cluster", topic="$topic", partition="$partition"'

Target = prom.Dataquery
PanelBuilder = timeseries.Panel | stat.Panel | table.Panel


# -- building blocks -----------------------------------------------------------------------


def q(expr: str, legend: str = "", ref: str = "A", instant: bool = False) -> Target:
    t = Target().expr(expr).ref_id(ref).datasource(DS)
    if legend:
        t = t.legend_format(legend)
    if instant:
        t = t.instant().format(prom_model.PromQueryFormat.TABLE)
    return t


def targets(*specs: tuple[str, str]) -> list[Target]:
    return [q(expr, legend, ref=chr(ord("A") + i)) for i, (expr, legend) in enumerate(specs)]


def series(
    title: str,
    description: str,
    specs: list[tuple[str, str]],
    *,
    unit: str = "short",
    w: int = 12,
    h: int = 8,
    stepped: bool = False,
    decimals: int | None = None,
    min_zero: bool = False,
) -> timeseries.Panel:
    p = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .targets(list(targets(*specs)))
        .unit(unit)
        .span(w)
        .height(h)
        .legend(
            common_builders.VizLegendOptions()
            .show_legend(True)
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
        )
    )
    if stepped:
        p = p.line_interpolation(common.LineInterpolation.STEP_AFTER)
    if decimals is not None:
        p = p.decimals(decimals)
    if min_zero:
        p = p.min(0)
    return p


def big(
    title: str,
    description: str,
    expr: str,
    *,
    red_from: float | None = 1,
    unit: str = "short",
    w: int = 4,
    h: int = 4,
    invert: bool = False,
) -> stat.Panel:
    """A stat: green, turning red from ``red_from`` (or red below 1 when ``invert``)."""
    if invert:
        steps = [
            model.Threshold(value=None, color="red"),
            model.Threshold(value=1, color="green"),
        ]
    else:
        steps = [model.Threshold(value=None, color="green")]
        if red_from is not None:
            steps.append(model.Threshold(value=red_from, color="red"))
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .with_target(q(expr))
        .unit(unit)
        .span(w)
        .height(h)
        .no_value("0")
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.AREA)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]))
        .thresholds(dash.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps(steps))
    )


def grid(
    title: str, description: str, expr: str, *, unit: str = "short", w: int = 24, h: int = 8
) -> table.Panel:
    return (
        table.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .with_target(q(expr, instant=True))
        .unit(unit)
        .span(w)
        .height(h)
        .with_transformation(
            model.DataTransformerConfig(
                id_val="organize",
                options={"excludeByName": {"Time": True, "__name__": True}},
            )
        )
    )


def row(title: str) -> dash.Row:
    return dash.Row(title)


def query_var(
    name: str, label: str, query: str, *, multi: bool = False, include_all: bool = False
) -> dash.QueryVariable:
    v = (
        dash.QueryVariable(name)
        .label(label)
        .query(query)
        .datasource(DS)
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.NATURAL_ASC)
        .multi(multi)
        .include_all(include_all)
    )
    if include_all:
        v = v.all_value(".*")
    return v


def datasource_var() -> dash.DatasourceVariable:
    return (
        dash.DatasourceVariable("datasource")
        .label("Prometheus")
        .type("prometheus")
        .current(model.VariableOption(selected=True, text=DATASOURCE_NAME, value=DATASOURCE_UID))
    )


def cluster_var() -> dash.QueryVariable:
    return query_var("cluster", "cluster", "label_values(kafka_replication_partitions, cluster)")


def topic_var(*, multi: bool) -> dash.QueryVariable:
    return query_var(
        "topic",
        "topic",
        f"label_values(kafka_replication_partition_high_watermark{{{C}}}, topic)",
        multi=multi,
        include_all=multi,
    )


def broker_var() -> dash.QueryVariable:
    return query_var(
        "broker",
        "broker",
        f"label_values(kafka_replication_broker_replicas{{{C}}}, broker)",
        multi=True,
        include_all=True,
    )


def base(uid: str, title: str, description: str) -> dash.Dashboard:
    return (
        dash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .editable()
        .link(
            dash.DashboardLink("Kafka replication")
            .type(model.DashboardLinkType.DASHBOARDS)
            .tags(TAGS)
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
        .with_variable(datasource_var())
        .with_variable(cluster_var())
    )


# -- the dashboards ------------------------------------------------------------------------


def cluster_overview() -> dash.Dashboard:
    d = base(
        "kafka-repl-overview",
        "Kafka replication: cluster overview",
        "Open findings by kind and severity, the conditions that page, and the monitor's own "
        "health. Metrics: docs/metrics.md.",
    )
    d = d.with_row(row("Now"))
    for title, desc, expr in (
        (
            "Under min ISR",
            "Partitions whose ISR is below min.insync.replicas: acks=all writes fail.",
            f'sum(kafka_replication_open_findings{{{C}, kind="under_min_isr"}})',
        ),
        (
            "Offline",
            "Partitions without a leader.",
            f'sum(kafka_replication_open_findings{{{C}, kind="offline"}})',
        ),
        (
            "Unclean elections",
            "Unclean leader elections since the monitor's state began.",
            f'sum(kafka_replication_finding_events_total{{{C}, kind="unclean_election"}})',
        ),
        (
            "Committed offsets lost",
            "Committed offsets lost (summed over committed_data_loss findings).",
            f"sum(kafka_replication_committed_offsets_lost_total{{{C}}})",
        ),
        (
            "Under replicated",
            "Partitions whose ISR is smaller than the replica set.",
            f'sum(kafka_replication_open_findings{{{C}, kind="under_replicated"}})',
        ),
    ):
        d = d.with_panel(big(title, desc, expr))
    d = d.with_panel(
        big(
            "Monitor up",
            "1 when the monitor's view is whole: job running, telemetry fresh, input lag "
            "under the limit. 0: everything else here may be stale.",
            "min(kafka_replication_monitor_up)",
            invert=True,
        )
    )
    d = d.with_row(row("Findings"))
    d = d.with_panel(
        series(
            "Open findings by kind and severity",
            "Open conditions, by kind (zeros hidden).",
            [
                (
                    f"sum by (kind, severity) (kafka_replication_open_findings{{{C}}}) > 0",
                    "{{kind}} ({{severity}})",
                )
            ],
            stepped=True,
            decimals=0,
        )
    )
    d = d.with_panel(
        series(
            "One-off findings (cumulative)",
            "Elections, ISR changes, losses since the monitor's state began: each step up "
            "is an event. (Drawn as counts, not increase(): a kind's counter is born at 1, "
            "which increase() cannot see.)",
            [(f"sum by (kind) (kafka_replication_finding_events_total{{{C}}})", "{{kind}}")],
            stepped=True,
            decimals=0,
            min_zero=True,
        )
    )
    d = d.with_panel(
        series(
            "Open findings by topic",
            "Open conditions per topic (topics with something to say).",
            [
                (
                    f"sum by (topic, kind) (kafka_replication_topic_open_findings{{{C}}})",
                    "{{topic}} {{kind}}",
                )
            ],
            stepped=True,
            decimals=0,
        )
    )
    d = d.with_panel(
        series(
            "Partitions tracked",
            "Partitions in the monitor's model.",
            [(f"kafka_replication_partitions{{{C}}}", "partitions")],
            decimals=0,
        )
    )
    d = d.with_panel(
        grid(
            "Open conditions (how long)",
            "Every open condition, with how long it has been open.",
            f"time() - kafka_replication_finding_open_since_timestamp_seconds{{{C}}}",
            unit="s",
        )
    )
    d = d.with_row(row("Monitor health"))
    d = d.with_panel(
        series(
            "Telemetry age",
            "Now minus the newest observed_at processed.",
            [(f"kafka_replication_monitor_telemetry_age_seconds{{{C}}}", "age")],
            unit="s",
            w=8,
        )
    )
    d = d.with_panel(
        series(
            "Input lag",
            "Events not yet processed (-1: unknown).",
            [("kafka_replication_monitor_input_lag_records", "records")],
            w=8,
        )
    )
    d = d.with_panel(
        series(
            "Events processed / dead-lettered",
            "Per-second rates of events applied and rejected.",
            [
                ("rate(kafka_replication_monitor_events_processed_total[$__rate_interval])", "ok"),
                (
                    "rate(kafka_replication_monitor_events_dead_lettered_total[$__rate_interval])",
                    "dead-lettered",
                ),
            ],
            unit="ops",
            w=8,
        )
    )
    return d


def partition_drilldown() -> dash.Dashboard:
    d = base(
        "kafka-repl-partition",
        "Kafka replication: partition",
        "One partition's watermark model: the HW against each replica's LEO, ISR against min "
        "ISR, follower lag, leader and epochs (epoch changes and one-off findings are "
        "annotations).",
    )
    d = d.with_variable(topic_var(multi=False))
    d = d.with_variable(
        query_var(
            "partition",
            "partition",
            "label_values(kafka_replication_partition_high_watermark"
            '{cluster="$cluster", topic="$topic"}, partition)',
        )
    )
    d = d.annotation(
        dash.AnnotationQuery()
        .name("Leader epoch changes")
        .datasource(DS)
        .enable(True)
        .icon_color("orange")
        .expr(f"changes(kafka_replication_partition_leader_epoch{{{P}}}[1m]) > 0")
    )
    d = d.annotation(
        dash.AnnotationQuery()
        .name("One-off findings")
        .datasource(DS)
        .enable(True)
        .icon_color("red")
        .expr(f"time() - kafka_replication_finding_last_event_timestamp_seconds{{{P}}} < 60")
    )
    d = d.with_row(row("Watermarks"))
    d = d.with_panel(
        series(
            "HW and each replica's LEO",
            "The high watermark (committed below it) against each replica's log end offset. "
            "A leader LEO above the HW is uncommitted; a follower LEO below it is lag; a HW "
            "that falls back means committed data was truncated.",
            [
                (f"kafka_replication_partition_high_watermark{{{P}}}", "HW"),
                (f"kafka_replication_partition_log_end_offset{{{P}}}", "LEO broker {{broker}}"),
            ],
            w=24,
            h=10,
        )
    )
    d = d.with_panel(
        series(
            "Uncommitted backlog",
            "Leader LEO - HW: offsets written but not yet committed.",
            [(f"kafka_replication_partition_uncommitted_offsets{{{P}}}", "uncommitted")],
        )
    )
    d = d.with_panel(
        series(
            "HW lag",
            "How long the HW has been behind the leader's LEO.",
            [(f"kafka_replication_partition_hw_lag_seconds{{{P}}}", "hw lag")],
            unit="s",
        )
    )
    d = d.with_row(row("ISR and leadership"))
    d = d.with_panel(
        series(
            "ISR size against min ISR",
            "Replicas in the ISR against min.insync.replicas and the replication factor. "
            "ISR below min ISR: acks=all writes are refused.",
            [
                (f"kafka_replication_partition_isr_size{{{P}}}", "ISR size"),
                (f"kafka_replication_partition_min_isr{{{P}}}", "min ISR"),
                (f"kafka_replication_partition_replicas{{{P}}}", "replicas"),
            ],
            stepped=True,
            decimals=0,
        )
    )
    d = d.with_panel(
        series(
            "Leader and leader epoch",
            "The leader broker (-1: offline) and the leader epoch.",
            [
                (f"kafka_replication_partition_leader{{{P}}}", "leader"),
                (f"kafka_replication_partition_leader_epoch{{{P}}}", "epoch"),
            ],
            stepped=True,
            decimals=0,
        )
    )
    d = d.with_row(row("Followers"))
    d = d.with_panel(
        series(
            "Follower lag (offsets)",
            "Each follower's offsets behind the leader.",
            [(f"kafka_replication_follower_lag_offsets{{{P}}}", "broker {{broker}}")],
        )
    )
    d = d.with_panel(
        series(
            "Follower lag (seconds)",
            "How long each follower has not held what the leader held.",
            [(f"kafka_replication_follower_lag_seconds{{{P}}}", "broker {{broker}}")],
            unit="s",
        )
    )
    d = d.with_row(row("Findings"))
    d = d.with_panel(
        grid(
            "Open conditions",
            "Conditions open on this partition, with how long they have been open.",
            f"time() - kafka_replication_finding_open_since_timestamp_seconds{{{P}}}",
            unit="s",
            w=12,
        )
    )
    d = d.with_panel(
        grid(
            "Last one-off findings",
            "When this partition's last one-off finding of each kind happened.",
            f"kafka_replication_finding_last_event_timestamp_seconds{{{P}}} * 1000",
            unit="dateTimeAsIso",
            w=8,
        )
    )
    d = d.with_panel(
        big(
            "Last loss",
            "Committed offsets lost by this partition's last committed_data_loss.",
            f"kafka_replication_partition_last_loss_offsets{{{P}}}",
            h=8,
        )
    )
    return d


def broker_view() -> dash.Dashboard:
    b = 'cluster="$cluster", broker=~"$broker"'
    d = base(
        "kafka-repl-broker",
        "Kafka replication: brokers",
        "What each broker leads and follows, the lag it causes, and what its loss would break.",
    )
    d = d.with_variable(broker_var())
    d = d.with_row(row("Brokers"))
    d = d.with_panel(
        series(
            "Broker up",
            "1 if the broker answered the collector in its last report.",
            [(f"kafka_replication_broker_up{{{b}}}", "broker {{broker}}")],
            stepped=True,
            decimals=0,
            w=24,
            h=6,
        )
    )
    d = d.with_panel(
        series(
            "Leads",
            "Partitions each broker leads.",
            [(f"kafka_replication_broker_leader_partitions{{{b}}}", "broker {{broker}}")],
            stepped=True,
            decimals=0,
        )
    )
    d = d.with_panel(
        series(
            "Follows",
            "Replicas each broker holds without leading them (replicas - leaders).",
            [
                (
                    f"kafka_replication_broker_replicas{{{b}}}"
                    f" - kafka_replication_broker_leader_partitions{{{b}}}",
                    "broker {{broker}}",
                )
            ],
            stepped=True,
            decimals=0,
        )
    )
    d = d.with_row(row("Lag it causes"))
    d = d.with_panel(
        series(
            "Lagging replicas",
            "The broker's replicas with an open follower_lag.",
            [(f"kafka_replication_broker_lagging_replicas{{{b}}}", "broker {{broker}}")],
            stepped=True,
            decimals=0,
            w=8,
        )
    )
    d = d.with_panel(
        series(
            "Offsets behind (sum over its follower replicas)",
            "Sum of the broker's followers' lag in offsets.",
            [
                (
                    f"sum by (broker) (kafka_replication_follower_lag_offsets{{{b}}})",
                    "broker {{broker}}",
                )
            ],
            w=8,
        )
    )
    d = d.with_panel(
        series(
            "Longest follower lag",
            "The broker's worst follower lag in seconds.",
            [
                (
                    f"max by (broker) (kafka_replication_follower_lag_seconds{{{b}}})",
                    "broker {{broker}}",
                )
            ],
            unit="s",
            w=8,
        )
    )
    d = d.with_row(row("What its loss would break"))
    d = d.with_panel(
        series(
            "Sole-ISR partitions",
            "Partitions whose ISR is only this broker: losing it takes them offline "
            "(or forces an unclean election).",
            [(f"kafka_replication_broker_sole_isr_partitions{{{b}}}", "broker {{broker}}")],
            stepped=True,
            decimals=0,
        )
    )
    d = d.with_panel(
        grid(
            "Partitions with a single in-sync replica (value: its leader)",
            "The partitions one broker away from offline, with the broker they hang on.",
            f"kafka_replication_partition_leader{{{C}}} and on (cluster, topic, partition) "
            f"(kafka_replication_partition_isr_size{{{C}}} == 1)",
            w=12,
        )
    )
    d = d.with_panel(
        grid(
            "Broker-level open conditions",
            "Conditions naming a broker (follower lag, silence), with how long they are open.",
            f'time() - kafka_replication_finding_open_since_timestamp_seconds{{{b}, broker!=""}}',
            unit="s",
        )
    )
    return d


def elections_and_loss() -> dash.Dashboard:
    t = 'cluster="$cluster", topic=~"$topic"'
    d = base(
        "kafka-repl-elections",
        "Kafka replication: elections and data loss",
        "Leader elections, clean and unclean, and the committed offsets lost, by topic.",
    )
    d = d.with_variable(topic_var(multi=True))
    d = d.with_row(row("Totals"))
    for title, desc, expr in (
        (
            "Clean elections",
            "Clean leader elections since the monitor's state began.",
            f'sum(kafka_replication_finding_events_total{{{C}, kind="leader_election"}})',
        ),
        (
            "Unclean elections",
            "Unclean leader elections (an out-of-sync replica became leader).",
            f'sum(kafka_replication_finding_events_total{{{C}, kind="unclean_election"}})',
        ),
        (
            "Data-loss findings",
            "committed_data_loss findings since the monitor's state began.",
            f'sum(kafka_replication_finding_events_total{{{C}, kind="committed_data_loss"}})',
        ),
        (
            "Committed offsets lost",
            "Committed offsets lost in the selected topics.",
            f"sum(kafka_replication_committed_offsets_lost_total{{{t}}})",
        ),
    ):
        d = d.with_panel(
            big(title, desc, expr, w=6, red_from=None if title == "Clean elections" else 1)
        )
    d = d.with_row(row("Over time"))
    d = d.with_panel(
        series(
            "Elections (cumulative)",
            "Leader elections since the monitor's state began, clean and unclean: each step "
            "up is an election (counts, not increase(): a counter born at 1 is invisible to "
            "increase()).",
            [
                (
                    "sum by (kind) (kafka_replication_finding_events_total"
                    f'{{{C}, kind=~"leader_election|unclean_election"}})',
                    "{{kind}}",
                )
            ],
            stepped=True,
            decimals=0,
            min_zero=True,
        )
    )
    d = d.with_panel(
        series(
            "Committed offsets lost, by topic",
            "Cumulative committed offsets lost per topic.",
            [
                (
                    f"sum by (topic) (kafka_replication_committed_offsets_lost_total{{{t}}})",
                    "{{topic}}",
                )
            ],
            stepped=True,
            decimals=0,
            min_zero=True,
        )
    )
    d = d.with_panel(
        series(
            "Partitions with a recent election or loss",
            "Partitions whose last unclean election / data loss / HW regression happened "
            "within the last 15 minutes (what pages).",
            [
                (
                    "count by (kind) (time() - "
                    "kafka_replication_finding_last_event_timestamp_seconds"
                    f'{{{t}, kind=~"unclean_election|committed_data_loss|hw_regression"}} < 900)',
                    "{{kind}}",
                )
            ],
            stepped=True,
            decimals=0,
            w=24,
        )
    )
    d = d.with_row(row("Which partitions"))
    d = d.with_panel(
        grid(
            "Last election / loss per partition",
            "When each partition's last election, unclean election or loss happened.",
            "kafka_replication_finding_last_event_timestamp_seconds"
            f'{{{t}, kind=~"leader_election|unclean_election|committed_data_loss"}} * 1000',
            unit="dateTimeAsIso",
            w=14,
        )
    )
    d = d.with_panel(
        grid(
            "Offsets lost by the last loss",
            "lost_count of each partition's last committed_data_loss.",
            f"kafka_replication_partition_last_loss_offsets{{{t}}}",
            w=10,
        )
    )
    return d


DASHBOARDS: dict[str, Callable[[], dash.Dashboard]] = {
    "cluster-overview.json": cluster_overview,
    "partition-drilldown.json": partition_drilldown,
    "broker-view.json": broker_view,
    "elections-and-data-loss.json": elections_and_loss,
}


# -- output --------------------------------------------------------------------------------


def to_dict(d: model.Dashboard) -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (a plain dict)."""
    out: dict[str, Any] = json.loads(json.dumps(d, cls=JSONEncoder))
    return out


def render_all() -> dict[str, str]:
    """File name -> JSON text of every dashboard (stable: sorted keys, trailing newline)."""
    out = {}
    for name, build in DASHBOARDS.items():
        d = build().build()
        for i, p in enumerate(d.panels or [], start=1):
            p.id_val = i  # stable ids: links and annotations refer to panels by id
        out[name] = json.dumps(to_dict(d), indent=2, sort_keys=True) + "\n"
    return out


def write(out_dir: Path = OUT_DIR) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_all().items():
        path = out_dir / name
        path.write_text(text)
        written.append(path)
    return written


def load(out_dir: Path = OUT_DIR) -> dict[str, dict[str, Any]]:
    """The committed dashboards, by file name."""
    return {p.name: json.loads(p.read_text()) for p in sorted(out_dir.glob("*.json"))}


def iter_panels(d: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in d.get("panels") or []:
        yield p
        yield from p.get("panels") or []  # panels nested in collapsed rows


def expressions(d: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target, annotation and query variable."""
    out = []
    for p in iter_panels(d):
        for t in p.get("targets") or []:
            if t.get("expr"):
                out.append((f"panel {p.get('title')!r} {t.get('refId')}", t["expr"]))
    for a in d.get("annotations", {}).get("list", []):
        if a.get("expr"):
            out.append((f"annotation {a['name']!r}", a["expr"]))
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            out.append((f"variable {v['name']!r}", v["query"]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output folder")
    args = parser.parse_args(argv)
    for path in write(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
