"""``LabConfig.exporter_rules``: the brokers' exporter agent reads another rules file (no JVM)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.errors import LabError
from monitor.dev.lab.jvm import broker_command, write_configs

AGENT = Path("/jars/jmx_prometheus_javaagent-1.0.1.jar")


def _agent_argument(config: LabConfig, node: int) -> str:
    (arg,) = [a for a in broker_command(config, node, "cp.jar", AGENT) if a.startswith("-java")]
    return arg


def test_the_agent_reads_the_named_rules_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules" / "strimzi-style.yaml"
    cfg = LabConfig(dir=tmp_path / "lab", exporter_rules=rules)
    for node in cfg.node_ids:
        assert (
            _agent_argument(cfg, node)
            == f"-javaagent:{AGENT}=127.0.0.1:{cfg.jmx_port(node)}:{rules}"
        )


def test_without_it_the_agent_reads_the_projects_rules(tmp_path: Path) -> None:
    cfg = LabConfig(dir=tmp_path)
    assert (
        _agent_argument(cfg, 2)
        == f"-javaagent:{AGENT}=127.0.0.1:19293:{tmp_path}/jmx-exporter.yaml"
    )


def test_a_relative_rules_file_is_named_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JVM's working folder is not the caller's: the file is named from the root."""
    monkeypatch.chdir(tmp_path)
    cfg = LabConfig(dir=tmp_path / "lab", exporter_rules=Path("confluent-style.yaml"))
    assert cfg.exporter_rules == tmp_path / "confluent-style.yaml"
    assert _agent_argument(cfg, 1).endswith(f":{tmp_path}/confluent-style.yaml")
    # ... and survives the state file (lab.json) as it is.
    assert LabConfig.model_validate_json(cfg.model_dump_json()) == cfg


def test_a_missing_rules_file_is_named_before_any_broker_starts(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    with pytest.raises(LabError, match=f"exporter_rules: no such file {missing}"):
        write_configs(LabConfig(dir=tmp_path / "lab", exporter_rules=missing))
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: []\n")
    write_configs(LabConfig(dir=tmp_path / "lab", exporter_rules=rules))
    assert rules.read_text() == "rules: []\n"  # the named file is read, never written
    assert (tmp_path / "lab" / "jmx-exporter.yaml").is_file()
    assert os.access(tmp_path / "lab" / "broker-1" / "server.properties", os.R_OK)
