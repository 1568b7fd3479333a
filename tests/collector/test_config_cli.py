"""``monitor collect``'s settings: what names no setting is refused, by name (issue 19)."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main


def _collect(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["collect", "--once", "--out", "/dev/null", *argv])
    return code, capsys.readouterr().err


def test_a_misspelt_environment_setting_is_refused_by_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pydantic-settings would ignore it, leaving the default in force unsaid."""
    monkeypatch.setenv("MONITOR_COLLECTOR_INTERVL_S", "1")
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__BOOTSTRAP_SERVER", "x:1")
    code, err = _collect(capsys, "--bootstrap", "127.0.0.1:9")
    assert code == 78, err
    assert err.startswith("monitor collect: invalid configuration: unknown collector settings")
    assert "MONITOR_COLLECTOR_INTERVL_S" in err and "KAFKA__BOOTSTRAP_SERVER" in err


def test_settings_that_exist_are_taken_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from monitor.collector.config import unknown_env_keys

    env = {
        "MONITOR_COLLECTOR_INTERVAL_S": "1",
        "MONITOR_COLLECTOR_KAFKA__SASL_PASSWORD_FILE": "/run/secrets/p",
        "MONITOR_COLLECTOR_EVENTS_KAFKA__BOOTSTRAP_SERVERS": "m:9092",
        "MONITOR_COLLECTOR_JMX_URLS__3": "http://k3:7071/metrics",
        "MONITOR_COLLECTOR_CONFIG": "/etc/monitor/collector.yaml",  # the settings file
        "MONITOR_STREAMING_TRIGGER_S": "5",  # the job's, not the collector's business
    }
    assert unknown_env_keys(env) == []


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("c.ini", "cluster = prod\n", "a .ini file is not read; give TOML (.toml), YAML"),
        ("c.yaml", "cluster: [prod\n", "not valid YAML"),
        ("c.json", "[1]", "the top level must be a mapping of settings"),
        ("c.toml", "cluster = \n", "Invalid value"),
    ],
)
def test_a_config_file_it_cannot_read_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str, says: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, err = _collect(capsys, "--config", str(path))
    assert code == 78, err
    assert f"--config {path}: " in err and says in err, err
