"""The job's SparkSession settings (``streaming.session``), issue 51: its security settings
come last, whatever ``spark_conf`` or spark-submit say, and Spark's own network is
authenticated wherever the driver can have the secret -- never failing where it cannot.

The rules are :func:`streaming.session.security_settings` (no Spark here); the driver test
starts a fresh one in a child process and reads Spark's own conf from the live session,
and the JVM's command line and environment from ``/proc``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.session import (
    ENCRYPT_CONF,
    NOT_AT_LAUNCH,
    SECRET,
    SECRET_FILE,
    security_settings,
)

REPO = Path(__file__).resolve().parents[2]
STANDALONE = "spark://127.0.0.1:7077"
KILL = "spark.ui.killEnabled"
AUTH = "spark.authenticate"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# -- the rules ------------------------------------------------------------------------------


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2, 3]", "yarn"])
def test_a_driver_that_makes_its_secret_authenticates(
    master: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Local, YARN and Kubernetes drivers make a secret per application themselves: the job
    turns the authentication on and gives no secret (one given would only be on a command
    line: Spark ignores it there)."""
    out = security_settings(master, {})
    assert out == {KILL: "false", AUTH: "true"}
    assert _warnings(caplog) == []
    assert security_settings("k8s://https://api:6443", {})[AUTH] == "true"


def test_the_ui_kill_stays_off_whatever_spark_conf_says(caplog: pytest.LogCaptureFixture) -> None:
    out = security_settings("local[2]", {KILL: "true", "spark.ui.enabled": "true"})
    assert out[KILL] == "false"
    assert "spark.ui.enabled" not in out  # the UI itself may be turned on
    [warning] = _warnings(caplog)
    assert "spark_conf sets spark.ui.killEnabled=true: kept spark.ui.killEnabled=false" in warning


def test_spark_submits_settings_are_overridden_too(caplog: pytest.LogCaptureFixture) -> None:
    """A driver spark-submit started: its own settings (``--conf``, spark-defaults.conf)
    lose to the job's security settings as well, and say so once per key."""
    jvm = {KILL: "TRUE", AUTH: "false", SECRET: "s3cret-from-submit", "spark.master": STANDALONE}
    out = security_settings(STANDALONE, {KILL: "true"}, jvm=jvm)
    assert out == {KILL: "false", AUTH: "true"}  # the secret is spark-submit's already
    warnings = _warnings(caplog)
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("spark_conf sets spark.ui.killEnabled=true")
    assert warnings[1].startswith("the driver's Spark configuration sets spark.authenticate=false")
    assert not any("s3cret" in w for w in warnings)


def test_a_standalone_master_without_the_secret_runs_unauthenticated_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No secret for a standalone master: the job does not fail (a monitor that does not
    start is blind); it says the network is not authenticated, and how to fix it."""
    out = security_settings(STANDALONE, {}, encrypt=True)
    assert out == {KILL: "false"}
    unauthenticated, unencrypted = _warnings(caplog)
    assert "NOT authenticated" in unauthenticated and STANDALONE in unauthenticated
    assert SECRET_FILE in unauthenticated and "spark-defaults.conf" in unauthenticated
    assert "NOT encrypted" in unencrypted
    caplog.clear()
    assert security_settings(STANDALONE, {}, authenticate=False) == {KILL: "false"}
    assert _warnings(caplog) == []  # spark_authenticate = false: meant


def test_a_standalone_secret_from_spark_conf(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``spark.authenticate.secret`` as given, or read from ``spark.authenticate.secret.file``
    (Spark reads that one on Kubernetes only); the secret is never logged."""
    assert security_settings(STANDALONE, {SECRET: "s3cret", AUTH: "no"}) == {
        KILL: "false",
        AUTH: "true",
    }
    secret = tmp_path / "secret"
    secret.write_text("  s3cret-in-file\n")
    out = security_settings(STANDALONE, {SECRET_FILE: str(secret)}, encrypt=True)
    assert out == {KILL: "false", SECRET: "s3cret-in-file", AUTH: "true", **ENCRYPT_CONF}
    (tmp_path / "empty").write_text("\n")
    for path in (tmp_path / "missing", tmp_path / "empty"):
        assert AUTH not in security_settings(STANDALONE, {SECRET_FILE: str(path)})
    logged = " ".join(_warnings(caplog))
    assert "s3cret" not in logged
    assert "No such file" in logged and "is empty" in logged
    assert SECRET in NOT_AT_LAUNCH and SECRET_FILE in NOT_AT_LAUNCH


