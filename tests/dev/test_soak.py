"""``monitor soak``, shortened for CI: the whole stack (lab, monitor cluster, collector as a
child process, the Spark job, Prometheus, Alertmanager) through one lab fault (a paused
follower), with every fault of the monitor itself striking once while its conditions are
open (SIGKILL of the job mid-batch, a crash of the events topic's broker, SIGKILL of the
collector, a Prometheus restart). The lab faults' rotation (five kinds) is the 30-minute
soak's; ``tests/dev/test_soak_plan.py`` checks each kind's plan without a cluster. Asserts
on ``soak.json``: the findings match the faults one to one, no finding outside a fault
window, no alert firing in a quiet window, no finding id written twice with different
content, every component came back, and RSS was sampled for the job's process group and the
collector (the collector's judged flat)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

SOAK_ARGS = [
    "--cycles", "1",
    "--monitor-faults-per-cycle", "4",
    "--quiet-seconds", "12",
    "--fault-seconds", "12",
    "--cycle-seconds", "0",
    "--warmup-seconds", "900",  # the job's RSS: judged by the 30-minute soak
    "--outage-seconds", "0",
]  # fmt: skip


@pytest.mark.lab
@pytest.mark.prometheus
@pytest.mark.spark
@pytest.mark.timeout(1500)
def test_short_soak(tmp_path: Path) -> None:
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "soak", "--dir", str(tmp_path), *SOAK_ARGS],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=1400)
    except subprocess.TimeoutExpired:
        # Ctrl-C lets the soak stop what it started; then anything left, by pid. Print what
        # it said: the one CI timeout so far left no trace of what it waited for.
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
        for pid in left.stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        print(out[-12000:], err[-3000:])
        pytest.fail("the short soak did not finish within 1400 s (its output is above)")
    proc = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    print(f"soak wall time: {time.monotonic() - started:.0f}s")
    report: dict[str, Any] = json.loads((tmp_path / "soak.json").read_text())
    assert report["problems"] == [], report["problems"]
    assert report["verdict"] == "pass" and proc.returncode == 0, proc.stderr[-3000:]
    check_report(report)
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""


def check_report(report: dict[str, Any]) -> None:

    # One lab fault, every monitor fault once during it.
    assert len(report["lab_faults"]) == 1, report["lab_faults"]
    assert report["monitor_faults_covered"] == sorted(
        ["stream_kill", "events_broker_restart", "collector_kill", "prometheus_restart"]
    )
    faults = {m["name"]: m for c in report["cycles"] for m in c["monitor_faults"]}
    assert all(m["recovered"] for m in faults.values()), faults

    # Findings: one to one, nothing outside the fault windows, replays identical.
    for c in report["cycles"]:
        assert c["matched"]["one_to_one"], c
        # under_replicated was detected, and its open is stamped inside the fault window.
        assert "under_replicated" in c["detection_s"], c
        opens = [
            f for f in c["findings"] if (f["kind"], f["state"]) == ("under_replicated", "open")
        ]
        assert opens and all(c["fault"][0] * 1000 <= f["at"] for f in opens), c
    assert report["spurious_findings"] == []
    topic = report["findings_topic"]
    assert topic["unique_ids"] > 0
    assert topic["duplicates_with_different_content"] == 0
    assert topic["condition_sequence_errors"] == [] and topic["still_open"] == []
    assert report["quiet_window_alerts"] == []
    assert all(q >= 12 for q in report["quiet_windows_s"])

    # The monitor's own health said what happened.
    kill = faults["stream_kill"]["details"]
    assert kill["mid_batch"], kill  # SIGKILL between a batch's offsets and its commit
    # The restarted job reports itself down until its query runs, and Prometheus saw it.
    assert kill["monitor_up_0_samples"] > 0, kill
    assert kill["prom_min_monitor_up"] == 0.0, kill
    assert any(a.startswith("monitor_down") for a in kill["health_alerts"]), kill
    collector = faults["collector_kill"]["details"]
    assert collector["collector_unreachable_samples"] > 0, collector
    prom = faults["prometheus_restart"]["details"]
    assert prom["samples_of_the_minute_before"] > 10, prom  # its TSDB survived the restart
    broker = faults["events_broker_restart"]["details"]
    assert broker["stream_survived"], broker

    # RSS sampled for the job's process group (driver, JVM, workers) and the collector.
    for name in ("stream", "collector"):
        incs = report["rss"][name]["incarnations"]
        assert len(incs) >= 2, (name, incs)  # each was killed and restarted once
        # Every sample is of a live process (a killed group's zombies are not counted); one
        # taken just after a restart reads the bare interpreter (9.8 MB in one CI run), so
        # the floor is on what each incarnation reached once running.
        assert all(i["min_mb"] > 0 and i["max_mb"] > 30 for i in incs), incs
    assert max(i["max_mb"] for i in report["rss"]["stream"]["incarnations"]) > 200
    # The collector's first run spans the stack's start, the quiet window and the lab
    # fault until its own kill: its RSS is judged from the quiet window's start (a
    # fixed point of the run, not a wall-clock warm-up that a fast machine may not reach),
    # on every machine. (The JVM's warm-up outlasts a short run; the 30-minute soak judges
    # the job's RSS.)
    first = report["rss"]["collector"]["incarnations"][0]
    assert first["samples"] >= 5, first
    assert first["judged_from"] == report["cycles"][0]["quiet"][0], first
    assert first["judged_samples"] >= 2 and first["growth"] is not None, first
    assert first["flat"], first


def test_a_restarted_exporter_reports_down_until_its_query_runs(tmp_path: Path) -> None:
    """Seeded from a store whose telemetry is fresh, the job's /metrics must still say
    ``monitor_up 0`` until the query is running (a restart takes minutes on a busy host)."""
    from monitor.dev.processes.prom import free_port
    from monitor.dev.soak import scrape
    from monitor.exporter.driver import JobExporter, SnapshotHook
    from monitor.exporter.snapshot import Snapshot

    exporter = JobExporter(str(tmp_path / "store"), port=free_port())
    now_ms = int(time.time() * 1000)
    with exporter.snapshot.lock:
        exporter.snapshot.health.newest_observed_at["lab"] = now_ms  # as seeded: fresh
    exporter.start()
    try:
        page = scrape(f"http://127.0.0.1:{exporter.server.port}/metrics")
        assert page is not None
        assert page["kafka_replication_monitor_up"] == 0.0

        class Query:
            isActive = True
            lastProgress = None

        exporter.watch(Query(), every_s=0.1)
        deadline = time.monotonic() + 10
        while (page or {}).get("kafka_replication_monitor_up") != 1.0:
            assert time.monotonic() < deadline, page
            time.sleep(0.1)
            page = scrape(f"http://127.0.0.1:{exporter.server.port}/metrics")
    finally:
        exporter.stop()
    # A hook of its own (a test or an in-process engine) still starts "running".
    assert SnapshotHook(Snapshot()).snapshot.health.running
