"""The same Kafka end-to-end run, with the job on a Spark standalone cluster.

Master and one worker come from the pyspark distribution (``spark-class ...Master`` /
``...Worker``) on 127.0.0.1, each in its own process group, stopped by that id at the end.
The job is submitted with ``spark-submit`` exactly as docs/streaming.md shows: Kafka
connector jars with ``--jars``, the code with ``--py-files`` (a zip of monitor + streaming).

The cluster authenticates (issue 51): master and worker read ``spark.authenticate`` and a
secret made per test from a private ``SPARK_CONF_DIR`` (``spark-defaults.conf``, 0600; no
secret on their command lines), and the job is given the same secret only as
``spark_conf``'s ``spark.authenticate.secret.file`` -- it turns the authentication on
itself (docs/deploy.md, "Spark's own network").
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

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


def _stop(proc: subprocess.Popen[Any]) -> None:
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


class Cluster(NamedTuple):
    url: str
    #: The environment of a job's process: no SPARK_CONF_DIR, so none of the daemons' secret.
    env: dict[str, str]
    master_log: Path
    secret: str
    #: A file holding the secret (0600), for the job's spark_conf.
    secret_file: Path


def _private(path: Path, text: str) -> Path:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def _processes_holding(secret: str) -> list[str]:
    """Every process of this host whose command line holds ``secret``."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines()[1:] if secret in line]


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
    env.pop("SPARK_CONF_DIR", None)
    secret = secrets.token_hex(32)
    conf_dir = tmp_path / "spark-conf"
    _private(
        conf_dir / "spark-defaults.conf",
        # The REST submission server authenticates no one (Spark's docs/security.md).
        f"spark.authenticate true\nspark.authenticate.secret {secret}\n"
        "spark.master.rest.enabled false\n",
    )
    daemons = {**env, "SPARK_CONF_DIR": str(conf_dir)}
    secret_file = _private(tmp_path / "job-secret" / "spark-secret", secret + "\n")
    spark_class = str(home / "bin" / "spark-class")
    logs = tmp_path / "logs"
    logs.mkdir()
    port = MASTER_PORT or free_port()
    master = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(free_port())],
        env=daemons, stdout=(logs / "master.out").open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    procs = [master]
    try:
        url = f"spark://127.0.0.1:{port}"
        worker = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
             "--cores", "2", "--memory", "3g", "--webui-port", str(free_port()), url],
            env=daemons, stdout=(logs / "worker.out").open("wb"), stderr=subprocess.STDOUT,
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
        assert _processes_holding(secret) == []  # not on the daemons' command lines
        yield Cluster(url, env, logs / "master.out", secret, secret_file)
    finally:
        for p in reversed(procs):
            _stop(p)


def test_kafka_end_to_end_on_standalone_cluster(
    kafka_lab: Any, topics: dict[str, str], tmp_path: Path, standalone: Cluster
) -> None:
    """The job on an authenticating standalone cluster, to findings: spark-submit is given
    no secret, the job only its file in ``spark_conf`` (the environment's
    MONITOR_STREAMING_SPARK_CONF), and it encrypts too (``--spark-encrypt``). A driver
    without the secret is not even registered by this master (the test below)."""
    url, env, master_log = standalone.url, standalone.env, standalone.master_log
    env = {
        **env,
        "MONITOR_STREAMING_SPARK_CONF": json.dumps(
            {"spark.authenticate.secret.file": str(standalone.secret_file)}
        ),
    }
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
        "--spark-encrypt",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=tmp_path, env={**env, "MONITOR_SPARK_LOG_LEVEL": "ERROR"},
        capture_output=True, timeout=900, start_new_session=True,
    )  # fmt: skip
    out = proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, out[-4000:]
    assert "events accepted" in out
    assert "NOT authenticated" not in out and "NOT encrypted" not in out, out[-4000:]
    check_outputs(bootstrap, topics, expected, produced)
    summary = next(line for line in out.splitlines() if "events accepted" in line)
    accepted = int(summary.split(" events accepted")[0].split()[-1])
    dead = int(summary.split(" dead-lettered")[0].split()[-1])
    assert accepted + dead == produced
    # It really ran on the cluster: the master saw the application.
    state = _master_state(master_log)
    apps = state.get("completedapps", []) + state.get("activeapps", [])
    assert apps, "the master never saw the job"


