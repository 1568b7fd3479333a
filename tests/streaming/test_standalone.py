"""The same Kafka end-to-end run, with the job on a Spark standalone cluster.

Master and one worker come from the pyspark distribution (``spark-class ...Master`` /
``...Worker``) on 127.0.0.1, each in its own process group, stopped by that id at the end.
The job is submitted with ``spark-submit`` exactly as docs/streaming.md shows: Kafka
connector jars with ``--jars``, the code with ``--py-files`` (a zip of monitor + streaming).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from monitor.dev.processes.prom import free_port
from streaming.package import build_pyfiles_zip
from streaming.session import kafka_jars
from tests.streaming.e2e import check_outputs, scenario_feed
from tests.streaming.kafka_io import produce_events, publish_times

pytestmark = [pytest.mark.spark, pytest.mark.lab]

REPO = Path(__file__).resolve().parents[2]
#: The master's port; by default a free one (fixed ports in the ephemeral range collide:
#: CI once found the master's UI port taken, Spark bound the next one, and the test polled
#: another process for the master's state until it gave up).
MASTER_PORT = int(os.environ.get("MONITOR_TEST_STREAMING_SPARK_PORT", "0"))
#: Where Spark says it bound its UI (it moves to the next port when the one asked is taken).
UI_BOUND = re.compile(rb"Bound MasterWebUI to \S+, and started at http://[^:/]+:(\d+)")


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _master_state(log: Path) -> dict[str, Any]:
    """The master's state from its UI's JSON, at the port its log says the UI is bound to."""
    m = UI_BOUND.search(log.read_bytes())
    if m is None:
        raise OSError("the master's UI is not bound yet")
    with urllib.request.urlopen(f"http://127.0.0.1:{int(m.group(1))}/json/", timeout=2) as r:
        data: dict[str, Any] = json.loads(r.read())
        return data


@pytest.fixture
def standalone(tmp_path: Path) -> Any:
    home = _spark_home()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
        "SPARK_LOG_DIR": str(tmp_path / "logs"),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    spark_class = str(home / "bin" / "spark-class")
    logs = tmp_path / "logs"
    logs.mkdir()
    port = MASTER_PORT or free_port()
    master = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(free_port())],
        env=env, stdout=(logs / "master.out").open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    procs = [master]
    try:
        url = f"spark://127.0.0.1:{port}"
        worker = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
             "--cores", "2", "--memory", "3g", "--webui-port", str(free_port()), url],
            env=env, stdout=(logs / "worker.out").open("wb"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        procs.append(worker)
        deadline = time.monotonic() + 90
        while True:
            try:
                state = _master_state(logs / "master.out")
                if state.get("status") == "ALIVE" and int(state.get("aliveworkers", 0)) >= 1:
                    break
            except OSError:
                pass
            assert master.poll() is None and worker.poll() is None, (
                logs / "master.out"
            ).read_text()
            assert time.monotonic() < deadline, "standalone cluster did not come up"
            time.sleep(0.5)
        yield url, env, logs / "master.out"
    finally:
        for p in reversed(procs):
            _stop(p)


def test_kafka_end_to_end_on_standalone_cluster(
    kafka_lab: Any, topics: dict[str, str], tmp_path: Path, standalone: Any
) -> None:
    url, env, master_log = standalone
    bootstrap = kafka_lab.bootstrap_servers
    records, expected = scenario_feed()
    produced = produce_events(bootstrap, topics["events"], records, publish_times(records))
    pyfiles = build_pyfiles_zip(tmp_path / "monitor-py.zip")
    cmd = [
        str(_spark_home() / "bin" / "spark-submit"),
        "--master", url,
        "--jars", ",".join(kafka_jars()),
        "--py-files", str(pyfiles),
        "--conf", f"spark.pyspark.python={sys.executable}",
        "--conf", "spark.executor.memory=2g",
        "--conf", "spark.cores.max=2",
        str(REPO / "streaming" / "cli.py"),
        "--master", "none",
        "--no-jars",
        "--bootstrap", bootstrap,
        "--events-topic", topics["events"],
        "--findings-topic", topics["findings"],
        "--deadletter-topic", topics["deadletter"],
        "--checkpoint", str(tmp_path / "checkpoint"),
        "--store", str(tmp_path / "store"),
        "--trigger-seconds", "0.5",
        "--tick-ms", "3600000",
        "--buckets", "4",
        "--once",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=tmp_path, env={**env, "MONITOR_SPARK_LOG_LEVEL": "ERROR"},
        capture_output=True, timeout=900, start_new_session=True,
    )  # fmt: skip
    out = proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, out[-4000:]
    assert "events accepted" in out
    check_outputs(bootstrap, topics, expected, produced)
    summary = next(line for line in out.splitlines() if "events accepted" in line)
    accepted = int(summary.split(" events accepted")[0].split()[-1])
    dead = int(summary.split(" dead-lettered")[0].split()[-1])
    assert accepted + dead == produced
    # It really ran on the cluster: the master saw the application.
    state = _master_state(master_log)
    apps = state.get("completedapps", []) + state.get("activeapps", [])
    assert apps, "the master never saw the job"
