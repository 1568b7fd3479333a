"""docs/configuration.md against the settings models, and the one convention it describes
(issue 19): flags > environment > the settings file (TOML or YAML) > defaults, for the
collector and the job alike; unknown keys and malformed files refused by name (exit 78)."""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from monitor import settings
from monitor.cli import main
from monitor.collector.config import CollectorConfig
from monitor.connection import KafkaConnection
from streaming.config import StreamingConfig

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
MODELS: dict[str, type[Any]] = {"collector": CollectorConfig, "streaming": StreamingConfig}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MONITOR_COLLECTOR_* / MONITOR_STREAMING_* of the caller's shell in these tests."""
    import os

    for key in list(os.environ):
        if key.upper().startswith(("MONITOR_COLLECTOR_", "MONITOR_STREAMING_")):
            monkeypatch.delenv(key)


# -- the reference --------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    key: str
    default: str
    env: str
    flags: list[str]


def _tables() -> Iterator[tuple[list[str], Row]]:
    """Each settings row of the doc with the model paths its table documents
    (``<!-- settings: collector.kafka streaming.kafka -->`` above the table)."""
    paths: list[str] | None = None
    for line in DOC.read_text().splitlines():
        marker = re.match(r"<!-- settings: (.+) -->", line)
        if marker:
            paths = marker.group(1).split()
            continue
        if paths is None:
            continue
        if not line.startswith("|"):
            if line.strip():
                paths = None  # the table ended
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in ("Key", "---"):
            continue
        assert len(cells) == 6, f"a row of 6 cells: {line}"
        key = re.fullmatch(r"`([a-z0-9_]+)`", cells[0])
        assert key, f"the key in backticks: {line}"
        flags = re.findall(r"`(--[a-z-]+)", cells[4])
        yield paths, Row(key.group(1), cells[2], cells[3].strip("`"), flags)


def _model_at(path: str) -> type[Any]:
    """``streaming.model`` -> ModelConfig."""
    head, *rest = path.split(".")
    model = MODELS[head]
    for name in rest:
        sub = settings.nested_model(settings.fields_of(model)[name])
        assert sub is not None, path
        model = sub
    return model


def _model_paths() -> set[str]:
    """Every key of both models, nested ones too: ``collector.kafka.sasl_username``."""

    def walk(model: type[Any], prefix: str) -> Iterator[str]:
        for name, annotation in settings.fields_of(model).items():
            yield prefix + name
            sub = settings.nested_model(annotation)
            if sub is not None:
                yield from walk(sub, f"{prefix}{name}.")

    return {p for head, model in MODELS.items() for p in walk(model, f"{head}.")}


def _documented() -> list[tuple[str, Row]]:
    return [(f"{path}.{row.key}", row) for paths, row in _tables() for path in paths]


def test_the_reference_lists_every_setting_and_no_other() -> None:
    documented = [path for path, _ in _documented()]
    assert len(documented) == len(set(documented)), "a key listed twice"
    models = _model_paths()
    assert sorted(models - set(documented)) == [], "settings missing from the doc"
    assert sorted(set(documented) - models) == [], "the doc lists keys no model has"


#: Defaults the doc gives as a place in the state folder (docs/configuration.md).
STATE_FOLDER_DEFAULTS = {
    "streaming.checkpoint": "`checkpoint/` in the [state folder](#the-state-folder)",
    "streaming.store": "`store/` in the [state folder](#the-state-folder)",
}


def _required(model: type[Any], name: str) -> bool:
    return issubclass(model, BaseModel) and model.model_fields[name].is_required()


def _default(model: type[Any], name: str) -> Any:
    if issubclass(model, BaseModel):
        return model.model_fields[name].get_default(call_default_factory=True)
    field = {f.name: f for f in dataclasses.fields(model)}[name]
    return field.default


