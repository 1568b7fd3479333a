"""`monitor status --prometheus URL` against the real Prometheus: the firing alerts listed.

Prometheus runs the shipped configuration and rules plus two rules that fire at once
(``vector(1)``, no ``for``), so the test does not wait minutes for a shipped rule's
``for``: one shaped like the monitor's (a finding kind in ``kind``), one of another team's
(no ``kind``). The CLI must list exactly the monitor's firing alerts -- another team's in the
same Prometheus never set the check's verdict.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.dev.processes.prom import PrometheusProcess

pytestmark = pytest.mark.prometheus

RULE = """groups:
  - name: runbook-status-test
    rules:
      - alert: RunbookStatusTest
        expr: vector(1)
        labels:
          severity: critical
          kind: committed_data_loss
          cluster: lab
          topic: orders
          partition: "3"
      - alert: SomeoneElsesDiskFull
        expr: vector(1)
        labels:
          severity: critical
          team: storage
"""


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    prom = PrometheusProcess(tmp_path_factory.mktemp("prometheus"), evaluation_interval="1s")
    (prom.workdir / "rules" / "zz-runbook-status-test.yml").write_text(RULE)
    prom.start()
    try:
        deadline = time.monotonic() + 60
        while not any(
            a["labels"]["alertname"] == "RunbookStatusTest" and a["state"] == "firing"
            for a in prom.alerts()
        ):
            assert time.monotonic() < deadline, "the test rule never fired"
            time.sleep(0.5)
        yield prom
    finally:
        prom.stop()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bench._synthetic_store import write_store

    return write_store(tmp_path_factory.mktemp("store"), 1000, phases=4).root


def test_status_lists_the_firing_alerts(
    prometheus: PrometheusProcess, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["status", "--store", str(store), "--prometheus", prometheus.url]
    assert main([*argv, "--json"]) == 2  # a critical alert is firing: CRITICAL
    st = json.loads(capsys.readouterr().out)
    assert "1 critical alert firing" in st["summary"]
    firing = [a for a in prometheus.alerts() if a["state"] == "firing" and "kind" in a["labels"]]
    assert any(a["labels"]["alertname"] == "SomeoneElsesDiskFull" for a in prometheus.alerts())
    assert st["prometheus"]["url"] == prometheus.url
    names = sorted(a["labels"]["alertname"] for a in st["prometheus"]["firing"])
    assert names == sorted(a["labels"]["alertname"] for a in firing)
    assert "SomeoneElsesDiskFull" not in names
    ours = next(
        a for a in st["prometheus"]["firing"] if a["labels"]["alertname"] == "RunbookStatusTest"
    )
    assert ours["labels"]["severity"] == "critical" and ours["state"] == "firing"
    assert st["partitions"] == 1000  # the store's answer is still there
    assert main(argv) == 2
    text = capsys.readouterr().out
    assert f"Prometheus {prometheus.url}: {len(firing)} alerts firing" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("RunbookStatusTest"))
    assert "critical" in line and "lab orders/3" in line


def test_status_says_when_prometheus_is_gone(
    store: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A Prometheus that was there and stopped: UNKNOWN (exit 3), the URL named."""
    prom = PrometheusProcess(tmp_path / "gone")
    prom.start()
    url = prom.url
    prom.stop()
    assert main(["status", "--store", str(store), "--prometheus", url]) == 3
    err = capsys.readouterr().err
    assert f"monitor status: cannot reach Prometheus at {url}: " in err
