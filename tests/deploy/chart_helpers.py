"""Helpers of tests/deploy/test_chart.py: the Helm chart's tools, renders and what
prometheus-operator would make of them.

The tools (Helm, kubernetes-validate, check-jsonschema, the CRDs' JSON Schemas) are installed
by ``scripts/k8s-tools.sh install`` into ``.cache/tools`` (``K8S_TOOLS_DIR``): pinned, from
the Go module proxy and PyPI, idempotent (milliseconds when present).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt
import yaml  # type: ignore[import-untyped]

from tests import background

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "kafka-replication-monitor"
TOOLS_SCRIPT = REPO / "scripts" / "k8s-tools.sh"
TOOLS = Path(os.environ.get("K8S_TOOLS_DIR", REPO / ".cache" / "tools"))
RULES_DIR = REPO / "monitor" / "assets" / "prometheus" / "rules"
RULE_TESTS_DIR = REPO / "monitor" / "assets" / "prometheus" / "tests"
DASHBOARDS_DIR = REPO / "dashboards" / "json"

#: The defaults the rule files carry and the chart replaces with values (alerts.*).
RUNBOOK_DEFAULT = "https://kafka-replication-monitor.invalid/runbook"
MONITOR_SELECTOR_DEFAULT = 'job="kafka-replication-monitor"'
COLLECTOR_SELECTOR_DEFAULT = 'job="kafka-replication-collector"'

#: The label a ServiceMonitor of the chart names as jobLabel (templates/_helpers.tpl).
JOB_LABEL_KEY = "kafka-replication-monitor/job"

#: Custom resources and the JSON Schema (from the CRDs, scripts/k8s-tools.sh) of each.
CR_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-monitoring.coreos.com-v1.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule-monitoring.coreos.com-v1.json",
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): (
        "sparkapplication-sparkoperator.k8s.io-v1beta2.json"
    ),
}

#: The values without a default: the watched cluster and the monitor's own (the chart
#: refuses to render the collector or the job without them: templates/_helpers.tpl,
#: krm.requireKafka and krm.eventsConnection). The least a release is given.
CLUSTERS: dict[str, Any] = {
    "kafka": {"bootstrapServers": "my-cluster-kafka-bootstrap.kafka:9092"},
    "eventsKafka": {"bootstrapServers": "monitor-kafka-bootstrap.monitoring:9092"},
}

#: Every optional part on, every secret reference set: the "all enabled" render.
ALL_ENABLED: dict[str, Any] = {
    "kafka": {
        "bootstrapServers": "k1:9093,k2:9093",
        "securityProtocol": "SASL_SSL",
        "sasl": {
            "mechanism": "SCRAM-SHA-512",
            "username": "replication-monitor",
            "passwordSecret": {"name": "kafka-monitor-user", "key": "password"},
        },
        "tls": {"caSecret": {"name": "kafka-cluster-ca-cert", "key": "ca.crt"}},
        "bootstrapTimeoutMs": 60000,
    },
    "eventsKafka": {
        "bootstrapServers": "mon-kafka:9093",
        "securityProtocol": "SSL",
        "tls": {
            "caSecret": {"name": "mon-cluster-ca-cert", "key": "ca.crt"},
            "clientCertSecret": {"name": "mon-user", "certKey": "user.crt", "keyKey": "user.key"},
            "keyPasswordSecret": {"name": "mon-user-key", "key": "password"},
        },
        "requestTimeoutMs": 10000,
    },
    "collector": {
        "config": {
            "cluster": "prod-eu",
            "jmx_urls": {"1": "http://k1:9404/metrics", "2": "http://k2:9404/metrics"},
            "jmx_profile": "strimzi",
            "jmx_names": {"log_end_offset": "my_kafka_log_logendoffset"},
            "interval_s": 2.5,
        },
        "metrics": {"port": 9500},  # not the default: the port must reach every place
        "serviceMonitor": {"enabled": True, "labels": {"release": "kps"}},
        "extraArgs": ["--log-level", "info"],
    },
    "stream": {
        "enabled": True,
        "config": {"max_offsets_per_trigger": 1000000, "model": {"stale_after_ms": 90000}},
        "metrics": {"port": 9488},
        "serviceMonitor": {"enabled": True, "labels": {"release": "kps"}},
        "hadoopConf": {"fs.s3a.path.style.access": True},
    },
    "prometheusRule": {"enabled": True, "labels": {"release": "kps"}},
    "dashboards": {"enabled": True, "annotations": {"grafana_folder": "Kafka"}},
}

#: Where the chart mounts the web configuration of /metrics and its certificates
#: (templates/_helpers.tpl, krm.webConfig.root).
WEB_ROOT = "/etc/kafka-replication-monitor/web"
#: The basic-auth password Prometheus would send (webConfig.scrape.basicAuthSecret's).
SCRAPE_PASSWORD = "scrape-me-if-you-can"
#: The existing Secrets the guarded render names (none is rendered by the chart).
TLS_SECRET = "krm-metrics-tls"  # kubernetes.io/tls, e.g. a cert-manager Certificate's
CLIENT_CERT_SECRET = "prometheus-client-tls"  # Prometheus' client certificate
BASIC_AUTH_SECRET = "prometheus-basic-auth"  # Prometheus' user and password

#: Both /metrics guarded: TLS with mutual TLS, a basic-auth user (a real bcrypt hash), the
#: ServiceMonitors' scrape settings, the NetworkPolicies. On top of ALL_ENABLED.
GUARDED: dict[str, Any] = {
    "webConfig": {
        "enabled": True,
        "tls": {
            "enabled": True,
            "secretName": TLS_SECRET,
            "clientAuthType": "RequireAndVerifyClientCert",
        },
        "basicAuthUsers": {
            "prometheus": bcrypt.hashpw(SCRAPE_PASSWORD.encode(), bcrypt.gensalt(10)).decode()
        },
        "scrape": {
            "clientCertSecret": {"name": CLIENT_CERT_SECRET},
            "basicAuthSecret": {"name": BASIC_AUTH_SECRET},
        },
    },
    "networkPolicy": {"enabled": True},
}


@dataclass(frozen=True)
class Tools:
    helm: Path
    kubernetes_validate: Path
    check_jsonschema: Path
    schemas: Path


def install_tools() -> Tools:
    """``scripts/k8s-tools.sh install`` (fast when everything is there); the paths.

    The session may have started it in the background (``tests/background.py``): it is
    waited for, then run again here -- in milliseconds when the background run installed
    everything, and saying what failed when it did not."""
    background.wait("k8s-tools", timeout=1800)
    proc = subprocess.run(
        [str(TOOLS_SCRIPT), "install"], capture_output=True, text=True, check=False, timeout=1800
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"scripts/k8s-tools.sh install exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        )
    return Tools(
        helm=TOOLS / "bin" / "helm",
        kubernetes_validate=TOOLS / "venv" / "bin" / "kubernetes-validate",
        check_jsonschema=TOOLS / "venv" / "bin" / "check-jsonschema",
        schemas=TOOLS / "schemas",
    )


def run(argv: Sequence[str | Path], cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """Run a tool and return its result, whatever its exit status."""
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, cwd=cwd, check=False, timeout=300
    )


def describe(proc: subprocess.CompletedProcess[str]) -> str:
    argv = " ".join(str(a) for a in proc.args)
    return (
        f"`{argv}` exited {proc.returncode}\n"
        f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
    )


def write_values(path: Path, values: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(dict(values), sort_keys=False))
    return path


def template(
    tools: Tools,
    tmp: Path,
    values: Mapping[str, Any] | None = None,
    *,
    release: str = "krm",
    namespace: str = "monitoring",
    kube_version: str | None = None,
    extra: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """``helm template`` of the chart with ``values`` (a values file) and ``extra``
    arguments; the process."""
    argv: list[str | Path] = [tools.helm, "template", release, CHART, "--namespace", namespace]
    argv += extra
    if values is not None:
        fd, name = tempfile.mkstemp(prefix="values-", suffix=".yaml", dir=tmp)
        os.close(fd)
        argv += ["--values", write_values(Path(name), values)]
    if kube_version:
        argv += ["--kube-version", kube_version]
    return run(argv)


def render(
    tools: Tools, tmp: Path, values: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The chart's objects with ``values``; fails (AssertionError) if Helm does."""
    proc = template(tools, tmp, values)
    assert proc.returncode == 0, describe(proc)
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def one(docs: Iterable[dict[str, Any]], kind: str, component: str | None = None) -> dict[str, Any]:
    """The one object of ``kind`` (of ``component``, app.kubernetes.io/component)."""
    found = [
        d
        for d in docs
        if d["kind"] == kind
        and (
            component is None
            or d["metadata"]["labels"].get("app.kubernetes.io/component") == component
        )
    ]
    assert len(found) == 1, f"{len(found)} {kind} of component {component}"
    return found[0]


def matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a LabelSelector (matchLabels and matchExpressions) selects ``labels``."""
    if not matches(selector.get("matchLabels", {}), labels):
        return False
    for e in selector.get("matchExpressions", []):
        key, op, values = e["key"], e["operator"], e.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def mounted(
    path: str, volumes: Sequence[Mapping[str, Any]], mounts: Sequence[Mapping[str, Any]]
) -> tuple[str, str, Mapping[str, Any]]:
    """What a container reads at ``path``: the Secret's name and key, and the mount
    (AssertionError unless exactly one mount of a Secret holds it)."""
    by_name = {v["name"]: v for v in volumes}
    found = []
    for m in mounts:
        folder = m["mountPath"].rstrip("/") + "/"
        if not path.startswith(folder) or "secret" not in by_name[m["name"]]:
            continue
        secret = by_name[m["name"]]["secret"]
        rel = path.removeprefix(folder)
        items = {i["path"]: i["key"] for i in secret.get("items", [])}
        if not items or rel in items:
            found.append((secret["secretName"], items.get(rel, rel), m))
    assert len(found) == 1, f"{path}: mounted by {found}"
    return found[0]


def mount_secrets(
    volumes: Sequence[Mapping[str, Any]],
    mounts: Sequence[Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, bytes]],
    under: str,
    dest: Path,
) -> list[Path]:
    """The files a container's Secret mounts under ``under`` would show, written below
    ``dest`` (``under`` standing for ``dest``) from ``secrets`` (name -> key -> content), as
    the kubelet writes them: the whole Secret, or its ``items``. The files written."""
    by_name = {v["name"]: v for v in volumes}
    written = []
    for m in mounts:
        if not (m["mountPath"] + "/").startswith(under.rstrip("/") + "/"):
            continue
        secret = by_name[m["name"]]["secret"]
        data = secrets[secret["secretName"]]
        items = {i["key"]: i["path"] for i in secret.get("items", [])} or {k: k for k in data}
        folder = dest / m["mountPath"].removeprefix(under).lstrip("/")
        for key, rel in items.items():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data[key])
            written.append(target)
    return written


def scrape_jobs(docs: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Prometheus' ``job`` of each ServiceMonitor's targets, by the monitor's component, as
    prometheus-operator sets it: the value of the Service label named ``jobLabel``, else the
    Service's name; then a relabeling that targets ``job`` wins."""
    services = [d for d in docs if d["kind"] == "Service"]
    jobs: dict[str, str] = {}
    for sm in (d for d in docs if d["kind"] == "ServiceMonitor"):
        spec = sm["spec"]
        selected = [
            s
            for s in services
            if matches(spec["selector"]["matchLabels"], s["metadata"].get("labels", {}))
            and s["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]
        ]
        assert len(selected) == 1, f"ServiceMonitor {sm['metadata']['name']} selects {selected}"
        svc = selected[0]
        labels = svc["metadata"]["labels"]
        job = labels.get(spec.get("jobLabel", ""), svc["metadata"]["name"])
        for endpoint in spec["endpoints"]:
            for relabel in endpoint.get("relabelings", []):
                if relabel.get("targetLabel") == "job" and "sourceLabels" not in relabel:
                    job = relabel["replacement"]
        jobs[sm["metadata"]["labels"]["app.kubernetes.io/component"]] = job
    return jobs


def rule_file_of_groups() -> dict[str, str]:
    """Group name -> the shipped rule file that holds it."""
    out: dict[str, str] = {}
    for path in sorted(RULES_DIR.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            out[group["name"]] = path.name
    return out


def write_rule_files(rule: Mapping[str, Any], folder: Path) -> list[Path]:
    """A PrometheusRule's groups written back as rule files, each group in the file of the
    package that holds it (``folder/<name>.yml``), so that the shipped tests' ``rule_files:
    ../rules/<name>.yml`` find them."""
    folder.mkdir(parents=True, exist_ok=True)
    where = rule_file_of_groups()
    files: dict[str, list[Any]] = {}
    for group in rule["spec"]["groups"]:
        assert group["name"] in where, f"group {group['name']} is in no shipped rule file"
        files.setdefault(where[group["name"]], []).append(group)
    paths = []
    for name, groups in sorted(files.items()):
        path = folder / name
        path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
        paths.append(path)
    return paths


def alert_rules(rule: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
