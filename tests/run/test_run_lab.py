"""``monitor run``'s parts on real Kafka: the monitor's own one-broker cluster it starts and
stops by pid (and a leftover of a killed run it recognises), and the supervision -- a child
that dies ends the unit with the reason said and everything else stopped. The whole unit,
install to finding, is tests/stranger/."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from monitor.dev.lab.cluster import Lab
from monitor.run.local_kafka import LocalKafka, _cmdline

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]


def _alive(pid: int) -> bool:
    state = Path(f"/proc/{pid}/stat")
    return state.exists() and state.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_the_local_kafka_starts_keeps_its_data_and_port_and_stops_by_pid(tmp_path: Path) -> None:
    """A first start formats and serves; a second start of the same folder while the first
    JVM still runs (a ``monitor run`` killed with SIGKILL leaves it) stops that JVM by its
    pid and marker, keeps the port and the topics; stop() leaves no JVM."""
    first = LocalKafka(tmp_path / "kafka", say=lambda _: None)
    first.start()
    assert first.proc is not None
    old_pid, port = first.proc.pid, first.port
    admin = KafkaAdminClient(bootstrap_servers=[first.bootstrap_servers])
    admin.create_topics({"kept": {"num_partitions": 1, "replication_factor": 1}})
    admin.close()
    assert first.marker in _cmdline(old_pid)

    said: list[str] = []
    second = LocalKafka(tmp_path / "kafka", say=said.append)  # the first one never stopped
    try:
        second.start()
        assert second.proc is not None and second.proc.pid != old_pid
        assert not _alive(old_pid), "the leftover JVM still runs"
        assert said == [f"stopping the local Kafka a previous run left (pid {old_pid})"]
        assert second.port == port
        admin = KafkaAdminClient(bootstrap_servers=[second.bootstrap_servers])
        assert "kept" in admin.list_topics()
        admin.close()
    finally:
        second.stop()
    assert not _alive(second.proc.pid if second.proc else old_pid)
    first.proc.wait(timeout=30)  # (reaped: it was ours)


def test_a_child_that_dies_ends_the_unit_with_its_reason(lab: Lab, tmp_path: Path) -> None:
    """The collector cannot reach the watched cluster and exits: ``monitor run`` says so
    with the collector's own line, stops the job, and exits 1, leaving nothing running."""
    suffix = uuid.uuid4().hex[:8]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONITOR_")}
    env["MONITOR_COLLECTOR_KAFKA__BOOTSTRAP_TIMEOUT_MS"] = "2000"
    env["MONITOR_COLLECTOR_EVENTS_TOPIC"] = f"__replication_monitor_events_{suffix}"
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "run", "--bootstrap", "127.0.0.1:9",
         "--events-bootstrap", lab.bootstrap_servers, "--create-topics",
         "--state-dir", str(tmp_path / "state"), "--metrics-port", "0",
         "--collector-metrics-port", "0"],
        env=env, capture_output=True, text=True, timeout=400, start_new_session=True,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "monitor run: collector exited (code 1); its last lines:" in out, out
    assert "    monitor collect: cannot use Kafka at 127.0.0.1:9" in out, out  # its reason, said
    assert "monitor run: stopping" in out
    left = [p for p in Path("/proc").iterdir()
            if p.name.isdigit() and str(tmp_path).encode() in _read(p / "cmdline")]  # fmt: skip
    assert left == [], f"left running: {left}"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
