"""Building the SparkSession the job needs (the same for the job, the tests and the benchmark)."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streaming.cds import driver_java_options

log = logging.getLogger("streaming.session")

#: Settings the stateful operator needs, with why.
JOB_SPARK_CONF: dict[str, str] = {
    # transformWithStateInPandas runs only on the RocksDB state store.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    # Checkpoint state as changelogs (only the buckets written in a batch), not full snapshots
    # of the RocksDB instance every batch.
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # Arrow batches to Python as large as a bucket's share of a batch (rows, not bytes).
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.ui.showConsoleProgress": "false",
    # Spark's UI listens on every interface (it has no bind-host setting; only SPARK_LOCAL_IP
    # moves it). Off by default; whoever turns it on (spark_conf) gets it without kill
    # (SECURITY_CONF). The job's own health is /metrics.
    "spark.ui.enabled": "false",
    # Python workers stay up between micro-batches (their bucket cache lives in them).
    "spark.python.worker.reuse": "true",
}


#: Applied after every other setting -- the job's, the user's ``spark_conf``, spark-submit's
#: -- whatever they say; one that said otherwise is logged with the value kept. With kill
#: enabled, anyone who reaches the UI (it listens on every interface) can cancel the
#: batch's stage, which stops the query (issue 20).
SECURITY_CONF: dict[str, str] = {"spark.ui.killEnabled": "false"}
#: With ``spark_authenticate``, where the driver can have a secret (:func:`security_settings`):
#: every connection between Spark's processes (RPC, block transfers) proves it holds it.
AUTHENTICATE_CONF: dict[str, str] = {"spark.authenticate": "true"}
#: With ``spark_encrypt`` (needs the authentication): AES on Spark's RPC and block
#: transfers, and its shuffle and spill files on local disks encrypted.
ENCRYPT_CONF: dict[str, str] = {
    "spark.network.crypto.enabled": "true",
    "spark.io.encryption.enabled": "true",
}
SECRET = "spark.authenticate.secret"
#: Spark reads it itself on Kubernetes only (elsewhere it refuses it); on a standalone
#: master the job reads it and gives Spark the secret (SECRET).
SECRET_FILE = "spark.authenticate.secret.file"
#: Never given to the driver's JVM when it starts (what is, is on its command line: ``ps``),
#: and never logged: set on the driver's SparkConf over py4j instead.
NOT_AT_LAUNCH = frozenset({SECRET, SECRET_FILE})

#: Masters whose driver makes the secret itself, a new one per application (Spark's
#: SecurityManager.initializeAuth): local (the executors are in the driver's JVM), YARN and
#: Kubernetes (Spark hands it to the executors). Any other (a standalone master) needs the
#: secret its master and workers were started with.
_SPARK_MAKES_SECRET = re.compile(r"local(\[(\d+|\*)(\s*,\s*\d+)?\])?|yarn|k8s://.*")
_KUBERNETES = re.compile(r"k8s://.*")

UNAUTHENTICATED = (
    "Spark's own network is NOT authenticated in this run: the master %s needs the secret "
    "its master and workers were started with, and the job was given none. Start them with "
    "spark.authenticate=true and spark.authenticate.secret in their spark-defaults.conf, and "
    "give the job the same secret: spark_conf's spark.authenticate.secret.file (a file "
    "holding it, mode 0600) or spark-submit's spark.authenticate.secret (spark-defaults.conf, "
    '--properties-file); docs/deploy.md, "Spark\'s own network". spark_authenticate = false '
    "says it is meant"
)


def python_for_workers() -> str:
    """The interpreter Spark's Python workers must run: this one (the venv), not PATH's."""
    return os.environ.get("PYSPARK_PYTHON") or sys.executable


def _read_secret(path: str) -> str | None:
    """The secret held in ``path`` (white space around it dropped), None (logged) when it
    cannot be read or is empty. Neither the secret nor a line of the file is ever logged."""
    try:
        secret = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        log.warning("spark_conf's %s: %s cannot be read (%s)", SECRET_FILE, path, reason)
        return None
    if not secret:
        log.warning("spark_conf's %s: %s is empty", SECRET_FILE, path)
        return None
    return secret


def security_settings(
    master: str,
    given: Mapping[str, str],
    *,
    authenticate: bool = True,
    encrypt: bool = False,
    jvm: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The settings applied after every other to a driver of ``master``: SECURITY_CONF; with
    ``authenticate``, AUTHENTICATE_CONF where the driver can have the secret; with
    ``encrypt``, ENCRYPT_CONF where it authenticates.

    ``given`` is the user's ``spark_conf``; ``jvm`` what the driver's JVM was started with
    when the job did not start it (spark-submit's ``--conf``, ``--properties-file``,
    ``spark-defaults.conf``). Local, YARN and Kubernetes drivers make their secret
    themselves. A standalone master's secret comes from ``jvm`` or ``given``
    (``spark.authenticate.secret``, or ``spark.authenticate.secret.file``: read here, its
    secret returned as ``spark.authenticate.secret``); without one the run is left
    unauthenticated with a warning saying how to fix it -- a monitor that does not start is
    blind. A setting of ``given`` or ``jvm`` that the result changes is logged with the
    value kept (never a secret's value).

    >>> security_settings("local[2]", {"spark.ui.killEnabled": "true"})
    {'spark.ui.killEnabled': 'false', 'spark.authenticate': 'true'}
    >>> security_settings("spark://m:7077", {}, authenticate=False)
    {'spark.ui.killEnabled': 'false'}
    """
    out = dict(SECURITY_CONF)
    seen = {**(jvm or {}), **given}
    authenticated = False
    if authenticate:
        if _SPARK_MAKES_SECRET.fullmatch(master) or seen.get(SECRET):
            authenticated = True
        elif seen.get(SECRET_FILE):
            secret = _read_secret(seen[SECRET_FILE])
            if secret is not None:
                out[SECRET] = secret
                authenticated = True
        if authenticated:
            out.update(AUTHENTICATE_CONF)
        else:
            log.warning(UNAUTHENTICATED, master)
    else:  # left to the user's own settings
        authenticated = seen.get("spark.authenticate", "").strip().lower() == "true"
    if encrypt:
        if authenticated:
            out.update(ENCRYPT_CONF)
        else:
            log.warning(
                "spark_encrypt: Spark's RPC, block transfers and shuffle files are NOT "
                "encrypted in this run: the encryption needs Spark's authentication, which "
                "is off"
            )
    for key, kept in out.items():
        if key in NOT_AT_LAUNCH:
            continue
        for source, conf in (("spark_conf", given), ("the driver's Spark configuration", jvm)):
            value = (conf or {}).get(key)
            if value is not None and value.strip().lower() != kept:
                log.warning(
                    "%s sets %s=%s: kept %s=%s (the job's security settings come after "
                    "spark_conf and spark-submit's: streaming.session.SECURITY_CONF, and the "
                    "spark_authenticate and spark_encrypt settings)",
                    source,
                    key,
                    value,
                    key,
                    kept,
                )
                break
    return out


