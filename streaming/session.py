"""Building the SparkSession the job needs (the same for the job, the tests and the benchmark)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streaming.cds import driver_java_options

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
    # moves it) and, with kill enabled, lets anyone who reaches it cancel the batch's stage,
    # which stops the query. Off by default; whoever turns it on (spark_conf) gets it without
    # kill. The job's own health is /metrics.
    "spark.ui.enabled": "false",
    "spark.ui.killEnabled": "false",
    # Python workers stay up between micro-batches (their bucket cache lives in them).
    "spark.python.worker.reuse": "true",
}


def python_for_workers() -> str:
    """The interpreter Spark's Python workers must run: this one (the venv), not PATH's."""
    return os.environ.get("PYSPARK_PYTHON") or sys.executable


def build_session(
    *,
    master: str | None = "local[2]",
    app_name: str = "kafka-replication-monitor",
    shuffle_partitions: int = 2,
    jars: list[str] | None = None,
    conf: Mapping[str, str] | None = None,
) -> Any:
    """Get (or create) the SparkSession with the job's settings.

    ``master=None`` leaves the master to ``spark-submit``. ``jars`` go to ``spark.jars``
    (the Kafka connector). Environment: PYSPARK_PYTHON is set to this interpreter unless
    already set, so executors run the venv that has ``monitor`` installed.
    """
    os.environ.setdefault("PYSPARK_PYTHON", python_for_workers())
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    settings = {
        **JOB_SPARK_CONF,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.pyspark.python": python_for_workers(),
        **(conf or {}),
    }
    if jars:
        settings["spark.jars"] = ",".join(jars)
    archive = driver_java_options()  # the driver's class-data sharing archive, if built
    if archive:
        given = settings.get("spark.driver.extraJavaOptions", "")
        settings["spark.driver.extraJavaOptions"] = f"{given} {archive}".strip()
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
