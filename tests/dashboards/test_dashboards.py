"""The generated dashboards: in sync with their generator, valid for Grafana's dashboard
model (the foundation SDK's types), and using only the metrics of docs/metrics.md."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model

from dashboards.generate import (
    DASHBOARDS,
    DATASOURCE_UID,
    OUT_DIR,
    expressions,
    iter_panels,
    load,
    main,
)

ROOT = Path(__file__).resolve().parents[2]
METRICS_DOC = ROOT / "docs" / "metrics.md"


def documented_metrics() -> set[str]:
    text = METRICS_DOC.read_text()
    return set(re.findall(r"`(kafka_replication_[a-z_]+)", text))


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bkafka_replication_[a-z_]+\b", expr))


def test_committed_json_is_what_the_generator_writes(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path)]) == 0
    fresh = {p.name: p.read_text() for p in sorted(tmp_path.glob("*.json"))}
    committed = {p.name: p.read_text() for p in sorted(OUT_DIR.glob("*.json"))}
    assert set(fresh) == set(DASHBOARDS)
    stale = [n for n in fresh if committed.get(n) != fresh[n]]
    assert committed.keys() == fresh.keys() and not stale, (
        f"dashboards/json is out of date ({stale or sorted(committed.keys() ^ fresh.keys())}): "
        "run `python -m dashboards.generate` and commit the result"
    )


def _round_trip(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(model.Dashboard.from_json(d), cls=JSONEncoder))
    return out


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_dashboard_is_grafanas_model(name: str) -> None:
    """Decoding into the SDK's Dashboard type and encoding back loses nothing: every
    field is one Grafana's dashboard model has, with the shape it has."""
    d = load()[name]
    assert _round_trip(d) == d
    assert d["schemaVersion"] >= 39
    assert d["uid"] and len(d["uid"]) <= 40
    ids = [p["id"] for p in iter_panels(d)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for p in iter_panels(d):
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)) and all(refs), p["title"]
    ds = [v for v in d["templating"]["list"] if v["type"] == "datasource"]
    assert ds and ds[0]["current"]["value"] == DATASOURCE_UID


def test_round_trip_catches_a_field_grafana_does_not_have() -> None:
    """The model check can fail: a misspelt panel field does not survive the round trip."""
    d = copy.deepcopy(load()["partition-drilldown.json"])
    d["panels"][1]["gridPosition"] = d["panels"][1].pop("gridPos")
    assert _round_trip(d) != d


def test_every_metric_is_documented() -> None:
    documented = documented_metrics()
    assert "kafka_replication_partition_high_watermark" in documented  # the parser works
    used: set[str] = set()
    undocumented = []
    for name, d in load().items():
        for where, expr in expressions(d):
            for m in metric_names(expr):
                used.add(m)
                if m not in documented:
                    undocumented.append(f"{name} {where}: {m}")
    assert undocumented == []
    assert len(used) >= 25, sorted(used)


def test_the_dashboards_show_the_watermark_model() -> None:
    """The issue's panels are there: HW against each LEO, ISR against min ISR, lag in
    offsets and seconds, epochs as annotations; template variables on our metrics."""
    dashboards = load()
    drill = dashboards["partition-drilldown.json"]
    exprs = " ".join(e for _, e in expressions(drill))
    for metric in (
        "kafka_replication_partition_high_watermark",
        "kafka_replication_partition_log_end_offset",
        "kafka_replication_partition_uncommitted_offsets",
        "kafka_replication_partition_isr_size",
        "kafka_replication_partition_min_isr",
        "kafka_replication_follower_lag_offsets",
        "kafka_replication_follower_lag_seconds",
    ):
        assert metric in exprs, metric
    annotations = drill["annotations"]["list"]
    assert any("kafka_replication_partition_leader_epoch" in a["expr"] for a in annotations)
    names = {n: {v["name"] for v in d["templating"]["list"]} for n, d in dashboards.items()}
    assert {"datasource", "cluster", "topic", "partition"} <= names["partition-drilldown.json"]
    assert {"datasource", "cluster", "broker"} <= names["broker-view.json"]
    assert {"datasource", "cluster", "topic"} <= names["elections-and-data-loss.json"]
    for d in dashboards.values():
        for v in d["templating"]["list"]:
            if v["type"] == "query":
                assert v["query"].startswith("label_values(kafka_replication_"), v


def test_file_provisioning_matches_the_dashboards() -> None:
    """deploy/grafana/provisioning names the datasource uid and folder the dashboards use."""
    import yaml

    from dashboards.generate import DATASOURCE_NAME, FOLDER_UID

    prov = ROOT / "deploy" / "grafana" / "provisioning"
    ds = yaml.safe_load((prov / "datasources" / "kafka-replication.yaml").read_text())
    (source,) = ds["datasources"]
    assert source["uid"] == DATASOURCE_UID and source["type"] == "prometheus"
    assert source["name"] == DATASOURCE_NAME
    boards = yaml.safe_load((prov / "dashboards" / "kafka-replication.yaml").read_text())
    (provider,) = boards["providers"]
    assert provider["type"] == "file" and provider["folderUid"] == FOLDER_UID
    assert ds["apiVersion"] == 1 and boards["apiVersion"] == 1
