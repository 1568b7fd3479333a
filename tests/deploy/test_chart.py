"""The Helm chart (deploy/helm/kafka-replication-monitor), checked with the real tools.

- its copies of the rule files and dashboards equal the package's (scripts/k8s-tools.sh sync);
- ``helm lint --strict`` and ``helm template`` with the default values and with every
  optional part on; values.schema.json refuses bad values;
- the core objects are valid Kubernetes objects (kubernetes-validate, strict, on the oldest
  Kubernetes the chart allows and the newest the tool knows); the custom resources are
  valid against their CRDs' schemas (check-jsonschema; ServiceMonitor and PrometheusRule
  from prometheus-operator's Go module, SparkApplication from spark-operator's), with no
  field the CRD does not name;
- the PrometheusRule's groups pass ``promtool check rules`` and the shipped rule tests
  (``promtool test rules``), with the default values and with custom ones; custom runbook
  and selector values reach every rule; the default selectors select the jobs the chart's
  own ServiceMonitors give their targets; the rules equal ``monitor assets rules``' rendering;
- the collector's rendered collector.toml and the Spark job's arguments and environment
  load with the project's own settings models (monitor/collector/config.py,
  streaming/config.py);
- the pods: non-root, read-only root filesystem, probes on /metrics, secrets only as
  references to existing Secrets; the Spark pods' entrypoint script (files/bin) turns
  Spark's ``driver`` / ``executor`` arguments into the right commands (run with stubs);
- guarded /metrics (webConfig, networkPolicy): the rendered web-config.yml loads with the
  monitor's own loader (monitor/web/config.py) from the files the pods mount, the
  collector's web_config_file and the driver's --web-config-file name it, the
  ServiceMonitors scrape with https, tlsConfig and basicAuth (valid against the CRD), the
  collector's probes are TCP connects, the NetworkPolicies admit the scrapers to the metrics
  ports only (and the job's pods to each other), and values that would guard nothing or
  blind Prometheus are refused, naming the value.

The tools are installed by ``scripts/k8s-tools.sh install`` into .cache/tools (pinned:
``scripts/k8s-tools.sh versions``); promtool is Debian's (scripts/bootstrap.sh).
"""

from __future__ import annotations

import base64
import copy
import filecmp
import json
import os
import re
import shutil
import ssl
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from monitor.dev.pki import Pki, make_pki
from tests.deploy.chart_helpers import (
    ALL_ENABLED,
    BASIC_AUTH_SECRET,
    CHART,
    CLIENT_CERT_SECRET,
    CLUSTERS,
    COLLECTOR_SELECTOR_DEFAULT,
    CR_SCHEMAS,
    DASHBOARDS_DIR,
    GUARDED,
    JOB_LABEL_KEY,
    MONITOR_SELECTOR_DEFAULT,
    RULE_TESTS_DIR,
    RULES_DIR,
    RUNBOOK_DEFAULT,
    SCRAPE_PASSWORD,
    TLS_SECRET,
    TOOLS_SCRIPT,
    WEB_ROOT,
    Tools,
    alert_rules,
    describe,
    install_tools,
    matches,
    mount_secrets,
    mounted,
    one,
    render,
    run,
    scrape_jobs,
    selects,
    template,
    write_rule_files,
    write_values,
)
from tests.promtools import find_binary

#: The oldest Kubernetes the chart allows (Chart.yaml kubeVersion) and the newest
#: kubernetes-validate knows.
KUBE_VERSIONS = ("1.25.0", "1.37.0")

#: Values whose alerts name another runbook and other scrape jobs.
CUSTOM_ALERTS = {
    "runbookUrl": "https://runbooks.example.com/kafka/replication",
    "monitorSelector": 'job="kps-replication-monitor",namespace="monitoring"',
    "collectorSelector": 'job="kps-replication-collector"',
}

SECRET_ROOT = "/etc/kafka-replication-monitor/secrets"


@pytest.fixture(scope="session")
def tools() -> Tools:
    return install_tools()


@pytest.fixture(scope="session")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chart")


@pytest.fixture(scope="session")
def default_docs(tools: Tools, work: Path) -> list[dict[str, Any]]:
    """The defaults, but for the values that have none (CLUSTERS)."""
    return render(tools, work, CLUSTERS)


@pytest.fixture(scope="session")
def all_docs(tools: Tools, work: Path) -> list[dict[str, Any]]:
    return render(tools, work, ALL_ENABLED)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in (dicts recursively)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def merged(*overrides: dict[str, Any]) -> dict[str, Any]:
    """ALL_ENABLED with ``overrides`` merged in (dicts recursively)."""
    out = ALL_ENABLED
    for o in overrides:
        out = merge(out, o)
    return out