def build_session(
    *,
    master: str | None = "local[2]",
    app_name: str = "kafka-replication-monitor",
    shuffle_partitions: int = 2,
    jars: list[str] | None = None,
    conf: Mapping[str, str] | None = None,
    authenticate: bool = True,
    encrypt: bool = False,
) -> Any:
    """Get (or create) the SparkSession with the job's settings.

    ``master=None`` leaves the master to ``spark-submit``. ``jars`` go to ``spark.jars``
    (the Kafka connector). ``conf`` (the user's ``spark_conf``) comes after the job's
    settings (JOB_SPARK_CONF) and before its security settings (:func:`security_settings`,
    with ``authenticate`` and ``encrypt``), which nothing overrides. Environment:
    PYSPARK_PYTHON is set to this interpreter unless already set, so executors run the
    venv that has ``monitor`` installed.

    The driver's JVM is started first (pyspark's ``spark-submit``, unless spark-submit
    started it), with every setting but NOT_AT_LAUNCH: pyspark passes a builder's settings
    on that JVM's command line, readable by every user of the host (``ps``). The
    authentication secret goes to the driver's SparkConf over py4j, once the JVM is up
    and the master is known. (``SparkContext._ensure_initialized``: pyspark's own first
    step of a context, called earlier.)
    """
    os.environ.setdefault("PYSPARK_PYTHON", python_for_workers())
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    given = dict(conf or {})
    settings = {
        "spark.app.name": app_name,
        **({"spark.master": master} if master else {}),
        **JOB_SPARK_CONF,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.pyspark.python": python_for_workers(),
        **given,
    }
    if jars:
        settings["spark.jars"] = ",".join(jars)
    archive = driver_java_options()  # the driver's class-data sharing archive, if built
    if archive:
        given_opts = settings.get("spark.driver.extraJavaOptions", "")
        settings["spark.driver.extraJavaOptions"] = f"{given_opts} {archive}".strip()
    settings.update(SECURITY_CONF)  # at the JVM's start already
    # spark-submit started the JVM when it gave this process its gateway's port.
    started_here = SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    launch = [(k, v) for k, v in settings.items() if k not in NOT_AT_LAUNCH]
    SparkContext._ensure_initialized(conf=SparkConf(loadDefaults=False).setAll(launch))
    running = SparkContext._active_spark_context
    jvm = {} if started_here else dict(SparkConf().getAll())  # spark-submit's settings
    actual = (
        (running.master if running is not None else None)
        or settings.get("spark.master")
        or jvm.get("spark.master")
        or "local[*]"  # spark-submit's default
    )
    settings.update(
        security_settings(
            actual,
            given,
            authenticate=authenticate,
            encrypt=encrypt,
            jvm=None if started_here else jvm,
        )
    )
    if not _KUBERNETES.fullmatch(actual):
        settings.pop(SECRET_FILE, None)  # read above; Spark refuses it off Kubernetes
    if running is not None:
        # A running context keeps its settings: a secret would only land in the session's
        # SQL settings (spark.conf.get).
        settings.pop(SECRET, None)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("MONITOR_SPARK_LOG_LEVEL", "WARN"))
    return spark


def expand_jars(entries: list[str]) -> list[str]:
    """``jars`` as given, a folder standing for every ``*.jar`` in it (a local jars folder:
    docs/deploy.md, the Spark Kafka source without Maven on the machine).

    >>> expand_jars(["/nonexistent/a.jar", "s3a://bucket/b.jar"])
    ['/nonexistent/a.jar', 's3a://bucket/b.jar']
    """
    out: list[str] = []
    for entry in entries:
        folder = Path(entry)
        if "://" not in entry and folder.is_dir():
            found = sorted(str(p) for p in folder.glob("*.jar"))
            if not found:
                raise ValueError(f"jars folder {entry} holds no *.jar")
            out.extend(found)
        else:
            out.append(entry)
    return out


def kafka_jars() -> list[str]:
    """spark-sql-kafka and its dependencies, resolved by the lab's Maven jar sets."""
    from monitor.jars import spark_kafka_jars

    return [str(p) for p in spark_kafka_jars()]
