"""The systemd units of a VM install (deploy/systemd/, issue 19).

``systemd-analyze verify`` reads each unit as systemd would, in a temporary root that holds
the host's system units (``sysinit.target`` and the rest a service is ordered against), the
units under test in ``/etc/systemd/system`` and a stub ``monitor`` at the ``ExecStart``
path (verify refuses a command that is not executable). systemd reports most mistakes -- an
unknown key, a value it cannot parse -- as a warning it "ignores", with exit code 0: any
output at all fails the test. ``systemd-analyze security --offline`` scores the hardening.

The env file's variables and the example settings files are checked against the settings
models: a name that names no setting would stop the command at start.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from monitor.collector import config as collector_config
from streaming import config as streaming_config

ROOT = Path(__file__).resolve().parents[2]
UNITS_DIR = ROOT / "deploy" / "systemd"
UNITS = ["kafka-replication-collector.service", "kafka-replication-stream.service"]
VENV = "/opt/kafka-replication-monitor"
SYSTEM_UNITS = next(
    (p for p in (Path("/usr/lib/systemd/system"), Path("/lib/systemd/system")) if p.is_dir()),
    None,
)
#: The highest overall exposure ``systemd-analyze security`` may give a unit, times ten
#: (2.0 of 10: "OK"; the units score 1.6, an unhardened service 9.6).
EXPOSURE_THRESHOLD = 20

needs_systemd = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None or SYSTEM_UNITS is None,
    reason="systemd-analyze and the system's units are needed",
)


def _parse(text: str) -> dict[str, list[str]]:
    """A unit's ``Section.Key`` -> values (a key may repeat: ``Environment=``)."""
    out: dict[str, list[str]] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        out.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return out


def _unit(name: str) -> dict[str, list[str]]:
    return _parse((UNITS_DIR / name).read_text())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root for ``--root``: the system's units, ours, and a stub ``monitor``."""
    assert SYSTEM_UNITS is not None
    shutil.copytree(SYSTEM_UNITS, tmp_path / "usr/lib/systemd/system", symlinks=True)
    stub = tmp_path / VENV.lstrip("/") / "bin" / "monitor"
    stub.parent.mkdir(parents=True)
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    for name in UNITS:
        shutil.copy(UNITS_DIR / name, tmp_path / "etc/systemd/system" / name)
    return tmp_path


def _verify(root: Path, unit: str) -> tuple[int, str]:
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "--generators=no", f"--root={root}", unit],
        capture_output=True, text=True, timeout=60, cwd=root,
    )  # fmt: skip
    return proc.returncode, (proc.stdout + proc.stderr).strip()


@needs_systemd
@pytest.mark.parametrize("unit", UNITS)
def test_verify_passes_without_a_word(root: Path, unit: str) -> None:
    rc, out = _verify(root, unit)
    assert rc == 0 and out == "", f"systemd-analyze verify {unit} (rc {rc}):\n{out}"


#: Mistakes systemd only warns about (rc 0) or refuses (rc 1): each must fail the check above.
MISTAKES = {
    "unknown key": ("ProtectSystem=strict", "ProtectSytem=strict"),
    "bad value": ("Restart=on-failure", "Restart=sometimes"),
    "no such binary": (f"{VENV}/bin/monitor ", f"{VENV}/bin/monitr "),
    "unknown section": ("[Service]", "[Servce]"),
}


@needs_systemd
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_verify_catches_a_broken_unit(root: Path, mistake: str) -> None:
    old, new = MISTAKES[mistake]
    for unit in UNITS:
        path = root / "etc/systemd/system" / unit
        text = path.read_text()
        assert old in text, f"{unit} has no {old!r} to break"
        path.write_text(text.replace(old, new, 1))
        rc, out = _verify(root, unit)
        assert rc != 0 or out != "", f"{mistake} in {unit} went unnoticed"


@needs_systemd
@pytest.mark.parametrize("unit", UNITS)
def test_hardening_scores_ok(root: Path, unit: str) -> None:
    proc = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", f"--root={root}",
         f"--threshold={EXPOSURE_THRESHOLD}", "--no-pager", unit],
        capture_output=True, text=True, timeout=60, cwd=root,
    )  # fmt: skip
    level = re.search(r"Overall exposure level for \S+: (\S+)", proc.stdout)
    assert proc.returncode == 0, (
        f"{unit}: exposure {level.group(1) if level else '?'} is over "
        f"{EXPOSURE_THRESHOLD / 10}:\n{proc.stdout[-3000:]}{proc.stderr}"
    )


@pytest.mark.parametrize("unit", UNITS)
def test_unit_runs_the_venv_monitor_as_its_own_user_and_restarts(unit: str) -> None:
    u = _unit(unit)
    command = "collect" if "collector" in unit else "stream"
    config = "collector.toml" if command == "collect" else "stream.toml"
    assert u["Service.ExecStart"] == [
        f"{VENV}/bin/monitor {command} --config /etc/kafka-replication-monitor/{config}"
    ]
    assert u.get("Service.DynamicUser") == ["yes"] or u.get("Service.User"), "runs as root"
    assert u["Service.Restart"] == ["on-failure"]
    assert "78" in u["Service.RestartPreventExitStatus"][0].split()  # refused settings
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "CapabilityBoundingSet": "",
    }.items():
        assert u.get(f"Service.{key}") == [value], f"{unit}: {key}={value} expected"
    assert u["Service.EnvironmentFile"] == [
        "-/etc/kafka-replication-monitor/kafka-replication-monitor.env"
    ]
    assert u["Install.WantedBy"] == ["multi-user.target"]


