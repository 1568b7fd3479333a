"""SIGKILL the job mid-stream, restart it from its checkpoint: nothing lost, nothing twice.

The job runs as a subprocess (``python -m streaming``) in its own process group, killed with
SIGKILL (by that group's id) after a few committed micro-batches, then restarted with
``--once`` on the same checkpoint. Its findings topic must hold the findings of an
uninterrupted run over the same events, each once — except the batch in flight at the kill,
which Kafka's at-least-once output may hold twice: only as a byte-identical re-send of the
killed run's last records, at the head of the restarted run's
(``kafka_io.findings_across_restart``) — and the state store must hold the same final
state for every partition.

The killed run has one core (``local[1]``: one Python worker, which keeps every bucket), so
its batches of whole rounds are stored as their input (``streaming.operator.Replay``, read
from its operator profile); the restarted run, with two, reads the snapshots and applies
those inputs again.
"""

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

from bench.operator_bench import profile_phases
from monitor.dev.synth import generate
from monitor.query.store import StoreReader
from streaming.job import start
from tests.streaming.e2e import kafka_config
from tests.streaming.kafka_io import (
    findings_across_restart,
    findings_by_id,
    produce_events,
    read_all,
)

pytestmark = [pytest.mark.spark, pytest.mark.lab]

REPO = Path(__file__).resolve().parents[2]


def _commits(checkpoint: Path) -> int:
    folder = checkpoint / "commits"
    return len([p for p in folder.iterdir() if p.name.isdigit()]) if folder.is_dir() else 0


def _job_cmd(bootstrap: str, topics: dict[str, str], tmp: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streaming",
        "--bootstrap",
        bootstrap,
        "--events-topic",
        topics["events"],
        "--findings-topic",
        topics["findings"],
        "--deadletter-topic",
        topics["deadletter"],
        "--checkpoint",
        str(tmp / "checkpoint"),
        "--store",
        str(tmp / "store"),
        "--trigger-seconds",
        "0.5",
        "--tick-ms",
        "3600000",
        "--buckets",
        "4",
        "--max-offsets-per-trigger",
        "4000",
        *extra,
    ]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group we created: python + its JVM
    proc.wait(30)


def _state(store: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    return {
        (r["cluster"], r["topic"], r["partition"]): {
            k: v for k, v in r.items() if k not in ("batch_id",)
        }
        for r in StoreReader(store).current()
    }


def test_sigkill_and_restart_loses_nothing(
    spark: Any, kafka_lab: Any, topics: dict[str, str], tmp_path: Path
) -> None:
    from monitor.dev.lab.admin import create_topic

    bootstrap = kafka_lab.bootstrap_servers
    events = [
        json.dumps(e, separators=(",", ":")).encode()
        for e in generate(400, 30, fault_rate=0.03, seed=7)
    ]
    produced = produce_events(bootstrap, topics["events"], events)

    # The uninterrupted run (in this process), on its own findings topic.
    ref_topics = {**topics, "findings": topics["findings"] + "-ref"}
    create_topic(bootstrap, ref_topics["findings"], partitions=1)
    ref_cfg = kafka_config(tmp_path / "ref", bootstrap, ref_topics).model_copy(
        update={"max_offsets_per_trigger": 4000}
    )
    ref = start(spark, ref_cfg)
    try:
        ref.drain(timeout_s=600)
    finally:
        ref.stop()
    reference = findings_by_id(read_all(bootstrap, ref_topics["findings"]))
    assert len(reference) > 50 and ref.counters.accepted == produced

    # The killed run.
    run_dir = tmp_path / "killed"
    env = {**os.environ, "MONITOR_SPARK_LOG_LEVEL": "ERROR"}
    profiles = tmp_path / "first.profile", tmp_path / "second.profile"
    log = (tmp_path / "first.log").open("wb")
    proc = subprocess.Popen(
        _job_cmd(bootstrap, topics, run_dir, "--master", "local[1]"),
        cwd=REPO,
        env={**env, "MONITOR_STREAMING_PROFILE": str(profiles[0])},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while _commits(run_dir / "checkpoint") < 4:
            assert proc.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the job committed no batches in time"
            time.sleep(0.2)
    finally:
        _kill_group(proc)
    committed = _commits(run_dir / "checkpoint")
    partial = read_all(bootstrap, topics["findings"])
    assert 0 < len(findings_by_id(partial)) < len(reference), "killed mid-stream"
    *_, saves = profile_phases(profiles[0].read_text(), skip_batches=0)
    assert saves["replay"] > 0, saves

    # Restart on the same checkpoint, drain, exit.
    second = subprocess.run(
        _job_cmd(bootstrap, topics, run_dir, "--once"),
        cwd=REPO,
        env={**env, "MONITOR_STREAMING_PROFILE": str(profiles[1])},
        capture_output=True,
        timeout=900,
        start_new_session=True,
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert _commits(run_dir / "checkpoint") > committed
    _, _, loads, _ = profile_phases(profiles[1].read_text(), skip_batches=0)
    assert loads["full"] > 0, loads  # read from the checkpoint: snapshots and inputs

    final, resent = findings_across_restart(partial, read_all(bootstrap, topics["findings"]))
    print(f"the restart re-sent the killed run's last {resent} findings")
    assert set(final) == set(reference)  # nothing lost, nothing opened twice
    assert final == reference  # same content under the same ids
    assert _state(run_dir / "store") == _state(tmp_path / "ref" / "store")  # state intact
