"""The wheel is the product: built from this tree, installed into a fresh venv outside the
repository, it runs on its own -- assets from package data, no path into a source tree.

One venv for the module: first the base install (the missing ``spark`` extra is one line
naming it), then the ``spark`` extra, then ``monitor stream`` end to end on the real lab
(events in, findings out, the store read by ``monitor status``). The dependency versions are
the lock's (``-c requirements.lock``), as a careful install would pin them; the pip cache
keeps the second install of a run quick.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.streaming.kafka_io import produce_events, read_all

pytestmark = [pytest.mark.lab, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
#: What the wheel is built from: the package sources and the files pyproject.toml names.
SOURCES = ("pyproject.toml", "README.md", "monitor", "streaming", "dashboards", "tests/data")


class Venv:
    """A venv outside the repository; runs its ``monitor`` with the repository out of sight
    (cwd elsewhere, no PYTHONPATH), sharing only the jar cache (``MONITOR_CACHE``)."""

    def __init__(self, root: Path, work: Path) -> None:
        self.root, self.work = root, work
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        self.env["MONITOR_CACHE"] = str(REPO / ".cache")
        self.env["MONITOR_SPARK_LOG_LEVEL"] = "ERROR"
        # pip compiles every installed module to bytecode by default (most never imported
        # here); what runs is compiled on import instead (docs/benchmarks.md).
        self.env["PIP_COMPILE"] = "0"

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.root / "bin" / argv[0]), *argv[1:]],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, *argv: str, timeout: float = 300) -> str:
        proc = self.run(*argv, timeout=timeout)
        assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        return proc.stdout

    def pip_install(self, *requirements: str) -> None:
        """Install with every dependency verified by the lock's hashes (scripts/pip_locked.py,
        as the image and the systemd guide do)."""
        proc = subprocess.run(
            [sys.executable, str(REPO / "scripts" / "pip_locked.py"),
             "--pip", f"{self.root / 'bin' / 'pip'} --disable-pip-version-check",
             *requirements],
            cwd=self.work, env=self.env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert proc.returncode == 0, f"pip_locked exited {proc.returncode}:\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built by pip from a copy of the tree (the build leaves nothing in it)."""
    src = tmp_path_factory.mktemp("wheel-src")
    for name in SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, src / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
        else:
            shutil.copy2(source, src / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "-q", "--no-deps",
         "-w", str(dist), str(src)],
        check=True, timeout=600,
    )  # fmt: skip
    (built,) = dist.glob("kafka_replication_monitor-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=120)
    v = Venv(root, tmp_path_factory.mktemp("elsewhere"))
    v.pip_install(str(wheel))
    yield v


def test_the_wheel_holds_the_assets_and_not_the_development_package(wheel: Path) -> None:
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    for asset in (
        "monitor/assets/pom.xml",
        "monitor/assets/prometheus/rules/replication.yml",
        "monitor/assets/alertmanager/route.yml",
        "monitor/assets/jmx-exporter/kafka-replication.yaml",
        "monitor/assets/scenarios/unclean_election.jsonl",
        "dashboards/json/cluster-overview.json",
    ):
        assert asset in names, asset
    assert not [n for n in names if n.startswith("monitor/dev/")]


def test_installed_commands_run_from_package_data(venv: Venv) -> None:
    from monitor import __version__

    assert (
        venv.ok("monitor", "--version").strip()
        == f"monitor {__version__} (kafka-replication-monitor)"
    )
    where = venv.ok("python", "-c", "import monitor; print(monitor.__file__)")
    assert str(venv.root) in where and str(REPO) not in where, where

    # Dashboards: generated into the working folder, the same as the committed JSON.
    assert "wrote" in venv.ok("monitor", "dashboards", "generate")
    out = venv.work / "grafana-dashboards"
    committed = sorted((REPO / "dashboards" / "json").glob("*.json"))
    assert sorted(p.name for p in out.glob("*.json")) == [p.name for p in committed]
    for p in committed:
        assert json.loads((out / p.name).read_text()) == json.loads(p.read_text())

    # A shipped scenario, replayed by name: the loss of the unclean election.
    findings = [
        json.loads(ln)
        for ln in venv.ok("monitor", "replay", "unclean_election", "--json").splitlines()
    ]
    assert {"unclean_election", "committed_data_loss"} <= {f["kind"] for f in findings}

    # Rules rendered for a stack, and every asset exported.
    venv.ok("monitor", "assets", "rules", "--out", "rules", "--runbook-url", "https://wiki/rb")
    assert "https://wiki/rb#offline" in (venv.work / "rules" / "replication.yml").read_text()
    venv.ok("monitor", "assets", "export", "assets")
    assert (venv.work / "assets" / "alertmanager" / "route.yml").is_file()

    # status --json on a shipped scenario's events (the store comes with the stream below).
    scenario = venv.work / "assets" / "scenarios" / "unclean_election.jsonl"
    status = venv.run("monitor", "status", "--events", str(scenario), "--json")
    assert status.returncode == 2, status.stderr  # CRITICAL: a committed loss
    assert json.loads(status.stdout)["status"] == "CRITICAL"


def test_left_out_commands_and_extras_say_how_to_get_them(venv: Venv) -> None:
    lab = venv.run("monitor", "lab", "up")
    assert lab.returncode == 78
    assert "development command" in lab.stderr and "make setup" in lab.stderr, lab.stderr
    assert "Traceback" not in lab.stderr
    # The base install has no pyspark: stream is one line naming the extra.
    stream = venv.run("monitor", "stream", "--once", "--bootstrap", "127.0.0.1:1")
    assert stream.returncode == 78, stream.stderr
    assert stream.stderr.strip().splitlines() == [
        "monitor stream: needs the 'spark' extra (no module pyspark): "
        "pip install 'kafka-replication-monitor[spark]'"
    ]


def test_stream_from_the_wheel_end_to_end_on_the_lab(
    venv: Venv, wheel: Path, kafka_lab: Any, topics: dict[str, str]
) -> None:
    """With the spark extra, the installed ``monitor stream`` reads events from the lab,
    writes the findings topic and the store; the installed ``status`` reads the store."""
    venv.pip_install(f"{wheel}[spark]")
    scenario = REPO / "tests" / "data" / "unclean_election.jsonl"
    records = [ln for ln in scenario.read_bytes().splitlines() if ln.strip()]
    produced = produce_events(kafka_lab.bootstrap_servers, topics["events"], records)
    store = venv.work / "store"
    venv.ok(
        "monitor", "stream", "--once",
        "--bootstrap", kafka_lab.bootstrap_servers,
        "--events-topic", topics["events"],
        "--findings-topic", topics["findings"],
        "--deadletter-topic", topics["deadletter"],
        "--checkpoint", str(venv.work / "checkpoint"),
        "--store", str(store),
        "--trigger-seconds", "0.5",
        timeout=900,
    )  # fmt: skip
    assert produced == len(records)
    found = [json.loads(r.value) for r in read_all(kafka_lab.bootstrap_servers, topics["findings"])]
    expected = [
        json.loads(ln) for ln in venv.ok("monitor", "replay", str(scenario), "--json").splitlines()
    ]
    loss = [f["details"] for f in found if f["kind"] == "committed_data_loss"]
    assert loss == [f["details"] for f in expected if f["kind"] == "committed_data_loss"]
    assert loss[0]["lost_count"] == 4000
    assert not read_all(kafka_lab.bootstrap_servers, topics["deadletter"])
    status = venv.run("monitor", "status", "--store", str(store), "--json")
    assert status.returncode == 2, status.stdout + status.stderr
    assert json.loads(status.stdout)["status"] == "CRITICAL"