def _render(value: Any) -> str:
    """A default as the doc writes it."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f"`{json.dumps(value)}`"
    if isinstance(value, int | float):
        return f"`{value}`"
    return f"`{json.dumps(value)}`"


def test_the_reference_gives_each_settings_default_and_variable() -> None:
    checked = 0
    for path, row in _documented():
        *parents, name = path.split(".")
        model = _model_at(".".join(parents))
        annotation = settings.fields_of(model)[name]
        # The variable: the prefix, then each level's name in capitals joined by "__".
        prefix = settings.env_prefix(MODELS[parents[0]])
        variable = prefix + "__".join(p.upper() for p in [*parents[1:], name])
        assert fnmatch.fnmatchcase(variable, row.env), (path, row.env, variable)
        if path in STATE_FOLDER_DEFAULTS:  # under the state folder, wherever that is
            assert row.default == STATE_FOLDER_DEFAULTS[path], path
            assert _default(model, name) == str(settings.state_dir() / name), path
        elif _required(model, name):
            assert "required" in row.default, path
        elif settings.nested_model(annotation) is None:  # nested ones point to their table
            assert row.default == _render(_default(model, name)), path
        checked += 1
    assert checked > 60


def _parser(command: str) -> argparse.ArgumentParser:
    from monitor.cli import build_parser

    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]  # type: ignore[no-any-return]


def test_the_flags_the_reference_names_exist() -> None:
    options = {
        name: {s for a in _parser(cmd)._actions for s in a.option_strings}
        for name, cmd in (("collector", "collect"), ("streaming", "stream"))
    }
    named = 0
    for path, row in _documented():
        for flag in row.flags:
            assert flag in options[path.split(".")[0]], (path, flag)
            named += 1
    assert named > 20
    text = DOC.read_text()
    for flag in ("--log-level", "--log-format", "--config"):
        assert f"`{flag}" in text
        assert all(flag in opts for opts in options.values())


def _examples() -> dict[str, dict[str, str]]:
    """The doc's example files: model -> format -> text."""
    found: dict[str, dict[str, str]] = {}
    lines = DOC.read_text().splitlines()
    for i, line in enumerate(lines):
        marker = re.match(r"<!-- example: (\w+) -->", line)
        if marker:
            fence = lines[i + 1].removeprefix("```")
            end = lines.index("```", i + 2)
            found.setdefault(marker.group(1), {})[fence] = "\n".join(lines[i + 2 : end])
    return found


def _keys_as_text(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _keys_as_text(v) for k, v in value.items()}
    return value


def test_the_reference_examples_are_one_setting_each_in_toml_and_yaml(tmp_path: Path) -> None:
    examples = _examples()
    assert set(examples) == set(MODELS)
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    for name, texts in examples.items():
        assert set(texts) == {"toml", "yaml"}, name
        parsed = {"toml": tomllib.loads(texts["toml"]), "yaml": yaml.safe_load(texts["yaml"])}
        assert _keys_as_text(parsed["toml"]) == _keys_as_text(parsed["yaml"]), name
        assert settings.unknown_keys(MODELS[name], parsed["toml"]) == [], name
        loaded = []
        for fmt, text in texts.items():
            path = tmp_path / f"{name}.{fmt}"
            path.write_text(text.replace("/run/secrets/kafka-password", str(secret)))
            loaded.append(settings.load(MODELS[name], name, path))
        assert loaded[0] == loaded[1], name


# -- the convention -------------------------------------------------------------------------

