"""The Spark driver's class-data sharing archive (``streaming.cds``): used only when built for
this pyspark, JDK and classpath, and then really mapped by the driver's JVM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streaming import cds

REPO = Path(__file__).resolve().parents[2]


def _fake_archive(tmp_path: Path, key: str) -> Path:
    archive = tmp_path / "a.jsa"
    archive.write_bytes(b"not read here")
    (tmp_path / "a.jsa.key").write_text(key + "\n")
    return archive


def test_no_archive_named_no_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cds.ENV, raising=False)
    assert cds.driver_java_options() is None


def test_an_archive_built_here_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    archive = _fake_archive(tmp_path, cds.fingerprint())
    monkeypatch.setenv(cds.ENV, str(archive))
    assert cds.driver_java_options() == f"-XX:SharedArchiveFile={archive}"


def test_an_archive_of_another_setup_is_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Another pyspark or JDK (the key differs), no key, or another Spark conf folder (the
    classpath's first entry): the driver starts without, not with the JVM's warning."""
    archive = _fake_archive(tmp_path, "0" * 64)
    monkeypatch.setenv(cds.ENV, str(archive))
    assert cds.driver_java_options() is None
    (tmp_path / "a.jsa.key").write_text(cds.fingerprint())
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert cds.driver_java_options() is None
    monkeypatch.delenv("SPARK_CONF_DIR")
    (tmp_path / "a.jsa.key").unlink()
    assert cds.driver_java_options() is None
    monkeypatch.setenv(cds.ENV, str(tmp_path / "missing.jsa"))
    assert cds.driver_java_options() is None


_MAPPED = """
import sys
from streaming.session import build_session
spark = build_session(master="local[1]", shuffle_partitions=1)
pid = spark.sparkContext._gateway.proc.pid
maps = open(f"/proc/{pid}/maps").read()
print("mapped" if sys.argv[1] in maps else "not")
spark.stop()
"""


@pytest.mark.spark
def test_the_driver_maps_the_archive_make_setup_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """A driver started by ``build_session`` with the archive ``make setup`` built maps it
    into its JVM (what ``make test`` and ``make demo`` run with); without, it does not."""
    archive = Path(os.environ.get(cds.ENV) or REPO / ".cache" / "cds" / "spark-driver.jsa")
    monkeypatch.setenv(cds.ENV, str(archive))
    if cds.driver_java_options() is None:  # not built for this setup (a bare pytest run)
        cds.build(archive)
    env = {**os.environ, "MONITOR_SPARK_LOG_LEVEL": "ERROR"}
    seen = {}
    for name, value in (("with", str(archive)), ("without", None)):
        env.pop(cds.ENV, None)
        if value:
            env[cds.ENV] = value
        out = subprocess.run(
            [sys.executable, "-c", _MAPPED, str(archive.resolve())],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        seen[name] = out.strip().splitlines()[-1]
    assert seen == {"with": "mapped", "without": "not"}, seen