_DRIVER = r"""
import json, logging, os, subprocess, sys
logging.basicConfig(level=logging.WARNING, format="LOG %(name)s: %(message)s")
from streaming.session import build_session
master, conf, secret = sys.argv[1], json.loads(sys.argv[2]), os.environ.pop("TEST_SECRET")
spark = build_session(master=master, conf={**conf, "spark.cores.max": "1",
                                           "spark.executor.memory": "1g"})
sc = spark.sparkContext
total = sc.parallelize(range(100), 2).map(lambda x: 2 * x).sum()  # Python on an executor
ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
print("RESULT " + json.dumps({
    "total": total, "auth": sc.getConf().get("spark.authenticate"),
    "holding": [x for x in ps.splitlines() if secret in x],
    "executors": ps.count("CoarseGrainedExecutorBackend"),
}))
spark.stop()
"""


def _driver(cluster: Cluster, conf: dict[str, str], log: Path) -> subprocess.Popen[str]:
    """A driver pyspark starts itself (``build_session(master="spark://...")``, as
    ``monitor stream --master spark://...`` does), in its own process group; its stderr in
    ``log``."""
    return subprocess.Popen(
        [sys.executable, "-c", _DRIVER, cluster.url, json.dumps(conf)],
        cwd=REPO,
        env={**cluster.env, "MONITOR_SPARK_LOG_LEVEL": "WARN", "TEST_SECRET": cluster.secret},
        stdout=subprocess.PIPE, stderr=log.open("w"), text=True, start_new_session=True,
    )  # fmt: skip


def test_a_driver_with_the_secret_file_runs_there_without_the_secret_on_a_command_line(
    standalone: Cluster, tmp_path: Path
) -> None:
    """The job reads ``spark.authenticate.secret.file`` and gives Spark the secret over
    py4j, after its JVM started: no process of the host -- driver, master, worker, the
    executor the worker started -- has it on its command line (pyspark passes a builder's
    settings to spark-submit as ``--conf``)."""
    conf = {"spark.authenticate.secret.file": str(standalone.secret_file)}
    proc = _driver(standalone, conf, tmp_path / "driver.err")
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        _stop(proc)
    err = (tmp_path / "driver.err").read_text(errors="replace")
    assert proc.returncode == 0, err[-4000:]
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    seen = json.loads(line.removeprefix("RESULT "))
    assert seen["total"] == 9900 and seen["auth"] == "true"
    assert seen["executors"] >= 1  # ps saw the executor the worker started
    assert seen["holding"] == [], seen["holding"]
    assert "NOT authenticated" not in err
    assert standalone.secret not in out + err


def test_a_driver_without_the_secret_is_refused_by_the_master(
    standalone: Cluster, tmp_path: Path
) -> None:
    """Without the secret the job warns (Spark's network unauthenticated, how to fix it)
    and starts anyway -- but this master refuses it: its connection fails the master's
    authentication (SASL) and the application is never registered."""
    log = tmp_path / "driver.err"
    proc = _driver(standalone, {}, log)
    deadline = time.monotonic() + 180
    try:
        while "Failed to connect to master" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-4000:]
            time.sleep(1)
    finally:
        _stop(proc)
    err = log.read_text(errors="replace")
    assert "NOT authenticated" in err and "spark.authenticate.secret.file" in err, err[-4000:]
    assert "Expected SaslMessage" in err, err[-4000:]  # the master asked for the secret
    state = _master_state(standalone.master_log)
    assert not state.get("activeapps") and not state.get("completedapps"), state