def least(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` on top of the least a release is given (CLUSTERS)."""
    return merge(CLUSTERS, values)


#: The value sets the render checks run with: the least, every part on, and every part on
#: with both /metrics guarded (GUARDED).
VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": CLUSTERS,
    "all": ALL_ENABLED,
    "guarded": merge(ALL_ENABLED, GUARDED),
}


@pytest.fixture(scope="session")
def guarded_docs(tools: Tools, work: Path) -> list[dict[str, Any]]:
    return render(tools, work, VALUE_SETS["guarded"])


# -- the copies ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("copies", "originals", "pattern"),
    [("files/rules", RULES_DIR, "*.yml"), ("files/dashboards", DASHBOARDS_DIR, "*.json")],
)
def test_the_chart_copies_equal_the_package_files(
    copies: str, originals: Path, pattern: str
) -> None:
    chart_files = {p.name for p in (CHART / copies).glob(pattern)}
    package_files = {p.name for p in originals.glob(pattern)}
    assert chart_files == package_files, "run scripts/k8s-tools.sh sync"
    differ = [
        n
        for n in sorted(chart_files)
        if not filecmp.cmp(CHART / copies / n, originals / n, shallow=False)
    ]
    assert not differ, f"{copies}: {differ} differ from {originals}: run scripts/k8s-tools.sh sync"


def test_the_rule_files_carry_the_defaults_the_chart_replaces() -> None:
    """Every runbook_url is <RUNBOOK_DEFAULT>#<kind> and both job selectors occur: what
    templates/prometheusrule.yaml replaces with alerts.* (else a value would reach nothing)."""
    text = "".join(p.read_text() for p in sorted(RULES_DIR.glob("*.yml")))
    rules = [
        r
        for p in RULES_DIR.glob("*.yml")
        for g in yaml.safe_load(p.read_text())["groups"]
        for r in g["rules"]
    ]
    alerts = [r for r in rules if "alert" in r]
    assert alerts
    for r in alerts:
        assert re.fullmatch(
            rf"{re.escape(RUNBOOK_DEFAULT)}#\w+", r["annotations"]["runbook_url"]
        ), r
    assert MONITOR_SELECTOR_DEFAULT in text
    assert COLLECTOR_SELECTOR_DEFAULT in text
    # Every job selector of the rules is one of the two.
    selectors = set(re.findall(r'job\s*=~?\s*"[^"]*"', text))
    assert selectors == {MONITOR_SELECTOR_DEFAULT, COLLECTOR_SELECTOR_DEFAULT}


# -- helm lint, helm template, values.schema.json ------------------------------------------------


@pytest.mark.parametrize("values", ["default", "all", "guarded"])
def test_helm_lint(tools: Tools, work: Path, values: str) -> None:
    given = VALUE_SETS[values]
    argv: list[str | Path] = [tools.helm, "lint", "--strict", CHART]
    argv += ["--values", write_values(work / f"lint-{values}.yaml", given)]
    proc = run(argv)
    assert proc.returncode == 0, describe(proc)
    assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(d["kind"] for d in docs)


def test_default_values_render_the_collector_only(default_docs: list[dict[str, Any]]) -> None:
    assert kinds(default_docs) == [
        "ConfigMap",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
    ]


def test_every_optional_part_renders(all_docs: list[dict[str, Any]]) -> None:
    dashboards = sorted(DASHBOARDS_DIR.glob("*.json"))
    assert kinds(all_docs) == sorted(
        ["ConfigMap"] * (2 + len(dashboards))  # collector.toml, the Spark entrypoint
        + ["Deployment", "PodDisruptionBudget", "PersistentVolumeClaim", "PrometheusRule"]
        + ["Role", "RoleBinding", "Service", "Service", "ServiceAccount", "ServiceAccount"]
        + ["ServiceMonitor", "ServiceMonitor", "SparkApplication"]
    )
    names = [(d["kind"], d["metadata"]["name"]) for d in all_docs]
    assert len(names) == len(set(names)), names
    assert all(len(name) <= 63 for _, name in names)
    assert {d["metadata"]["namespace"] for d in all_docs} == {"monitoring"}
    assert "Secret" not in kinds(all_docs)  # secrets are references, never values


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"collector": {"config": {"jmx_profile": "prometheus"}}}, "jmx_profile"),
        ({"collector": {"confg": {}}}, "confg"),
        ({"kafka": {"securityProtocol": "TLS"}}, "securityProtocol"),
        ({"alerts": {"monitorSelector": "job=kafka-replication-monitor"}}, "monitorSelector"),
        ({"alerts": {"runbookUrl": "runbooks#here"}}, "runbookUrl"),
        ({"stream": {"config": {"checkpoint": "/x"}}}, "checkpoint"),
        ({"kafka": {"sasl": {"password": "hunter2"}}}, "password"),
    ],
    ids=["enum", "typo", "protocol", "selector", "url", "chart-owned-setting", "secret-value"],
)
def test_the_values_schema_refuses(
    tools: Tools, work: Path, values: dict[str, Any], complaint: str
) -> None:
    proc = template(tools, work, least(values))
    assert proc.returncode != 0, f"accepted {values}"
    assert "values don't meet the specifications of the schema" in proc.stderr, proc.stderr
    assert complaint in proc.stderr


def test_the_stream_needs_a_place_for_its_state(tools: Tools, work: Path) -> None:
    proc = template(
        tools, work, least({"stream": {"enabled": True, "persistence": {"enabled": False}}})
    )
    assert proc.returncode != 0
    assert "give stream.checkpoint" in proc.stderr
    uris = {"checkpoint": "s3a://bucket/ck", "store": "s3a://bucket/store"}
    docs = render(tools, work, least({"stream": {"enabled": True, **uris}}))
    assert "PersistentVolumeClaim" not in kinds(docs)
    app = one(docs, "SparkApplication")
    args = app["spec"]["arguments"]
    assert args[args.index("--checkpoint") + 1] == uris["checkpoint"]
    assert args[args.index("--store") + 1] == uris["store"]
    assert "data" not in {v["name"] for v in app["spec"]["volumes"]}


# -- Kubernetes' schemas, the CRDs' schemas ----------------------------------------------------


def is_custom(doc: dict[str, Any]) -> bool:
    return (doc["apiVersion"], doc["kind"]) in CR_SCHEMAS


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values", ["default", "all", "guarded"])
def test_core_objects_are_valid_kubernetes(
    tools: Tools, work: Path, values: str, kube_version: str
) -> None:
    """Strict kubernetes-validate of every core object (guarded: the web configuration's
    Secret and both NetworkPolicies too)."""
    proc = template(tools, work, VALUE_SETS[values], kube_version=kube_version)
    assert proc.returncode == 0, describe(proc)
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d and not is_custom(d)]
    if values == "guarded":
        assert sorted(d["kind"] for d in docs if d["kind"] in ("NetworkPolicy", "Secret")) == [
            "NetworkPolicy",
            "NetworkPolicy",
            "Secret",
        ]
    folder = work / f"core-{values}-{kube_version}"
    folder.mkdir()
    files = []
    for i, doc in enumerate(docs):
        path = folder / f"{i:02d}-{doc['kind']}.yaml"
        path.write_text(yaml.safe_dump(doc))
        files.append(path)
    proc = run([tools.kubernetes_validate, "--strict", "-k", kube_version, *files])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.count(" passed for resource ") == len(files), proc.stdout


def test_the_chart_refuses_an_older_kubernetes(tools: Tools, work: Path) -> None:
    proc = template(tools, work, kube_version="1.24.0")
    assert proc.returncode != 0
    assert "chart requires kubeVersion: >=1.25.0-0" in proc.stderr, proc.stderr


@pytest.mark.parametrize("values", ["all", "guarded"])
def test_custom_resources_are_valid_against_their_crds(
    tools: Tools,
    work: Path,
    all_docs: list[dict[str, Any]],
    guarded_docs: list[dict[str, Any]],
    values: str,
) -> None:
    """Every custom resource against its CRD's schema (guarded: the ServiceMonitors'
    tlsConfig and basicAuth, the driver's web configuration mounts)."""
    docs = guarded_docs if values == "guarded" else all_docs
    customs = [d for d in docs if is_custom(d)]
    assert {(d["apiVersion"], d["kind"]) for d in customs} == set(CR_SCHEMAS)
    folder = work / f"custom-{values}"
    folder.mkdir()
    for i, doc in enumerate(customs):
        path = folder / f"{i:02d}-{doc['kind']}.json"
        path.write_text(json.dumps(doc))
        schema = tools.schemas / CR_SCHEMAS[doc["apiVersion"], doc["kind"]]
        proc = run(
            [tools.check_jsonschema, "--regex-variant", "python", "--schemafile", schema, path]
        )
        assert proc.returncode == 0, describe(proc)


# -- the rules: promtool, values ---------------------------------------------------------------


def prometheus_rule(tools: Tools, work: Path, alerts: dict[str, str] | None) -> dict[str, Any]:
    values: dict[str, Any] = {"prometheusRule": {"enabled": True}, "collector": {"enabled": False}}
    if alerts:
        values["alerts"] = alerts
    return one(render(tools, work, values), "PrometheusRule")


def rewritten_test_files(folder: Path, alerts: dict[str, str] | None) -> list[Path]:
    """The shipped rule tests beside the rules (tests/, rules/ as in the package), with the
    runbook URL and the job of the expected alerts and input series as in ``alerts`` (whose
    selectors are each one ``job="..."``)."""
    folder.mkdir(parents=True)
    out = []
    for src in sorted(RULE_TESTS_DIR.glob("*.yml")):
        text = src.read_text()
        if alerts:
            text = text.replace(f"{RUNBOOK_DEFAULT}#", f"{alerts['runbookUrl']}#")
            for default, value in (
                (MONITOR_SELECTOR_DEFAULT, alerts["monitorSelector"]),
                (COLLECTOR_SELECTOR_DEFAULT, alerts["collectorSelector"]),
            ):
                default_job, job = default.split('"')[1], value.split('"')[1]
                assert value == f'job="{job}"'
                text = text.replace(default, value)  # series, selectors in descriptions
                text = text.replace(f"job: {default_job}", f"job: {job}")  # expected labels
            assert not re.search(r'job(="|: )kafka-replication-(monitor|collector)\b', text), src
        path = folder / src.name
        path.write_text(text)
        out.append(path)
    return out


#: Custom alerts values for the shipped tests: one job matcher each (their expected labels
#: are the job's).
CUSTOM_JOBS = {
    "runbookUrl": CUSTOM_ALERTS["runbookUrl"],
    "monitorSelector": 'job="kps-replication-monitor"',
    "collectorSelector": 'job="kps-replication-collector"',
}


@pytest.mark.parametrize("alerts", [None, CUSTOM_JOBS], ids=["default", "custom"])
def test_the_rendered_rules_pass_promtool_and_the_shipped_rule_tests(
    tools: Tools, work: Path, alerts: dict[str, str] | None
) -> None:
    promtool = find_binary("promtool")
    rule = prometheus_rule(tools, work, alerts)
    layout = work / f"promtool-{'custom' if alerts else 'default'}"
    rule_files = write_rule_files(rule, layout / "rules")
    assert {p.name for p in rule_files} == {p.name for p in RULES_DIR.glob("*.yml")}
    proc = run([promtool, "check", "rules", *rule_files])
    assert proc.returncode == 0, describe(proc)
    test_files = rewritten_test_files(layout / "tests", alerts)
    proc = run([promtool, "test", "rules", *test_files], cwd=layout / "tests")
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.count("SUCCESS") == len(test_files), proc.stdout


def strings(value: Any) -> list[str]:
    """Every string in a parsed document (keys and values)."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*strings(k), *strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


def replaced(value: Any, pairs: list[tuple[str, str]]) -> Any:
    """``value`` with each string's ``old`` replaced by ``new``, for each pair in order."""
    if isinstance(value, dict):
        return {k: replaced(v, pairs) for k, v in value.items()}
    if isinstance(value, list):
        return [replaced(v, pairs) for v in value]
    if isinstance(value, str):
        for old, new in pairs:
            value = value.replace(old, new)
    return value


def test_custom_runbook_and_selectors_reach_every_rule(tools: Tools, work: Path) -> None:
    rule = prometheus_rule(tools, work, CUSTOM_ALERTS)
    text = "\n".join(strings(rule["spec"]["groups"]))
    shipped_docs = [yaml.safe_load(p.read_text()) for p in sorted(RULES_DIR.glob("*.yml"))]
    shipped = "\n".join(strings([g for d in shipped_docs for g in d["groups"]]))
    # No default left ...
    assert RUNBOOK_DEFAULT not in text
    assert MONITOR_SELECTOR_DEFAULT not in text
    assert COLLECTOR_SELECTOR_DEFAULT not in text
    # ... each replaced where it was, and nothing else changed.
    for key, default in (
        ("monitorSelector", MONITOR_SELECTOR_DEFAULT),
        ("collectorSelector", COLLECTOR_SELECTOR_DEFAULT),
    ):
        assert shipped.count(default) > 0
        assert text.count(CUSTOM_ALERTS[key]) == shipped.count(default)
    assert set(re.findall(r'job="[^"]*"', text)) == {
        'job="kps-replication-monitor"',
        'job="kps-replication-collector"',
    }
    pairs = [
        (f"{RUNBOOK_DEFAULT}#", f"{CUSTOM_ALERTS['runbookUrl']}#"),
        (MONITOR_SELECTOR_DEFAULT, CUSTOM_ALERTS["monitorSelector"]),
        (COLLECTOR_SELECTOR_DEFAULT, CUSTOM_ALERTS["collectorSelector"]),
    ]
    expected = [replaced(g, pairs) for d in shipped_docs for g in d["groups"]]
    assert rule["spec"]["groups"] == expected
    # The same as `monitor assets rules` renders for a plain install.
    from monitor.assets.rules import rendered

    files = rendered(
        runbook_url=CUSTOM_ALERTS["runbookUrl"],
        monitor_selector=CUSTOM_ALERTS["monitorSelector"],
        collector_selector=CUSTOM_ALERTS["collectorSelector"],
    )
    by_name = {g["name"]: g for t in files.values() for g in yaml.safe_load(t)["groups"]}
    assert {g["name"]: g for g in rule["spec"]["groups"]} == by_name
    # Every alert links to the custom runbook, at its own anchor.
    shipped_alerts = [
        r for d in shipped_docs for g in d["groups"] for r in g["rules"] if "alert" in r
    ]
    alerts = alert_rules(rule)
    assert len(alerts) == len(shipped_alerts) > 0
    for r, s in zip(alerts, shipped_alerts, strict=True):
        anchor = s["annotations"]["runbook_url"].split("#")[1]
        url = f"{CUSTOM_ALERTS['runbookUrl']}#{anchor}"
        assert r["annotations"]["runbook_url"] == url, r["alert"]


def test_the_default_selectors_select_the_charts_scrape_jobs(
    all_docs: list[dict[str, Any]],
) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jobs = scrape_jobs(all_docs)
    assert values["alerts"]["monitorSelector"] == f'job="{jobs["stream"]}"'
    assert values["alerts"]["collectorSelector"] == f'job="{jobs["collector"]}"'
    # The values the rule files default to: the default render leaves the rules as shipped.
    assert values["alerts"]["monitorSelector"] == MONITOR_SELECTOR_DEFAULT
    assert values["alerts"]["collectorSelector"] == COLLECTOR_SELECTOR_DEFAULT
    assert values["alerts"]["runbookUrl"] == RUNBOOK_DEFAULT


def test_a_changed_job_name_moves_the_scrape_job(tools: Tools, work: Path) -> None:
    docs = render(
        tools,
        work,
        merged(
            {
                "collector": {"serviceMonitor": {"jobName": "c2"}},
                "stream": {"serviceMonitor": {"jobName": "m2"}},
            }
        ),
    )
    assert scrape_jobs(docs) == {"collector": "c2", "stream": "m2"}


def test_the_rule_groups_are_the_shipped_groups(tools: Tools, work: Path) -> None:
    rule = prometheus_rule(tools, work, None)
    shipped = [
        g for p in sorted(RULES_DIR.glob("*.yml")) for g in yaml.safe_load(p.read_text())["groups"]
    ]
    assert rule["spec"]["groups"] == shipped


# -- the dashboards ----------------------------------------------------------------------------


def test_one_sidecar_configmap_per_dashboard(tools: Tools, work: Path) -> None:
    values = {"dashboards": {"enabled": True, "label": "grafana/dashboard", "labelValue": "kafka"}}
    docs = [d for d in render(tools, work, least(values)) if d["kind"] == "ConfigMap"]
    by_file = {
        next(iter(d["data"])): d
        for d in docs
        if d["metadata"]["labels"].get("app.kubernetes.io/component") == "dashboards"
    }
    assert set(by_file) == {p.name for p in DASHBOARDS_DIR.glob("*.json")}
    for name, cm in by_file.items():
        assert cm["metadata"]["labels"]["grafana/dashboard"] == "kafka"
        assert len(cm["data"]) == 1
        assert json.loads(cm["data"][name]) == json.loads((DASHBOARDS_DIR / name).read_text())


# -- the collector -----------------------------------------------------------------------------


@pytest.fixture
def secret_files(tmp_path: Path) -> Path:
    """A folder standing for SECRET_ROOT (relocate() makes each mounted file there)."""
    return tmp_path / "secrets"


def relocate(value: Any, root: Path) -> Any:
    """``value`` with SECRET_ROOT paths moved under ``root`` (the file made there)."""
    if isinstance(value, dict):
        return {k: relocate(v, root) for k, v in value.items()}
    if isinstance(value, str) and value.startswith(SECRET_ROOT):
        path = root / value.removeprefix(SECRET_ROOT + "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("placeholder\n")
        return str(path)
    return value


def collector_toml(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return tomllib.loads(one(docs, "ConfigMap", "collector")["data"]["collector.toml"])


@pytest.mark.parametrize("values", ["default", "all"])
def test_collector_toml_loads_with_the_collectors_model(
    default_docs: list[dict[str, Any]],
    all_docs: list[dict[str, Any]],
    secret_files: Path,
    values: str,
) -> None:
    from monitor.collector.config import CollectorConfig, unknown_env_keys

    docs = default_docs if values == "default" else all_docs
    data = collector_toml(docs)
    cfg = CollectorConfig.model_validate(relocate(data, secret_files))
    assert cfg.metrics_host == "0.0.0.0"
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert cfg.metrics_port == ports["metrics"]
    # The environment beats the file (the image sets these variables too): the pod's own.
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["MONITOR_COLLECTOR_METRICS_HOST"] == "0.0.0.0"
    assert env["MONITOR_COLLECTOR_METRICS_PORT"] == str(ports["metrics"])
    assert unknown_env_keys(env) == []
    # The events go to the monitor's own cluster: eventsKafka, never the watched one.
    assert cfg.events_kafka is not None and not cfg.events_on_watched_cluster
    assert (
        cfg.events_connection().bootstrap_servers
        == (ALL_ENABLED if values == "all" else CLUSTERS)["eventsKafka"]["bootstrapServers"]
    )
    if values == "all":
        assert cfg.cluster == "prod-eu"
        assert cfg.jmx_urls == {1: "http://k1:9404/metrics", 2: "http://k2:9404/metrics"}
        assert cfg.interval_s == 2.5
        assert cfg.kafka.security_protocol == "SASL_SSL"
        assert cfg.kafka.sasl_password is not None
        assert cfg.kafka.bootstrap_timeout_ms == 60000
        assert cfg.events_kafka is not None
        assert cfg.events_kafka.bootstrap_servers == "mon-kafka:9093"
        assert cfg.events_kafka.ssl_keyfile is not None
        assert cfg.events_kafka.request_timeout_ms == 10000


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({}, "kafka.bootstrapServers is required: the watched cluster's bootstrap servers"),
        ({"kafka": CLUSTERS["kafka"]}, "eventsKafka.bootstrapServers is required"),
        (
            {"eventsKafka": CLUSTERS["eventsKafka"], "collector": {"enabled": False},
             "stream": {"enabled": True}},
            None,  # the job alone needs no watched cluster
        ),
        (
            {"collector": {"enabled": False}, "stream": {"enabled": True}},
            "eventsKafka.bootstrapServers is required",
        ),
    ],
    ids=["no-kafka", "no-events-kafka", "stream-alone", "stream-no-events-kafka"],
)  # fmt: skip
def test_the_clusters_have_no_default(
    tools: Tools, work: Path, values: dict[str, Any], complaint: str | None
) -> None:
    """Without the clusters the chart refuses to render, with one line naming the value
    (what the commands do: exit 78 naming kafka.bootstrap_servers, events_kafka)."""
    proc = template(tools, work, values)
    if complaint is None:
        assert proc.returncode == 0, describe(proc)
        return
    assert proc.returncode != 0, f"rendered without {complaint.split()[0]}"
    assert complaint in proc.stderr, proc.stderr
    if "eventsKafka" in complaint:
        assert "--set eventsOnWatchedCluster=true" in proc.stderr


def test_events_on_the_watched_cluster_only_when_asked(
    tools: Tools, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eventsOnWatchedCluster: the collector publishes on `kafka` (events_on_watched_cluster,
    no [events_kafka]) and the job reads there."""
    from monitor.collector.config import CollectorConfig
    from streaming.cli import build_parser, config_from_args

    values = {
        "kafka": CLUSTERS["kafka"],
        "eventsOnWatchedCluster": True,
        "stream": {"enabled": True},
    }
    docs = render(tools, work, values)
    data = collector_toml(docs)
    assert "events_kafka" not in data and data["events_on_watched_cluster"] is True
    cfg = CollectorConfig.model_validate(data)
    watched = CLUSTERS["kafka"]["bootstrapServers"]
    assert cfg.events_connection().bootstrap_servers == watched
    driver = one(docs, "SparkApplication")["spec"]["driver"]
    for name in [n for n in os.environ if n.startswith("MONITOR_")]:
        monkeypatch.delenv(name)
    for item in driver["env"]:
        monkeypatch.setenv(item["name"], item["value"])
    args = one(docs, "SparkApplication")["spec"]["arguments"]
    assert config_from_args(build_parser().parse_args(args)).kafka.bootstrap_servers == watched


def test_the_disruption_budget_takes_min_available(tools: Tools, work: Path) -> None:
    default = one(render(tools, work, CLUSTERS), "PodDisruptionBudget")["spec"]
    assert default["maxUnavailable"] == 1 and "minAvailable" not in default
    values = least({"collector": {"podDisruptionBudget": {"minAvailable": 1}}})
    spec = one(render(tools, work, values), "PodDisruptionBudget")["spec"]
    assert spec["minAvailable"] == 1 and "maxUnavailable" not in spec


def test_broker_ids_may_be_yaml_integers(tools: Tools, work: Path) -> None:
    from monitor.collector.config import CollectorConfig

    urls = {1: "http://kafka-0.kafka:9404/metrics", 12: "http://kafka-1.kafka:9404/metrics"}
    docs = render(tools, work, least({"collector": {"config": {"jmx_urls": urls}}}))
    assert CollectorConfig.model_validate(collector_toml(docs)).jmx_urls == urls


def test_the_collector_pod(all_docs: list[dict[str, Any]]) -> None:
    deployment = one(all_docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 1
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["resources"]["requests"] and container["resources"]["limits"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}
    assert container["args"][:3] == [
        "collect",
        "--config",
        "/etc/kafka-replication-monitor/config/collector.toml",
    ]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_mount = mounts["/etc/kafka-replication-monitor/config"]
    cm = one(all_docs, "ConfigMap", "collector")
    assert volumes[config_mount["name"]]["configMap"]["name"] == cm["metadata"]["name"]
    # Every file the settings name is in a read-only mount of an existing Secret's key.
    data = collector_toml(all_docs)
    files = [
        v for conn in ("kafka", "events_kafka") for k, v in data[conn].items() if k.endswith("file")
    ]
    assert len(files) == 6
    secrets = {
        (v["secret"]["secretName"], item["key"]): f"{mount}/{item['path']}"
        for mount, m in mounts.items()
        if "secret" in (v := volumes[m["name"]])
        for item in v["secret"]["items"]
    }
    assert sorted(secrets.values()) == sorted(files)
    assert all(mounts[f.rsplit("/", 1)[0]]["readOnly"] for f in files)
    assert ("kafka-monitor-user", "password") in secrets
    assert ("mon-user", "user.key") in secrets
    # The Service and its ServiceMonitor reach the container's metrics port.
    service = one(all_docs, "Service", "collector")
    assert matches(
        service["spec"]["selector"],
        pod_labels := deployment["spec"]["template"]["metadata"]["labels"],
    )
    assert matches(deployment["spec"]["selector"]["matchLabels"], pod_labels)
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    sm = one(all_docs, "ServiceMonitor", "collector")
    assert sm["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert sm["spec"]["jobLabel"] == JOB_LABEL_KEY
    assert sm["metadata"]["labels"]["release"] == "kps"
    pdb = one(all_docs, "PodDisruptionBudget")
    assert matches(pdb["spec"]["selector"]["matchLabels"], pod_labels)


# -- the Spark job -----------------------------------------------------------------------------


def test_the_spark_job_settings_load_with_the_jobs_model(
    all_docs: list[dict[str, Any]], secret_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streaming import config as streaming_config
    from streaming.cli import build_parser, config_from_args

    app = one(all_docs, "SparkApplication")
    driver = app["spec"]["driver"]
    env = {e["name"]: relocate(e["value"], secret_files) for e in driver["env"]}
    assert streaming_config.unknown_env_keys(env) == []
    for name in [n for n in os.environ if n.startswith("MONITOR_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cfg = config_from_args(build_parser().parse_args(app["spec"]["arguments"]))
    assert cfg.master is None  # spark-submit's (the operator's)
    # Nothing added to spark.jars: the image's Spark has the Kafka source on its own
    # classpath (tests/deploy/test_image.py), else stream.deps brings it.
    assert cfg.jars == []
    assert cfg.metrics_host == "0.0.0.0"
    assert cfg.metrics_port == driver["ports"][0]["containerPort"] == 9488
    assert cfg.checkpoint.startswith("/var/lib/kafka-replication-monitor/")
    assert cfg.store.startswith("/var/lib/kafka-replication-monitor/")
    assert cfg.kafka.bootstrap_servers == "mon-kafka:9093"  # eventsKafka, not kafka
    assert cfg.kafka.ssl_key_password is not None
    assert cfg.max_offsets_per_trigger == 1000000
    assert cfg.model.stale_after_ms == 90000
    python = app["spec"]["sparkConf"]["spark.pyspark.python"]
    assert python == app["spec"]["sparkConf"]["spark.pyspark.driver.python"]
    assert app["spec"]["mainApplicationFile"].startswith(
        f"local://{python.removesuffix('/bin/python')}/lib/python3."
    )
    assert app["spec"]["mainApplicationFile"].endswith("/site-packages/streaming/cli.py")


def test_the_spark_pods_and_the_driver_service(all_docs: list[dict[str, Any]]) -> None:
    app = one(all_docs, "SparkApplication")
    spec = app["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    pvc = one(all_docs, "PersistentVolumeClaim")
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    for role in ("driver", "executor"):
        pod = spec[role]
        assert pod["podSecurityContext"]["runAsNonRoot"] is True
        assert {m["name"] for m in pod["volumeMounts"]} <= set(volumes)
        assert "data" in {m["name"] for m in pod["volumeMounts"]}
        assert (
            pod["serviceAccount"] == one(all_docs, "ServiceAccount", "stream")["metadata"]["name"]
        )
    # ReadWriteOnce: the executors go to the driver's node.
    term = spec["executor"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert matches(term["labelSelector"]["matchLabels"], spec["driver"]["labels"])
    assert not matches(term["labelSelector"]["matchLabels"], spec["executor"]["labels"])
    # The driver's Service: the operator labels the driver pod spark-role=driver.
    service = one(all_docs, "Service", "stream")
    driver_pod_labels = {**spec["driver"]["labels"], "spark-role": "driver"}
    executor_pod_labels = {**spec["executor"]["labels"], "spark-role": "executor"}
    assert matches(service["spec"]["selector"], driver_pod_labels)
    assert not matches(service["spec"]["selector"], executor_pod_labels)
    assert service["spec"]["ports"][0]["targetPort"] == spec["driver"]["ports"][0]["name"]
    sm = one(all_docs, "ServiceMonitor", "stream")
    assert sm["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    rbac_role = one(all_docs, "Role")
    binding = one(all_docs, "RoleBinding")
    assert binding["roleRef"]["name"] == rbac_role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == spec["driver"]["serviceAccount"]


ENTRYPOINT = CHART / "files" / "bin" / "spark-entrypoint.sh"


def test_the_spark_pods_run_the_entrypoint_script(all_docs: list[dict[str, Any]]) -> None:
    spec = one(all_docs, "SparkApplication")["spec"]
    cm = one(
        [d for d in all_docs if d["metadata"]["name"].endswith("-stream-entrypoint")], "ConfigMap"
    )
    assert cm["data"]["spark-entrypoint.sh"] == ENTRYPOINT.read_text().rstrip("\n")
    (volume,) = [
        v for v in spec["volumes"] if v.get("configMap", {}).get("name") == cm["metadata"]["name"]
    ]
    assert volume["configMap"]["defaultMode"] == 0o555
    for role, container in (
        ("driver", "spark-kubernetes-driver"),
        ("executor", "spark-kubernetes-executor"),
    ):
        (mount,) = [m for m in spec[role]["volumeMounts"] if m["name"] == volume["name"]]
        (template_container,) = spec[role]["template"]["spec"]["containers"]
        assert template_container["name"] == container  # Spark's default container names
        assert template_container["command"] == [f"{mount['mountPath']}/spark-entrypoint.sh"]


def stub(path: Path, name: str) -> Path:
    """An executable that prints its arguments, one a line, after its name."""
    path.mkdir(parents=True, exist_ok=True)
    exe = path / name
    exe.write_text(f'#!/bin/sh\necho {name}\nfor a in "$@"; do echo "$a"; done\n')
    exe.chmod(0o755)
    return exe


@pytest.mark.parametrize("role", ["driver", "executor", "other"])
def test_the_entrypoint_script_starts_what_spark_asks(tmp_path: Path, role: str) -> None:
    spark_home = tmp_path / "pyspark"
    stub(spark_home / "bin", "spark-submit")
    stub(tmp_path / "jdk" / "bin", "java")
    stub(tmp_path / "path", "monitor")
    env = {
        "PATH": f"{tmp_path / 'path'}:/usr/bin:/bin",
        "SPARK_HOME": str(spark_home),
        "JAVA_HOME": str(tmp_path / "jdk"),
        "SPARK_DRIVER_BIND_ADDRESS": "10.1.2.3",
        "SPARK_JAVA_OPT_10": "-Dten=10",
        "SPARK_JAVA_OPT_2": "-Dtwo=a=b",
        "SPARK_JAVA_OPT_0": "-Dzero",
        "SPARK_EXECUTOR_MEMORY": "2g",
        "SPARK_DRIVER_URL": "spark://driver:7078",
        "SPARK_EXECUTOR_ID": "3",
        "SPARK_EXECUTOR_CORES": "2",
        "SPARK_APPLICATION_ID": "spark-app-1",
        "SPARK_EXECUTOR_POD_IP": "10.1.2.4",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "krm-exec-3",
    }
    argv = {
        "driver": ["driver", "--properties-file", "/opt/spark/conf/spark.properties",
                   "--class", "org.apache.spark.deploy.PythonRunner", "local:///app.py", "--x"],
        "executor": ["executor"],
        "other": ["collect", "--check"],
    }[role]  # fmt: skip
    proc = subprocess.run(
        [str(ENTRYPOINT), *argv], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    if role == "driver":
        assert out == [
            "spark-submit",
            "--conf", "spark.driver.bindAddress=10.1.2.3",
            "--conf", "spark.executorEnv.SPARK_DRIVER_POD_IP=10.1.2.3",
            "--deploy-mode", "client",
            *argv[1:],
        ]  # fmt: skip
    elif role == "executor":
        assert out == [
            "java", "-Dzero", "-Dtwo=a=b", "-Dten=10", "-Xms2g", "-Xmx2g",
            "-cp", f"{spark_home}/jars/*",
            "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
            "--driver-url", "spark://driver:7078", "--executor-id", "3", "--cores", "2",
            "--app-id", "spark-app-1", "--hostname", "10.1.2.4", "--resourceProfileId", "0",
            "--podName", "krm-exec-3",
        ]  # fmt: skip
    else:
        assert out == ["monitor", *argv]


def test_read_write_many_lets_executors_run_anywhere(tools: Tools, work: Path) -> None:
    docs = render(
        tools, work, merged({"stream": {"persistence": {"accessModes": ["ReadWriteMany"]}}})
    )
    assert "affinity" not in one(docs, "SparkApplication")["spec"]["executor"]


@pytest.mark.parametrize("values", ["all", "guarded"])
def test_notes_render(tools: Tools, work: Path, values: str) -> None:
    """NOTES.txt, rendered through a template of a copy of the chart (helm install
    --dry-run wants a cluster; helm template leaves NOTES.txt out)."""
    chart = work / f"notes-chart-{values}" / CHART.name
    shutil.copytree(CHART, chart)
    (chart / "templates" / "zz-notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n"
        '  notes: {{ include (print $.Template.BasePath "/NOTES.txt") . | toJson }}\n'
    )
    values_file = write_values(work / f"notes-{values}.yaml", VALUE_SETS[values])
    proc = run([tools.helm, "template", "krm", chart, "-n", "monitoring", "--values", values_file])
    assert proc.returncode == 0, describe(proc)
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    (text,) = [d["data"]["notes"] for d in docs if d["metadata"]["name"] == "notes"]
    check = "monitor collect --config /etc/kafka-replication-monitor/config/collector.toml --check"
    assert check in text
    assert "kubectl -n monitoring get sparkapplication krm-kafka-replication-monitor-stream" in text
    assert "runbook links https://kafka-replication-monitor.invalid/runbook#<kind>" in text
    unguarded = "WARNING: /metrics is served on 0.0.0.0 in the pods with no TLS"
    if values == "all":
        assert unguarded in text
        assert "curl -s 127.0.0.1:9479/metrics" in text  # the port-forwarded Service port
    else:
        assert unguarded not in text
        host = "krm-kafka-replication-monitor-collector.monitoring.svc"
        curl = (
            "curl -s --cacert ca.crt --cert tls.crt --key tls.key "
            f"--connect-to {host}:9479:127.0.0.1:9479 https://{host}:9479/metrics -u USER"
        )
        assert curl in text
        assert "/metrics: https (RequireAndVerifyClientCert)" in text
        assert "NetworkPolicies admit only networkPolicy.scrapers" in text


# -- guarded /metrics: webConfig, networkPolicy ------------------------------------------------


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A throwaway CA with a server certificate and a client's (monitor/dev/pki.py)."""
    return make_pki(tmp_path_factory.mktemp("pki"))


def web_config_secret(docs: list[dict[str, Any]]) -> tuple[str, dict[str, bytes]]:
    """The chart's web configuration Secret: its name and its data, decoded."""
    secret = one(docs, "Secret", "web-config")
    assert secret["type"] == "Opaque"
    return secret["metadata"]["name"], {k: base64.b64decode(v) for k, v in secret["data"].items()}


def metrics_pod(docs: list[dict[str, Any]], pod: str) -> tuple[list[Any], list[Any]]:
    """The volumes and the container's mounts of a pod serving /metrics: the collector's,
    or the Spark driver's."""
    if pod == "collector":
        spec = one(docs, "Deployment")["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        return spec["volumes"], container["volumeMounts"]
    app = one(docs, "SparkApplication")["spec"]
    return app["volumes"], app["driver"]["volumeMounts"]


def web_config_file_of(docs: list[dict[str, Any]], pod: str) -> str:
    """The web configuration file a pod is given: collector.toml's web_config_file, the
    driver's --web-config-file."""
    if pod == "collector":
        path = collector_toml(docs)["web_config_file"]
    else:
        args = one(docs, "SparkApplication")["spec"]["arguments"]
        assert args.count("--web-config-file") == 1, args
        path = args[args.index("--web-config-file") + 1]
    assert isinstance(path, str) and path.startswith(WEB_ROOT + "/"), path
    return path


def load_in_pod(
    docs: list[dict[str, Any]],
    pod: str,
    pki: Pki,
    dest: Path,
    others: dict[str, dict[str, bytes]] | None = None,
) -> Any:
    """monitor.web.config.load of the web configuration as ``pod`` reads it: what the
    pod's Secret mounts under WEB_ROOT would hold, written below ``dest`` (the chart's
    Secret; TLS_SECRET a kubernetes.io/tls Secret of ``pki``: tls.crt, tls.key, ca.crt;
    ``others`` by name), each path in the file moved there too."""
    from monitor.web.config import load

    name, data = web_config_secret(docs)
    here = str(dest).encode()
    secrets = {
        name: {k: v.replace(WEB_ROOT.encode(), here) for k, v in data.items()},
        TLS_SECRET: {
            "tls.crt": pki.server_cert.read_bytes(),
            "tls.key": pki.server_key.read_bytes(),
            "ca.crt": pki.ca.read_bytes(),
        },
        **(others or {}),
    }
    volumes, mounts = metrics_pod(docs, pod)
    assert mount_secrets(volumes, mounts, secrets, WEB_ROOT, dest)
    path = web_config_file_of(docs, pod)
    return load(dest / path.removeprefix(WEB_ROOT + "/"))


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("pod", ["collector", "driver"])
def test_the_web_config_loads_with_the_monitors_loader(
    guarded_docs: list[dict[str, Any]], pki: Pki, tmp_path: Path, pod: str
) -> None:
    """The rendered web-config.yml, read from the files the pod mounts, loads with
    monitor.web.config's loader: TLS on, client certificates required, the user admitted
    with its password and refused with another."""
    _, data = web_config_secret(guarded_docs)
    raw = yaml.safe_load(data["web-config.yml"])
    assert raw["tls_server_config"]["client_auth_type"] == "RequireAndVerifyClientCert"
    assert raw["basic_auth_users"] == GUARDED["webConfig"]["basicAuthUsers"]
    cfg = load_in_pod(guarded_docs, pod, pki, tmp_path)
    assert cfg.tls is not None
    assert cfg.tls.verify_mode == ssl.CERT_REQUIRED
    assert cfg.tls.minimum_version == ssl.TLSVersion.TLSv1_2
    assert cfg.auth_required and set(cfg.users) == {"prometheus"}
    assert cfg.authorized(basic("prometheus", SCRAPE_PASSWORD))
    assert not cfg.authorized(basic("prometheus", "not-the-password"))
    # Every file it names is one the pod mounts (the client CA: the TLS Secret's ca.crt).
    assert sorted(p.relative_to(tmp_path).as_posix() for p in cfg.files) == [
        "config/web-config.yml",
        "tls/ca.crt",
        "tls/tls.crt",
        "tls/tls.key",
    ]


#: webConfig shapes (on top of the least values) and what the loaded file must say: TLS,
#: the client verification, the users, the files it reads (relative to WEB_ROOT).
WEB_SHAPES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "tls-only": (
        {"tls": {"enabled": True, "secretName": TLS_SECRET}},
        {"verify": ssl.CERT_NONE, "users": set(), "files": {"tls/tls.crt", "tls/tls.key"}},
    ),
    "basic-auth-without-tls": (
        {
            "tls": {"enabled": False},
            "basicAuthUsers": GUARDED["webConfig"]["basicAuthUsers"],
            "scrape": {"basicAuthSecret": {"name": BASIC_AUTH_SECRET}},
        },
        {"verify": None, "users": {"prometheus"}, "files": set()},
    ),
    "client-ca-of-its-own": (
        {
            "tls": {
                "enabled": True,
                "secretName": TLS_SECRET,
                "clientAuthType": "VerifyClientCertIfGiven",
                "clientCASecret": {"name": "prometheus-client-ca", "key": "bundle.pem"},
            }
        },
        {
            "verify": ssl.CERT_OPTIONAL,
            "users": set(),
            "files": {"tls/tls.crt", "tls/tls.key", "client-ca/ca.crt"},
        },
    ),
    "allowed-sans": (
        {
            "tls": {
                "enabled": True,
                "secretName": TLS_SECRET,
                "clientAuthType": "RequireAndVerifyClientCert",
                "clientAllowedSans": ["prometheus"],
            },
            "scrape": {"clientCertSecret": {"name": CLIENT_CERT_SECRET}},
        },
        {
            "verify": ssl.CERT_REQUIRED,
            "users": set(),
            "files": {"tls/tls.crt", "tls/tls.key", "tls/ca.crt"},
            "sans": {"prometheus"},
        },
    ),
    "headers-and-rate-limit": (
        {
            "tls": {"enabled": True, "secretName": TLS_SECRET, "minVersion": "TLS13"},
            "headers": {"Strict-Transport-Security": "max-age=31536000"},
            "rateLimit": {"interval": "100ms", "burst": 10},
        },
        {
            "verify": ssl.CERT_NONE,
            "users": set(),
            "files": {"tls/tls.crt", "tls/tls.key"},
            "headers": {"Strict-Transport-Security": "max-age=31536000"},
            "rate": (0.1, 10),
            "min_version": ssl.TLSVersion.TLSv1_3,
        },
    ),
}


@pytest.mark.parametrize("shape", list(WEB_SHAPES))
def test_every_web_config_shape_loads(
    tools: Tools, work: Path, pki: Pki, tmp_path: Path, shape: str
) -> None:
    """Each shape of webConfig the chart renders (no TLS, no users, its own client CA,
    allowed SANs, headers and a rate limit) loads with the monitor's loader in the
    collector's pod, as the values say."""
    web, want = WEB_SHAPES[shape]
    docs = render(tools, work, least({"webConfig": {"enabled": True, **web}}))
    cfg = load_in_pod(
        docs,
        "collector",
        pki,
        tmp_path,
        {"prometheus-client-ca": {"bundle.pem": pki.ca.read_bytes()}},
    )
    assert (cfg.tls.verify_mode if cfg.tls else None) == want["verify"]
    assert set(cfg.users) == want["users"]
    files = {p.relative_to(tmp_path).as_posix() for p in cfg.files}
    assert files == {"config/web-config.yml", *want["files"]}
    assert cfg.allowed_sans == frozenset(want.get("sans", ()))
    assert cfg.headers == want.get("headers", {})
    assert (cfg.rate_interval_s, cfg.rate_burst) == want.get("rate", (0.0, 0))
    if cfg.tls:
        assert cfg.tls.minimum_version == want.get("min_version", ssl.TLSVersion.TLSv1_2)


def test_the_collectors_web_config_file_is_the_mounted_secret(
    guarded_docs: list[dict[str, Any]], all_docs: list[dict[str, Any]], secret_files: Path
) -> None:
    """collector.toml's web_config_file is the chart's Secret's web-config.yml where the
    collector's container mounts that Secret (whole, read-only), and the file still loads
    with the collector's settings model."""
    from monitor.collector.config import CollectorConfig, unknown_env_keys

    data = collector_toml(guarded_docs)
    path = web_config_file_of(guarded_docs, "collector")
    name, secret_data = web_config_secret(guarded_docs)
    volumes, mounts = metrics_pod(guarded_docs, "collector")
    secret_name, key, mount = mounted(path, volumes, mounts)
    assert (secret_name, key) == (name, "web-config.yml")
    assert key in secret_data
    assert path == f"{mount['mountPath']}/{key}"
    # Whole and read-only: Kubernetes updates the files in place, the server re-reads them.
    assert mount["readOnly"] is True and "subPath" not in mount
    container = one(guarded_docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert "MONITOR_COLLECTOR_WEB_CONFIG_FILE" not in env  # the environment would win
    assert unknown_env_keys(env) == []
    cfg = CollectorConfig.model_validate(relocate(data, secret_files))
    assert cfg.web_config_file == Path(path)
    assert cfg.metrics_host == "0.0.0.0"
    # Off, no file.
    assert "web_config_file" not in collector_toml(all_docs)


def test_the_driver_is_given_the_mounted_web_config(
    guarded_docs: list[dict[str, Any]],
    all_docs: list[dict[str, Any]],
    secret_files: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SparkApplication's arguments carry --web-config-file with the file where the
    driver mounts the chart's Secret (the executors, serving nothing, do not mount it),
    and the job's settings model takes it."""
    from streaming.cli import build_parser, config_from_args

    spec = one(guarded_docs, "SparkApplication")["spec"]
    path = web_config_file_of(guarded_docs, "driver")
    assert path == web_config_file_of(guarded_docs, "collector")  # one file for both
    name, _ = web_config_secret(guarded_docs)
    secret_name, key, mount = mounted(path, spec["volumes"], spec["driver"]["volumeMounts"])
    assert (secret_name, key) == (name, "web-config.yml")
    assert mount["readOnly"] is True and "subPath" not in mount
    assert not [m for m in spec["executor"]["volumeMounts"] if m["mountPath"].startswith(WEB_ROOT)]
    for variable in [n for n in os.environ if n.startswith("MONITOR_")]:
        monkeypatch.delenv(variable)
    for item in spec["driver"]["env"]:
        monkeypatch.setenv(item["name"], relocate(item["value"], secret_files))
    cfg = config_from_args(build_parser().parse_args(spec["arguments"]))
    assert cfg.web_config_file == Path(path)
    assert cfg.metrics_host == "0.0.0.0"
    # Off, no flag.
    assert "--web-config-file" not in one(all_docs, "SparkApplication")["spec"]["arguments"]


def test_an_existing_web_config_secret_is_mounted_whole(tools: Tools, work: Path) -> None:
    """webConfig.existingSecret: no Secret rendered, that Secret mounted whole (its files
    beside the configuration), existingSecretKey named by the collector and the driver,
    the ServiceMonitors' CA from webConfig.scrape.caSecret."""
    values = least(
        {
            "stream": {"enabled": True, "serviceMonitor": {"enabled": True}},
            "collector": {"serviceMonitor": {"enabled": True}},
            "webConfig": {
                "enabled": True,
                "existingSecret": "my-web-config",
                "existingSecretKey": "node.yml",
                "scrape": {"caSecret": {"name": "my-ca", "key": "root.pem"}},
            },
        }
    )
    docs = render(tools, work, values)
    assert "Secret" not in kinds(docs)
    for pod in ("collector", "driver"):
        path = web_config_file_of(docs, pod)
        volumes, mounts = metrics_pod(docs, pod)
        secret_name, key, mount = mounted(path, volumes, mounts)
        assert (secret_name, key) == ("my-web-config", "node.yml")
        (volume,) = [v for v in volumes if v["name"] == mount["name"]]
        assert "items" not in volume["secret"]  # whole: the files it names are there too
        assert [m for m in mounts if m["mountPath"].startswith(WEB_ROOT)] == [mount]
    for component in ("collector", "stream"):
        (endpoint,) = one(docs, "ServiceMonitor", component)["spec"]["endpoints"]
        assert endpoint["scheme"] == "https"  # webConfig.tls.enabled's default
        assert endpoint["tlsConfig"]["ca"] == {"secret": {"name": "my-ca", "key": "root.pem"}}
        assert "basicAuth" not in endpoint


def test_the_service_monitors_scrape_the_guarded_endpoints(
    guarded_docs: list[dict[str, Any]], all_docs: list[dict[str, Any]]
) -> None:
    """Each ServiceMonitor scrapes https, checks the server's certificate against the TLS
    Secret's ca.crt and its metrics Service's DNS name, presents Prometheus' client
    certificate and sends the basic-auth Secret's user and password; unguarded, plain
    http with none of them."""
    for component in ("collector", "stream"):
        sm = one(guarded_docs, "ServiceMonitor", component)
        service = one(guarded_docs, "Service", component)
        assert matches(sm["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
        (endpoint,) = sm["spec"]["endpoints"]
        assert endpoint["scheme"] == "https"
        assert endpoint["tlsConfig"] == {
            "serverName": f"{service['metadata']['name']}.monitoring.svc",
            "ca": {"secret": {"name": TLS_SECRET, "key": "ca.crt"}},
            "cert": {"secret": {"name": CLIENT_CERT_SECRET, "key": "tls.crt"}},
            "keySecret": {"name": CLIENT_CERT_SECRET, "key": "tls.key"},
        }
        assert endpoint["basicAuth"] == {
            "username": {"name": BASIC_AUTH_SECRET, "key": "username"},
            "password": {"name": BASIC_AUTH_SECRET, "key": "password"},
        }
        (plain,) = one(all_docs, "ServiceMonitor", component)["spec"]["endpoints"]
        assert plain["scheme"] == "http"
        assert "tlsConfig" not in plain and "basicAuth" not in plain


def test_the_network_policies_admit_the_scrapers_to_the_metrics_ports(
    guarded_docs: list[dict[str, Any]],
) -> None:
    """The collector's NetworkPolicy admits the default scrapers (prometheus-operator's
    Prometheus and PrometheusAgent pods) to its metrics port alone; the job's selects the
    driver and the executors and admits the scrapers to the driver's metrics port and the
    job's own pods on any port."""
    scrapers = yaml.safe_load((CHART / "values.yaml").read_text())["networkPolicy"]["scrapers"]
    prometheus = {"app.kubernetes.io/name": "prometheus", "prometheus": "kps"}
    agent = {"app.kubernetes.io/name": "prometheus-agent"}
    deployment = one(guarded_docs, "Deployment")["spec"]["template"]
    collector = deployment["metadata"]["labels"]
    app = one(guarded_docs, "SparkApplication")["spec"]
    driver = {**app["driver"]["labels"], "spark-role": "driver"}
    executor = {**app["executor"]["labels"], "spark-role": "executor"}
    for peer in scrapers:  # any namespace, those pods only
        assert peer["namespaceSelector"] == {}
    assert all(any(selects(p["podSelector"], pod) for p in scrapers) for pod in (prometheus, agent))
    assert not any(
        selects(p["podSelector"], pod) for p in scrapers for pod in (collector, driver, executor)
    )
    policies = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d["spec"]
        for d in guarded_docs
        if d["kind"] == "NetworkPolicy"
    }
    assert set(policies) == {"collector", "stream"}

    c = policies["collector"]
    assert c["policyTypes"] == ["Ingress"]
    assert selects(c["podSelector"], collector)
    assert not any(selects(c["podSelector"], pod) for pod in (driver, executor))
    (port,) = [p["containerPort"] for p in deployment["spec"]["containers"][0]["ports"]]
    assert port == ALL_ENABLED["collector"]["metrics"]["port"]
    assert c["ingress"] == [{"from": scrapers, "ports": [{"port": port, "protocol": "TCP"}]}]

    s = policies["stream"]
    assert s["policyTypes"] == ["Ingress"]
    assert selects(s["podSelector"], driver) and selects(s["podSelector"], executor)
    assert not selects(s["podSelector"], collector)
    own, scrape = s["ingress"]
    assert "ports" not in own  # Spark's RPC and block managers: its own ports
    (peer,) = own["from"]
    assert set(peer) == {"podSelector"}  # this namespace's pods only
    assert selects(peer["podSelector"], driver) and selects(peer["podSelector"], executor)
    assert not selects(peer["podSelector"], collector)
    (port,) = [p["containerPort"] for p in app["driver"]["ports"]]
    assert port == ALL_ENABLED["stream"]["metrics"]["port"]
    assert scrape == {"from": scrapers, "ports": [{"port": port, "protocol": "TCP"}]}


@pytest.mark.parametrize("schema", [True, False], ids=["schema", "template"])
def test_an_empty_scrapers_list_is_refused(tools: Tools, work: Path, schema: bool) -> None:
    """networkPolicy.scrapers: [] (a rule with an empty `from` admits everyone) fails helm
    template naming the value: the schema, and the template itself without the schema
    (--skip-schema-validation)."""
    values = least(
        {"stream": {"enabled": True}, "networkPolicy": {"enabled": True, "scrapers": []}}
    )
    extra = () if schema else ("--skip-schema-validation",)
    proc = template(tools, work, values, extra=extra)
    assert proc.returncode != 0, "rendered with no scrapers"
    if schema:
        assert "values don't meet the specifications of the schema" in proc.stderr, proc.stderr
        assert "/networkPolicy/scrapers" in proc.stderr
    else:
        assert "networkPolicy.scrapers is empty" in proc.stderr, proc.stderr


#: A guarded collector that renders (GUARDED's webConfig, its ServiceMonitor on): each case
#: of test_the_chart_refuses_a_guard_that_blinds_or_guards_nothing breaks it once.
GUARDED_COLLECTOR = least(
    {"collector": {"serviceMonitor": {"enabled": True}}, "webConfig": GUARDED["webConfig"]}
)


@pytest.mark.parametrize(
    ("change", "refused_by", "complaint"),
    [
        ({}, None, None),
        ({"scrape": {"basicAuthSecret": {"name": ""}}}, "chart",
         "webConfig.scrape.basicAuthSecret.name is required with webConfig.basicAuthUsers"),
        ({"scrape": {"clientCertSecret": {"name": ""}}}, "chart",
         "webConfig.scrape.clientCertSecret.name is required with "
         "webConfig.tls.clientAuthType RequireAndVerifyClientCert"),
        ({"tls": {"secretName": ""}}, "chart",
         "webConfig.tls.secretName is required with webConfig.tls.enabled"),
        ({"tls": {"enabled": False}, "basicAuthUsers": None}, "chart",
         "webConfig: neither TLS (webConfig.tls) nor basic-auth users"),
        ({"existingSecret": "my-web-config"}, "chart",
         "webConfig.scrape.caSecret.name is required with webConfig.existingSecret"),
        ({"tls": {"clientAuthType": "VerifyClientCertIfGiven", "clientAllowedSans": ["p"]}},
         "chart", "webConfig.tls.clientAllowedSans needs webConfig.tls.clientAuthType "
         "RequireAndVerifyClientCert"),
        ({"rateLimit": {"interval": "100ms"}}, "chart",
         "webConfig.rateLimit.burst is required with webConfig.rateLimit"),
        ({"basicAuthUsers": {"prometheus": "hunter2"}}, "schema",
         "/webConfig/basicAuthUsers/prometheus"),
        ({"basicAuthUsers": {"prometheus": "$2y$10$tooshort"}}, "schema",
         "/webConfig/basicAuthUsers/prometheus"),
        ({"tls": {"clientAuthType": "RequireAnyClientCert"}}, "schema",
         "/webConfig/tls/clientAuthType"),
    ],
    ids=["valid", "users-no-basic-auth-secret", "mtls-no-client-cert", "tls-no-secret",
         "nothing-guarded", "existing-secret-no-ca", "sans-not-required", "rate-no-burst",
         "password-not-hash", "short-hash", "unverified-client-cert"],
)  # fmt: skip
def test_the_chart_refuses_a_guard_that_blinds_or_guards_nothing(
    tools: Tools,
    work: Path,
    change: dict[str, Any],
    refused_by: str | None,
    complaint: str | None,
) -> None:
    """krm.webConfig.validate refuses values that would guard nothing, blind Prometheus
    (its ServiceMonitors without the Secrets to pass the guard) or stop the monitor (a file
    its loader refuses); the schema refuses a user whose value is no bcrypt hash. One line
    each, naming the value."""
    proc = template(tools, work, merge(GUARDED_COLLECTOR, {"webConfig": change}))
    if refused_by is None:
        assert proc.returncode == 0, describe(proc)
        return
    assert proc.returncode != 0, f"rendered with {change}"
    assert complaint is not None and complaint in proc.stderr, proc.stderr
    schema = "values don't meet the specifications of the schema" in proc.stderr
    assert schema == (refused_by == "schema"), proc.stderr
    assert SCRAPE_PASSWORD not in proc.stderr


def test_guarded_probes_are_tcp_connects(
    guarded_docs: list[dict[str, Any]], all_docs: list[dict[str, Any]]
) -> None:
    """With webConfig on, the collector's probes connect to the metrics port (a GET would
    need the password or a client certificate); off, they GET /metrics."""
    (guarded,) = one(guarded_docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    (plain,) = one(all_docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert guarded[probe]["tcpSocket"] == {"port": "metrics"}
        assert "httpGet" not in guarded[probe]
        assert plain[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}
        assert "tcpSocket" not in plain[probe]
        # The rest of the probe is the values'.
        rest = {k: v for k, v in guarded[probe].items() if k != "tcpSocket"}
        assert rest == {k: v for k, v in plain[probe].items() if k != "httpGet"}


def test_tools_are_pinned() -> None:
    proc = run([TOOLS_SCRIPT, "versions"])
    assert proc.returncode == 0, describe(proc)
    pins = dict(line.split() for line in proc.stdout.splitlines())
    assert set(pins) == {
        "helm",
        "prometheus-operator",
        "spark-operator",
        "kubernetes-validate",
        "check-jsonschema",
    }
    assert all(re.fullmatch(r"v?\d+\.\d+\.\d+", v) for v in pins.values()), pins
    assert pins["helm"].startswith("v3.")