def _environment(unit: dict[str, list[str]]) -> dict[str, str]:
    return dict(v.partition("=")[::2] for v in unit.get("Service.Environment", []))


def test_stream_keeps_checkpoint_and_store_in_its_state_directory() -> None:
    u = _unit("kafka-replication-stream.service")
    state = u["Service.StateDirectory"]
    assert state == ["kafka-replication-stream"]
    env = _environment(u)
    for key in ("CHECKPOINT", "STORE"):
        value = env[f"MONITOR_STREAMING_{key}"]
        assert value.startswith(f"%S/{state[0]}/"), f"{key} {value} is not in StateDirectory"
    assert env["MONITOR_STREAMING_METRICS_PORT"] == "9478"
    assert u["Service.WorkingDirectory"] == [f"%S/{state[0]}"]
    # The jars Maven resolves at first start go to the unit's cache folder (writable).
    assert env["MONITOR_CACHE"] == f"%C/{u['Service.CacheDirectory'][0]}"
    assert _environment(_unit("kafka-replication-collector.service")) == {
        "MONITOR_COLLECTOR_METRICS_PORT": "9479"
    }


def _env_lines(*, commented: bool) -> list[tuple[str, str]]:
    """The example env file's variables in order: the set ones, or the commented-out examples."""
    out = []
    for raw in (UNITS_DIR / "kafka-replication-monitor.env").read_text().splitlines():
        if raw.startswith("#") != commented:
            continue
        line = raw.lstrip("#").strip()
        if re.match(r"^[A-Z][A-Z0-9_]*=", line):
            key, _, value = line.partition("=")
            out.append((key, value))
    return out


def _env_file() -> dict[str, str]:
    """The example env file's variables, the commented-out examples included."""
    return dict(_env_lines(commented=False) + _env_lines(commented=True))


def test_every_monitor_variable_names_a_setting() -> None:
    """The env file's and the units' ``MONITOR_*`` names are settings (an unknown one is
    refused at start), the commented-out examples' too; the metrics at the documented ports."""
    env = _env_file()
    for name in UNITS:
        env.update(_environment(_unit(name)))
    assert collector_config.unknown_env_keys(env) == []
    assert streaming_config.unknown_env_keys(env) == []
    assert (env["MONITOR_COLLECTOR_METRICS_PORT"], env["MONITOR_STREAMING_METRICS_PORT"]) == (
        "9479",
        "9478",
    )


WEB_CONFIG = "/etc/kafka-replication-monitor/web-config.yml"


def test_metrics_listen_on_loopback_unless_guarded() -> None:
    """Both /metrics bind 127.0.0.1 as the file is shipped; its example of every interface
    (0.0.0.0) comes with the web configuration (TLS, basic auth) for the same endpoint."""
    given = dict(_env_lines(commented=False))
    for prefix in ("MONITOR_COLLECTOR_", "MONITOR_STREAMING_"):
        assert given[f"{prefix}METRICS_HOST"] == "127.0.0.1"
        assert f"{prefix}WEB_CONFIG_FILE" not in given  # no file to find at first start
    examples = _env_lines(commented=True)
    everywhere = [k for k, v in examples if k.endswith("_METRICS_HOST") and v == "0.0.0.0"]
    assert sorted(everywhere) == [
        "MONITOR_COLLECTOR_METRICS_HOST",
        "MONITOR_STREAMING_METRICS_HOST",
    ]
    for key in everywhere:
        prefix = key.removesuffix("METRICS_HOST")
        assert (f"{prefix}WEB_CONFIG_FILE", WEB_CONFIG) in examples, f"{key}=0.0.0.0 unguarded"
    # Neither unit binds every interface behind the file's back.
    for name in UNITS:
        assert not any(k.endswith("_METRICS_HOST") for k in _environment(_unit(name)))


def test_the_example_settings_files_are_valid(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in [v for v in os.environ if v.startswith("MONITOR_")]:
        monkeypatch.delenv(var)
    collector = tomllib.loads((UNITS_DIR / "collector.toml").read_text())
    # The password is a credential of the collector's unit (read at validation: a stand-in).
    credential = collector["kafka"]["sasl_password_file"]
    assert credential.startswith("/run/credentials/kafka-replication-collector.service/")
    (tmp_path / "password").write_text("secret\n")
    collector["kafka"]["sasl_password_file"] = str(tmp_path / "password")
    cfg = collector_config.CollectorConfig(**collector)
    assert cfg.jmx_urls and cfg.events_kafka is not None
    stream = tomllib.loads((UNITS_DIR / "stream.toml").read_text())
    assert streaming_config.StreamingConfig(**stream).kafka.bootstrap_servers == "m1:9092"
