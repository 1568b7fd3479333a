"""A stranger's cluster, first finding in minutes (issue 49's Must show): the README and
nothing else, on a cluster the project did not make.

* **The cluster** is three Kafka nodes (KRaft, broker and controller each) started here
  straight from the Maven jars with the hand-written ``server.properties`` beside this file
  -- nothing of ``monitor.dev`` starts, formats or configures it -- each with the JMX
  exporter agent running broad Strimzi-style rules (``tests/collector/exporter_rules/``: every
  MBean walked, pages of seconds), each page read a few times before the monitor starts (as
  their own Prometheus has been reading it: an agent's first pages are slower), and a topic
  under a light produce load.
* **The install** is the README's, extracted from it (``<!-- stranger: install -->``) and run
  as written in a copy of the tree, into a fresh venv under a fresh ``$HOME``, outside the
  repository. The pip cache and the jar cache are the machine's (a clean machine's first
  install downloads them: ``MONITOR_STRANGER_COLD=1`` gives the venv caches of its own).
* **The run** is the README's ``monitor run`` (``<!-- stranger: run -->``) with the README's
  host names replaced by this cluster's addresses -- the only change. Once every broker's
  replicas are sampled (no ``stale_telemetry`` open), a follower is stopped (SIGSTOP), and
  the first finding it causes must be on the job's ``/metrics`` within 60 s; the README's
  ``monitor status`` (``<!-- stranger: status -->``) then reads it from the store.

It prints the times: install to first finding, and ``monitor run``'s start to first finding.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from monitor import jars
from monitor.collector.jmx import fetch
from monitor.run.local_kafka import new_cluster_id
from tests import background
from tests.stranger.install import FOLDER, install, readme_block, stranger_env
from tests.streaming.kafka_io import batch_codecs

pytestmark = [pytest.mark.lab, pytest.mark.timeout(2400)]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
README = ROOT / "README.md"
RULES = ROOT / "tests" / "collector" / "exporter_rules" / "strimzi-style.yaml"
TOPIC = "orders"
#: The README's example hosts, and what each stands for here.
README_HOSTS = ("kafka1", "kafka2", "kafka3")
#: Findings a stopped follower causes (the controller fences it after Kafka's
#: broker.session.timeout.ms and shrinks the ISRs it was in; its log end falls behind).
FOLLOWER_FINDINGS = ("isr_shrink", "under_replicated", "at_min_isr", "follower_lag")


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Node:
    node: int
    port: int
    controller_port: int
    exporter_port: int
    folder: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def jmx_url(self) -> str:
        return f"http://127.0.0.1:{self.exporter_port}/metrics"


class StrangersCluster:
    """Three KRaft nodes from the Maven jars, known by pid."""

    def __init__(self, root: Path) -> None:
        self.scraped: dict[int, list[float]] = {}
        ports = _free_ports(9)
        self.nodes = [
            Node(i, ports[i - 1], ports[i + 2], ports[i + 5], root / f"node{i}") for i in (1, 2, 3)
        ]
        self.classpath = jars.kafka_classpath()
        self.agent = jars.jmx_agent_jar()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def _java(self) -> list[str]:
        return ["java", "-Xmx512m", "-Xms64m", "-Djava.awt.headless=true"]

    def start(self) -> None:
        voters = ",".join(f"{n.node}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        cluster_id = new_cluster_id()  # never starting with "-": StorageTool reads it as a flag
        template = (HERE / "server.properties").read_text()
        formats = []
        for n in self.nodes:
            n.folder.mkdir(parents=True)
            props = n.folder / "server.properties"
            props.write_text(template.format(
                node=n.node, port=n.port, controller_port=n.controller_port, voters=voters,
                data=n.folder / "data",
            ))  # fmt: skip
            formats.append(subprocess.Popen(
                [*self._java(), "-cp", self.classpath, "kafka.tools.StorageTool", "format",
                 "--cluster-id", cluster_id, "--config", str(props)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            ))  # fmt: skip
        for n, f in zip(self.nodes, formats, strict=True):
            said, _ = f.communicate(timeout=180)
            assert f.returncode == 0, f"formatting node {n.node}'s storage failed: {said[-2000:]}"
        for n in self.nodes:
            with (n.folder / "stdout.log").open("wb") as out:
                n.proc = subprocess.Popen(
                    [*self._java(), f"-javaagent:{self.agent}={n.exporter_port}:{RULES}",
                     f"-Dkafka.logs.dir={n.folder}", "-cp", self.classpath, "kafka.Kafka",
                     str(n.folder / "server.properties")],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )  # fmt: skip
        self._wait_for_brokers()

    def _admin(self) -> object:
        from kafka import KafkaAdminClient

        return KafkaAdminClient(
            bootstrap_servers=self.bootstrap.split(","), request_timeout_ms=5000
        )

    def _wait_for_brokers(self, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                admin = self._admin()
                try:
                    if len(admin.describe_cluster()["brokers"]) == 3:  # type: ignore[attr-defined]
                        return
                finally:
                    admin.close()  # type: ignore[attr-defined]
            time.sleep(1)
        raise AssertionError("the stranger's cluster did not come up: see its nodes' stdout.log")

    def create_topic(self) -> None:
        admin = self._admin()
        try:
            admin.create_topics(  # type: ignore[attr-defined]
                {TOPIC: {"num_partitions": 6, "replication_factor": 3,
                         "configs": {"min.insync.replicas": "2"}}},
                wait_for_metadata=True,
            )  # fmt: skip
        finally:
            admin.close()  # type: ignore[attr-defined]

    def scrape_as_their_prometheus(self, times: int = 3) -> dict[int, list[float]]:
        """Each node's exporter page read ``times`` times, the nodes at once, as the
        stranger's own Prometheus has been reading them: their cluster is not minutes old.
        The seconds each read took, by node. Measured: an agent's first pages with these
        rules take seconds (its MBean walk and rule cache are cold), and read while the job's
        Spark starts beside three such agents on two cores they went past the collector's
        10 s deadline for two rounds -- a cold start no running cluster has."""
        taken: dict[int, list[float]] = {n.node: [] for n in self.nodes}

        def read(n: Node) -> None:
            for _ in range(times):
                began = time.monotonic()
                fetch(n.jmx_url, 60.0)
                taken[n.node].append(round(time.monotonic() - began, 2))

        threads = [threading.Thread(target=read, args=(n,)) for n in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=180)
        return taken

    def stop(self) -> None:
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is None:
                os.kill(n.proc.pid, signal.SIGCONT)
                n.proc.terminate()
        for n in self.nodes:
            if n.proc is None:
                continue
            try:
                n.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                n.proc.kill()
                n.proc.wait(timeout=30)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[StrangersCluster]:
    c = StrangersCluster(tmp_path / "cluster")
    try:
        c.start()
        c.create_topic()
        c.scraped = c.scrape_as_their_prometheus()
        yield c
    finally:
        c.stop()


def _produce(bootstrap: str, stop: threading.Event) -> None:
    """A light load (acks=all), so that a follower left behind has something to miss."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", linger_ms=50)
    try:
        i = 0
        while not stop.wait(0.05):
            producer.send(TOPIC, str(i).encode())
            i += 1
    finally:
        producer.close(timeout=5)