COLLECTOR_TOML = """\
cluster = "from-file"
interval_s = 7
[kafka]
bootstrap_servers = "file:9092"
security_protocol = "PLAINTEXT"
[jmx_urls]
1 = "http://k1:7071/metrics"
"""
COLLECTOR_YAML = """\
cluster: from-file
interval_s: 7
kafka:
  bootstrap_servers: file:9092
  security_protocol: PLAINTEXT
jmx_urls:
  1: http://k1:7071/metrics
"""
STREAMING_TOML = """\
buckets = 8
checkpoint = "/tmp/ck"
[model]
stale_after_ms = 30000
[kafka]
bootstrap_servers = "file:9092"
"""
STREAMING_YAML = """\
buckets: 8
checkpoint: /tmp/ck
model:
  stale_after_ms: 30000
kafka:
  bootstrap_servers: file:9092
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _collector(*argv: str) -> CollectorConfig:
    from monitor.collector.cli import build_config

    return build_config(_parser("collect").parse_args(list(argv)))


def _streaming(*argv: str) -> StreamingConfig:
    from streaming.cli import build_parser, config_from_args

    return config_from_args(build_parser().parse_args(list(argv)))


def test_toml_and_yaml_give_the_same_settings(tmp_path: Path) -> None:
    toml_c = _collector("--config", str(_write(tmp_path, "c.toml", COLLECTOR_TOML)))
    yaml_c = _collector("--config", str(_write(tmp_path, "c.yml", COLLECTOR_YAML)))
    assert toml_c == yaml_c
    assert (toml_c.cluster, toml_c.interval_s, toml_c.jmx_urls) == (
        "from-file", 7, {1: "http://k1:7071/metrics"},
    )  # fmt: skip
    toml_s = _streaming("--config", str(_write(tmp_path, "s.toml", STREAMING_TOML)))
    yaml_s = _streaming("--config", str(_write(tmp_path, "s.yaml", STREAMING_YAML)))
    assert toml_s == yaml_s
    assert (toml_s.buckets, toml_s.model.stale_after_ms) == (8, 30_000)


def test_the_environment_overrides_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c_file = str(_write(tmp_path, "c.toml", COLLECTOR_TOML))
    monkeypatch.setenv("MONITOR_COLLECTOR_INTERVAL_S", "2")
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__BOOTSTRAP_SERVERS", "env:9092")
    c = _collector("--config", c_file)
    assert (c.interval_s, c.kafka.bootstrap_servers) == (2, "env:9092")
    assert c.cluster == "from-file"  # what the environment does not set stays the file's
    assert c.jmx_urls == {1: "http://k1:7071/metrics"}

    s_file = str(_write(tmp_path, "s.yaml", STREAMING_YAML))
    monkeypatch.setenv("MONITOR_STREAMING_BUCKETS", "4")
    monkeypatch.setenv("MONITOR_STREAMING_MODEL__HW_LAG_MS", "12345")
    s = _streaming("--config", s_file)
    assert (s.buckets, s.model.hw_lag_ms) == (4, 12_345)
    assert (s.model.stale_after_ms, s.checkpoint) == (30_000, "/tmp/ck")  # merged key by key


def test_a_flag_overrides_the_environment_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c_file = str(_write(tmp_path, "c.toml", COLLECTOR_TOML))
    monkeypatch.setenv("MONITOR_COLLECTOR_INTERVAL_S", "2")
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__SECURITY_PROTOCOL", "PLAINTEXT")
    c = _collector("--config", c_file, "--interval", "0.5", "--bootstrap", "flag:9092")
    assert (c.interval_s, c.kafka.bootstrap_servers) == (0.5, "flag:9092")
    c = _collector("--config", c_file, "--jmx", "1=http://flag:7071/metrics")
    assert c.jmx_urls == {1: "http://flag:7071/metrics"}  # the same broker: one entry

    s_file = str(_write(tmp_path, "s.toml", STREAMING_TOML))
    monkeypatch.setenv("MONITOR_STREAMING_BUCKETS", "4")
    monkeypatch.setenv("MONITOR_STREAMING_MODEL__STALE_AFTER_MS", "45000")
    s = _streaming("--config", s_file, "--buckets", "2", "--stale-after-ms", "9000")
    assert (s.buckets, s.model.stale_after_ms) == (2, 9_000)
    s = _streaming("--config", s_file, "--master", "none")
    assert s.master is None  # a flag may unset what the default sets


def test_the_file_may_be_named_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MONITOR_COLLECTOR_CONFIG", str(_write(tmp_path, "c.yaml", COLLECTOR_YAML)))
    monkeypatch.setenv("MONITOR_STREAMING_CONFIG", str(_write(tmp_path, "s.yml", STREAMING_YAML)))
    assert _collector().cluster == "from-file"
    assert _streaming().buckets == 8
    other = _write(
        tmp_path, "other.toml", 'cluster = "flag-file"\nkafka.bootstrap_servers = "o:1"\n'
    )
    assert _collector("--config", str(other)).cluster == "flag-file"  # --config first


def _refused(capsys: pytest.CaptureFixture[str], command: str, *argv: str) -> str:
    """Runs ``monitor <command> ...`` expecting a configuration error: its one line."""
    code = main([command, *argv])
    err = capsys.readouterr().err
    assert code == 78, err  # EX_CONFIG
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"monitor {command}: invalid configuration: "), err
    return err


@pytest.mark.parametrize(
    ("command", "text", "key"),
    [
        ("collect", "cluster = 'x'\n[kafka]\nbootstrap_server = 'h:1'\n", "kafka.bootstrap_server"),
        ("collect", "clster = 'x'\n", "clster"),
        ("stream", "model:\n  stale_after: 5\n", "model.stale_after"),
        ("stream", "bucket: 5\n", "bucket"),
    ],
)
def test_an_unknown_key_in_the_file_is_refused_by_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, text: str, key: str
) -> None:
    path = _write(tmp_path, "settings.toml" if command == "collect" else "settings.yaml", text)
    err = _refused(capsys, command, "--config", str(path))
    assert f"--config {path}: unknown" in err and key in err, err


@pytest.mark.parametrize(
    ("command", "variable"),
    [
        ("collect", "MONITOR_COLLECTOR_INTERVL_S"),
        ("collect", "MONITOR_COLLECTOR_KAFKA__SASL_USER"),
        ("stream", "MONITOR_STREAMING_BUCKTS"),
        ("stream", "MONITOR_STREAMING_MODEL__STALE_AFTER"),
    ],
)
def test_an_unknown_environment_variable_is_refused_by_name(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    variable: str,
) -> None:
    monkeypatch.setenv(variable, "1")
    err = _refused(capsys, command)
    assert "in the environment" in err and variable in err, err


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("bad.yaml", "cluster: [prod\n", "not valid YAML: "),
        ("bad.yml", "a: 1\n- b\n", "not valid YAML: "),
        ("bad.toml", "cluster = \n", "not valid TOML: "),
        ("bad.toml", "[kafka\n", "not valid TOML: "),
        ("list.yaml", "- cluster\n", "the top level must be a mapping of settings"),
        ("scalar.yaml", "prod\n", "the top level must be a mapping of settings"),
        ("bad.json", "[1]", "the top level must be a mapping of settings"),
        ("c.ini", "cluster=prod\n", "a .ini file is not read; give TOML (.toml), YAML"),
    ],
)
@pytest.mark.parametrize("command", ["collect", "stream"])
def test_a_malformed_file_is_named_in_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    command: str,
    name: str,
    text: str,
    says: str,
) -> None:
    path = _write(tmp_path, name, text)
    err = _refused(capsys, command, "--config", str(path))
    assert f"--config {path}: {says}" in err, err


def test_a_missing_file_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "nowhere.toml"
    err = _refused(capsys, "collect", "--config", str(path))
    assert f"--config {path}: cannot read it" in err, err


def test_a_value_a_setting_refuses_is_one_line_naming_the_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _write(tmp_path, "s.yaml", "buckets: 0\nkafka:\n  security_protocol: SSH\n")
    err = _refused(capsys, "stream", "--config", str(path))
    assert "buckets: " in err and "kafka.security_protocol: " in err, err


def test_the_streaming_profile_variable_is_not_a_mistake(monkeypatch: pytest.MonkeyPatch) -> None:
    """streaming.operator reads MONITOR_STREAMING_PROFILE (per-bucket handler times)."""
    monkeypatch.setenv("MONITOR_STREAMING_PROFILE", "/tmp/profile.txt")
    assert _streaming("--bootstrap", "m:9092").buckets == 16


def test_settings_built_directly_read_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is in force only while :func:`monitor.settings.load` builds the settings."""
    monkeypatch.setenv("MONITOR_COLLECTOR_CONFIG", str(_write(tmp_path, "c.toml", COLLECTOR_TOML)))
    assert _collector().cluster == "from-file"
    assert CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}).cluster == "default"
    with pytest.raises(ValidationError, match="bootstrap_servers"):  # no address is safe
        KafkaConnection()  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("argv", "key", "how"),
    [
        # 1: the watched cluster has no safe default address (a lab's was one).
        (["collect"], "kafka.bootstrap_servers", "--bootstrap HOST:PORT"),
        # 2: nor has the monitor's own cluster (the job read a lab port before).
        (["stream"], "kafka.bootstrap_servers", "the monitor's own cluster"),
        # 3: the job's connection from the environment, but not its address.
        (["stream", "--once"], "kafka.bootstrap_servers", "MONITOR_STREAMING_KAFKA__BOOTSTRAP"),
        # 4: publishing with nowhere of the monitor's own to publish: refused, not the
        #    watched cluster by default (a monitor riding on what it watches goes blind).
        (["collect", "--bootstrap", "k:9092"], "events_kafka", "events_on_watched_cluster"),
    ],
)
def test_a_setting_without_a_safe_default_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    key: str,
    how: str,
) -> None:
    if argv == ["stream", "--once"]:
        monkeypatch.setenv("MONITOR_STREAMING_KAFKA__SECURITY_PROTOCOL", "SSL")
    err = _refused(capsys, *argv)
    assert f"{key} is required" in err and how in err, err


def test_the_job_keeps_its_state_in_the_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not under the working folder (``.cache/streaming`` before): systemd's
    ``StateDirectory`` first, then ``$XDG_STATE_HOME``."""
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    cfg = _streaming("--bootstrap", "m:9092")
    assert cfg.checkpoint_location == str(
        tmp_path / "xdg" / "kafka-replication-monitor" / "checkpoint"
    )
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path / "unit"))
    assert _streaming("--bootstrap", "m:9092").store_location == str(tmp_path / "unit" / "store")
