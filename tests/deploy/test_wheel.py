"""The wheel is the product: built from this tree, installed into a fresh venv outside the
repository, it runs on its own -- assets from package data, no path into a source tree.

One venv for the module: first the base install (the missing ``spark`` and ``dashboards``
extras are one line naming them; ``dashboards push`` runs; nothing replaces ``urllib3``),
then the ``dashboards`` extra. The dependency versions are the lock's (``-c
requirements.lock``), as a careful install would pin them; the pip cache keeps the second
install of a run quick. No JVM starts here (the light lane runs it): the ``spark`` extra
installed as the README says, its ``monitor run`` end to end on a real cluster -- the
collector's zstd events read by the installed job, findings on its ``/metrics`` and in the
store read by ``monitor status`` -- is tests/stranger/test_strangers_cluster.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: What the wheel is built from: the package sources and the files pyproject.toml names.
SOURCES = (
    "pyproject.toml", "README.md", "LICENSE", "monitor", "streaming", "dashboards", "tests/data"
)  # fmt: skip


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

    def run(
        self, *argv: str, timeout: float = 300, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.root / "bin" / argv[0]), *argv[1:]],
            cwd=self.work,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, *argv: str, timeout: float = 300, env: dict[str, str] | None = None) -> str:
        proc = self.run(*argv, timeout=timeout, env=env)
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
    # The licence, as pyproject.toml names it: the Apache License 2.0's text, whole.
    (info,) = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
    with zipfile.ZipFile(wheel) as z:
        assert z.read(f"{info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
        metadata = z.read(f"{info}/METADATA").decode().splitlines()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
    # The standard text byte for byte: the sha256 of apache.org's LICENSE-2.0.txt (and of
    # Debian's /usr/share/common-licenses/Apache-2.0).
    digest = hashlib.sha256((REPO / "LICENSE").read_bytes()).hexdigest()
    assert digest == "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_installed_commands_run_from_package_data(venv: Venv) -> None:
    from monitor import __version__

    assert (
        venv.ok("monitor", "--version").strip()
        == f"monitor {__version__} (kafka-replication-monitor)"
    )
    where = venv.ok("python", "-c", "import monitor; print(monitor.__file__)")
    assert str(venv.root) in where and str(REPO) not in where, where

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
    (line,) = stream.stderr.strip().splitlines()
    assert line.startswith("monitor stream: needs the 'spark' extra (no module pyspark): "), line
    assert "pip install '" in line and "[spark]'" in line, line
    # Nor Grafana's SDK: generating the dashboards is one line naming the extra.
    generate = venv.run("monitor", "dashboards", "generate")
    assert generate.returncode == 78, generate.stderr
    (line,) = generate.stderr.strip().splitlines()
    assert line.startswith(
        "monitor dashboards generate: needs the 'dashboards' extra "
        "(no module grafana_foundation_sdk): pip install './[dashboards]' "
    ), line
    assert not (venv.work / "grafana-dashboards").exists()
    # The job's entry point run as a script (spark-submit .../site-packages/streaming/cli.py):
    # its folder first on sys.path, streaming/operator.py must not shadow the stdlib's.
    where = venv.ok(
        "python", "-c", "import streaming, os; print(os.path.dirname(streaming.__file__))"
    )
    script = venv.run("python", os.path.join(where.strip(), "cli.py"), "--help")
    assert script.returncode == 0 and "usage: monitor stream" in script.stdout, script.stderr


def test_dashboards_push_runs_on_the_base_install(venv: Venv) -> None:
    """``push`` sends the shipped JSON over the standard library's HTTP client: the
    requests it makes to a recording server (tests/commands/test_dashboards_push.py)."""
    from tests.commands.test_dashboards_push import grafana_answers, http_server

    shipped = sorted((REPO / "dashboards" / "json").glob("*.json"))
    with http_server(grafana_answers({})) as (url, seen):
        out = venv.ok("monitor", "dashboards", "push", "--url", url, env={"GRAFANA_TOKEN": "t"})
    assert out.strip().endswith(f"pushed {len(shipped)} dashboards to Grafana 11.6.0 at {url}")
    sent = [body["dashboard"] for _, path, _, body in seen if path == "/api/dashboards/db"]
    assert sent == [{**json.loads(p.read_text()), "id": None} for p in shipped]


#: Where ``urllib3`` is imported from, its version, its distribution's version, and whether
#: its ``__init__.py`` is one of the files that distribution installed (its RECORD).
_URLLIB3 = """
import importlib.metadata as m, json, pathlib, urllib3
where = pathlib.Path(urllib3.__file__).resolve()
own = {pathlib.Path(f.locate()).resolve() for f in m.distribution("urllib3").files or []}
print(json.dumps([str(where), urllib3.__version__, m.version("urllib3"), where in own]))
"""


def test_the_base_install_never_replaces_urllib3(venv: Venv) -> None:
    """No HTTP library in the base install, so nothing that provides or replaces
    ``urllib3`` (grafana-client's niquests brought urllib3-future, whose ``.pth`` copies
    itself over ``urllib3`` at every start of the venv's Python). A neighbour program's
    urllib3, installed beside the monitor, stays urllib3's own from one start to the next."""
    site = Path(
        venv.ok("python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    )
    assert not (site / "urllib3_future.pth").exists()
    assert not [p.name for p in site.glob("*.pth") if "urllib3" in p.read_text()]
    names = (
        "import importlib.metadata as m; "
        "print(*{d.metadata['Name'].lower() for d in m.distributions()})"
    )
    dists = venv.ok("python", "-c", names).split()
    assert "kafka-replication-monitor" in dists and "zstandard" in dists, dists
    assert not {"urllib3", "urllib3-future", "niquests", "requests", "grafana-client"} & set(dists)
    spec = "import importlib.util; print(importlib.util.find_spec('urllib3'))"
    assert venv.ok("python", "-c", spec).strip() == "None"  # nothing provides urllib3
    venv.pip_install("urllib3")  # the lock's, as a neighbour program would bring it
    for _ in range(2):  # a .pth acts at each start: the second start sees what the first did
        where, version, installed, recorded = json.loads(venv.ok("python", "-c", _URLLIB3))
        assert where == str((site / "urllib3" / "__init__.py").resolve())
        assert recorded and version == installed, (where, version, installed)


def test_the_dashboards_extra_generates_the_committed_json(venv: Venv, wheel: Path) -> None:
    venv.pip_install(f"{wheel}[dashboards]")
    assert "wrote" in venv.ok("monitor", "dashboards", "generate")
    out = venv.work / "grafana-dashboards"
    committed = sorted((REPO / "dashboards" / "json").glob("*.json"))
    assert sorted(p.name for p in out.glob("*.json")) == [p.name for p in committed]
    for p in committed:
        assert json.loads((out / p.name).read_text()) == json.loads(p.read_text())