def _metrics(url: str) -> dict[str, float]:
    """Each series of a /metrics page, summed by name and by name{kind="..."}."""
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    out: dict[str, float] = {}
    for row in text.splitlines():
        if row.startswith("#") or not row.strip():
            continue
        series, _, value = row.rpartition(" ")
        name = series.split("{", 1)[0]
        with contextlib.suppress(ValueError):
            out[name] = out.get(name, 0.0) + float(value)
            kind = re.search(r'kind="([^"]+)"', series)
            if kind:
                key = f"{name}:{kind.group(1)}"
                out[key] = out.get(key, 0.0) + float(value)
    return out


def _wait(what: str, timeout_s: float, check: object, proc: subprocess.Popen[bytes]) -> float:
    """Seconds until ``check()`` is true; fails naming ``what`` (or monitor run's exit)."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        assert proc.poll() is None, (
            f"monitor run exited ({proc.returncode}) while waiting for {what}"
        )
        with contextlib.suppress(OSError):
            if check():  # type: ignore[operator]
                return time.monotonic() - began
        time.sleep(1)
    raise AssertionError(f"no {what} within {timeout_s:.0f} s")


def _ours(home: Path) -> list[int]:
    """Processes whose command line names the fresh home (the venv, the state folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if str(home).encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
    return found


def test_a_stranger_reaches_a_first_finding_with_the_readme_alone(
    cluster: StrangersCluster, tmp_path: Path
) -> None:
    # -- the install, as the README says it (in the background since the session began) ----
    folder = FOLDER
    ran = background.wait("stranger-install", timeout=1800)
    if ran is not None and not (folder / "install.json").exists():
        pytest.fail(f"the background install wrote no {folder / 'install.json'}:\n{ran.stderr}")
    outcome = json.loads((folder / "install.json").read_text()) if ran else install(folder)
    assert outcome["returncode"] == 0, f"the README's install failed:\n{outcome['output']}"
    installed_s = float(outcome["seconds"])
    home, work = folder / "home", folder / "work"
    env = stranger_env(home)
    probe = subprocess.run(
        [str(home / "krm" / "bin" / "python"), "-c", "import monitor; print(monitor.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert str(home) in probe.stdout and str(ROOT) not in probe.stdout, probe.stdout
    load = threading.Event()
    producer = threading.Thread(target=_produce, args=(cluster.bootstrap, load), daemon=True)
    producer.start()

    # -- monitor run, as the README says it, with this cluster's addresses ------------------
    command = readme_block("run")
    for host, node in zip(README_HOSTS, cluster.nodes, strict=True):
        command = command.replace(f"{host}:9092", f"127.0.0.1:{node.port}")
        command = command.replace(f"http://{host}:9404/metrics", node.jmx_url)
    assert "kafka1" not in command, command
    out_path = tmp_path / "monitor-run.out"
    with out_path.open("wb") as out:
        run = subprocess.Popen(
            ["bash", "-c", command],
            cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    run_began = time.monotonic()
    job, collector = "http://127.0.0.1:9478/metrics", "http://127.0.0.1:9479/metrics"
    try:

        def every_broker_sampled() -> bool:
            m, c = _metrics(job), _metrics(collector)
            return (
                m.get("kafka_replication_partitions", 0) >= 6
                and m.get("kafka_replication_partitions_without_replica_samples", 1) == 0
                and m.get("kafka_replication_open_findings:stale_telemetry", 1) == 0
                and c.get("kafka_replication_collector_broker_up", 0) == 3
            )

        ready_s = _wait("every broker's replicas sampled", 600, every_broker_sampled, run)
        pages = _metrics(collector)
        print(
            f"\ntheir Prometheus's reads of each exporter before the monitor (s): {cluster.scraped}"
            f"\nthe collector reads every broker: its last pages took "
            f"{pages.get('kafka_replication_collector_page_seconds', 0) / 3:.2f} s on average"
        )
        follower = cluster.nodes[2]  # a follower of four partitions in six, leader of two
        assert follower.proc is not None
        os.kill(follower.proc.pid, signal.SIGSTOP)

        def follower_finding() -> bool:
            m = _metrics(job)
            return any(
                m.get(f"kafka_replication_open_findings:{k}", 0) > 0 for k in FOLLOWER_FINDINGS
            )

        found_s = _wait("finding of the stopped follower", 120, follower_finding, run)
        from_run_s = time.monotonic() - run_began
        first_s = installed_s + from_run_s
        print(
            f"a stranger's cluster: installed in {installed_s:.0f} s; monitor run to every "
            f"broker sampled {ready_s:.0f} s; follower {follower.node} stopped -> its finding on "
            f"/metrics {found_s:.0f} s; install -> first finding {first_s:.0f} s "
            f"({first_s / 60:.1f} min); monitor run -> first finding {from_run_s:.0f} s"
        )
        assert found_s <= 60, f"the stopped follower's finding took {found_s:.0f} s"

        # The README's status block, command by command (a line ending in \\ goes on).
        lines = readme_block("status").replace("\\\n", " ").splitlines()
        ran = [
            subprocess.run(
                ["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=300
            )
            for line in lines
        ]
        status, partitions = ran
        assert status.returncode in (1, 2), status.stdout + status.stderr  # WARNING or worse
        assert "under_replicated" in status.stdout, status.stdout
        assert partitions.returncode == 0, partitions.stdout + partitions.stderr
        assert TOPIC in partitions.stdout, partitions.stdout  # which partitions: the topic's
        os.kill(follower.proc.pid, signal.SIGCONT)
    finally:
        load.set()
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGINT)  # Ctrl-C, as the README says
            try:
                code = run.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
                code = run.wait(timeout=30)
        else:
            code = run.returncode
        print(f"--- monitor run's output ---\n{out_path.read_text(errors='replace')[-6000:]}")
        logs = home / ".local" / "state" / "kafka-replication-monitor" / "logs"
        for log in sorted(logs.glob("*.log")):  # shown when the test fails
            tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
            print(f"--- {log.name}, its last lines ---\n" + "\n".join(tail[-60:]))
    assert code == 130, f"monitor run exited {code} on Ctrl-C"
    left = _ours(home)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"monitor run left processes behind: {left}"
    # What the collector wrote, on the local Kafka's disk: zstd batches (its default), which
    # the installed job's Kafka source read (the zstd-jni pyspark brings).
    data = home / ".local" / "state" / "kafka-replication-monitor" / "kafka" / "data"
    segments = sorted(data.glob("__replication_monitor_events-*/*.log"))
    codecs = {c for seg in segments for c in batch_codecs(seg)}
    assert segments and codecs == {4}, (segments, codecs)
    text = out_path.read_text(errors="replace")
    assert re.search(r"^\d\d:\d\d:\d\d\s+!\s+warning\s+\w+\s+open\s+\S*orders", text, re.M), text[
        -3000:
    ]
    # Its first view names the three brokers (found: the job served no broker_up for a
    # broker never silent, and this line said "0 broker(s) answering" while all were read).
    assert re.search(
        r"^monitor run: the job tracks 6 partition\(s\), .*; 3 broker\(s\)", text, re.M
    ), text[-3000:]
