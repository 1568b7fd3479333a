"""Selectors of PromQL queries checked against a live Prometheus: every metric a query names
has series, every label it matches on exists, every exact label value is one some series
carries. Used by the runbook's live test and the dashboards' live test."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from typing import Any

from monitor.collector.collector import _Health
from monitor.dev.processes.prom import PrometheusProcess
from monitor.model import FindingKind

#: Metrics of the collector's own /metrics (no collector runs in these tests): their names are
#: checked against the collector's registry instead.
COLLECTOR_METRICS = re.compile(r"kafka_replication_collector_\w+")


def collector_metric_names() -> set[str]:
    names = set()
    for family in _Health().registry.collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


#: A vector selector: a metric name, optionally with matchers. (Every metric the
#: runbook may use is ``kafka_replication_*`` or ``up``: test_rules.py checks that.)
SELECTOR = re.compile(r"\b(?P<name>kafka_replication_\w+|up)\b(?P<matchers>\{[^}]*\})?")
EXAMPLE_LABELS = {"cluster", "topic", "partition", "broker"}
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')


def get(prom: PrometheusProcess, path: str, **params: str) -> list[Any]:
    url = f"{prom.url}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    data: list[Any] = body["data"]
    return data


def matcher_problems(prom: PrometheusProcess, query: str) -> list[str]:
    """What is wrong with the selectors of ``query``: a metric without series, a label
    the metric does not have, an exact (or ``a|b`` regex) value that no series of the
    metric carries (an example label's: no series at all; a ``kind``: no finding kind)."""
    problems = []
    for m in SELECTOR.finditer(query):
        name = m.group("name")
        if COLLECTOR_METRICS.fullmatch(name):
            if name not in collector_metric_names():
                problems.append(f"the collector has no metric {name}")
            continue
        series = get(prom, "/api/v1/series", **{"match[]": name})
        if not series:
            problems.append(f"{name} has no series")
            continue
        labels = set().union(*(s.keys() for s in series))
        for label, op, value in MATCHER.findall(m.group("matchers") or ""):
            if label not in labels:
                problems.append(f"{name} has no label {label!r} (it has {sorted(labels)})")
                continue
            if op not in ("=", "=~") or not re.fullmatch(r"[\w|-]+", value):
                continue
            if label == "kind":
                known = {str(k) for k in FindingKind}
            else:
                # The example labels name the section's incident, which may lack this
                # metric (EXPECTED_EMPTY says so): their values need only exist somewhere.
                scope = {} if label in EXAMPLE_LABELS else {"match[]": name}
                known = set(get(prom, f"/api/v1/label/{label}/values", **scope))
            for v in value.split("|"):
                if v not in known:
                    problems.append(f"no {name} series has {label}={v!r}")
    return problems
