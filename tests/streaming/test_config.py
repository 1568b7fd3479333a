"""The job's settings derive from the stages' own: the model's thresholds are ModelConfig
itself, the Kafka connection is the collector's KafkaConnection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from monitor.connection import KafkaConnection
from monitor.model import ModelConfig
from streaming.config import StreamingConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
K = {"bootstrap_servers": "m:9092"}


def test_the_model_settings_are_model_config_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_STREAMING_MODEL__STALE_AFTER_MS", "15000")
    cfg = load_config(kafka={"bootstrap_servers": "m:9092"})
    assert isinstance(cfg.model, ModelConfig)
    assert cfg.model == ModelConfig(stale_after_ms=15_000)
    assert isinstance(cfg.kafka, KafkaConnection)


def test_a_threshold_the_model_refuses_is_refused_by_the_settings() -> None:
    """flapping_elections=1 used to pass the job's own check and fail ModelConfig after
    Spark and the metrics port were up."""
    with pytest.raises(ValidationError, match="flapping_elections must be an integer >= 2"):
        StreamingConfig(kafka=K, model={"flapping_elections": 1})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="Unexpected keyword argument"):
        StreamingConfig(kafka=K, model={"stale_after": 5})  # type: ignore[arg-type]


def test_monitor_stream_refuses_it_before_spark_starts() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "stream", "--bootstrap", "m:9092", "--metrics-port", "0"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "MONITOR_STREAMING_MODEL__FLAPPING_ELECTIONS": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 78, proc.stderr  # a configuration error (monitor.cli)
    assert "flapping_elections must be an integer >= 2" in proc.stderr
    assert "Traceback" not in proc.stderr and "Spark" not in proc.stderr


def test_the_jobs_settings_import_without_the_kafka_client() -> None:
    """streaming.config used to pull in the collector package and with it kafka-python.
    PyYAML is read only for a YAML settings file (the executors import this module too)."""
    code = (
        "import sys; sys.modules['kafka'] = None; sys.modules['yaml'] = None\n"  # imports fail
        "import streaming.config, monitor.connection\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.stdout.strip() == "ok", proc.stderr