def test_encryption_needs_and_follows_the_authentication(caplog: pytest.LogCaptureFixture) -> None:
    off = {k: "false" for k in ENCRYPT_CONF}
    assert security_settings("local[2]", off, encrypt=True) == {
        KILL: "false",
        AUTH: "true",
        **ENCRYPT_CONF,
    }
    assert len(_warnings(caplog)) == 2  # both encryption keys said, with the value kept
    # spark_authenticate off, the user's own spark.authenticate on: encrypted still.
    assert security_settings("local[2]", {AUTH: "true"}, authenticate=False, encrypt=True) == {
        KILL: "false",
        **ENCRYPT_CONF,
    }
    assert ENCRYPT_CONF.keys() <= security_settings("local[2]", {}, encrypt=True).keys()
    assert not ENCRYPT_CONF.keys() & security_settings("local[2]", {}).keys()


# -- a live driver --------------------------------------------------------------------------

_DRIVER = r"""
import json, logging, os, sys
logging.basicConfig(level=logging.WARNING, format="LOG %(name)s: %(message)s")
from streaming.session import build_session
spark = build_session(
    master="local[1]", shuffle_partitions=1, encrypt=True,
    conf={"spark.ui.killEnabled": "true", "spark.authenticate": "false"},
)
sc = spark.sparkContext
conf = sc.getConf()
jvm = sc._jvm
cookie = jvm.org.apache.hadoop.security.UserGroupInformation.getCurrentUser() \
    .getCredentials().getSecretKey(jvm.org.apache.hadoop.io.Text("sparkCookie"))
pid = sc._gateway.proc.pid
with open(f"/proc/{pid}/cmdline", "rb") as f:
    argv = f.read().replace(b"\0", b" ").decode()
with open(f"/proc/{pid}/environ", "rb") as f:
    environ = f.read().decode(errors="replace")
import pandas as pd  # a Python worker and a shuffle, authenticated and encrypted
df = spark.range(500).selectExpr("id % 7 AS k")
rows = df.groupBy("k").applyInPandas(
    lambda p: pd.DataFrame({"k": [p.k.iloc[0]], "n": [len(p)]}), "k long, n long"
).collect()
keys = ("spark.ui.killEnabled", "spark.authenticate", "spark.authenticate.secret",
        "spark.network.crypto.enabled", "spark.io.encryption.enabled")
print("RESULT " + json.dumps({
    "conf": {k: conf.get(k) for k in keys},
    "sql": spark.conf.get("spark.ui.killEnabled"),
    "secret": bytes(cookie).decode() if cookie is not None else None,
    "argv": argv, "environ": environ, "events": sum(r.n for r in rows),
}))
spark.stop()
"""


@pytest.mark.spark
def test_a_driver_keeps_the_ui_kill_off_and_authenticates_with_a_secret_of_its_own() -> None:
    """A fresh driver built with ``spark_conf`` turning the UI's kill on and the
    authentication off: Spark's own conf, read from the live session, has the kill off and
    the authentication and encryption on, and both attempts are logged. The secret is
    Spark's own, made in the JVM for this run (Hadoop's credentials, where the local driver
    keeps it): not on the JVM's command line nor in its environment."""
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER],
        cwd=REPO,
        env={**os.environ, "MONITOR_SPARK_LOG_LEVEL": "ERROR"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    seen = json.loads(line.removeprefix("RESULT "))
    assert seen["conf"] == {
        "spark.ui.killEnabled": "false",
        "spark.authenticate": "true",
        "spark.authenticate.secret": None,
        "spark.network.crypto.enabled": "true",
        "spark.io.encryption.enabled": "true",
    }
    assert seen["sql"] == "false"
    assert seen["events"] == 500
    secret = seen["secret"]
    assert secret and len(secret) == 64, secret  # 256 random bits, hex
    assert secret not in seen["argv"] and secret not in seen["environ"]
    assert "spark.authenticate.secret" not in seen["argv"]
    assert "spark.ui.killEnabled=false" in seen["argv"]  # off from the JVM's start
    logged = [x for x in proc.stderr.splitlines() if x.startswith("LOG streaming.session")]
    assert any(
        "spark_conf sets spark.ui.killEnabled=true: kept spark.ui.killEnabled=false" in x
        for x in logged
    ), proc.stderr[-4000:]
    assert any("spark_conf sets spark.authenticate=false" in x for x in logged), logged
