"""The warm-up a Spark driver runs while ``streaming.cds`` builds its class-data sharing
archive (``python -m streaming.cds_warmup``, with ``MONITOR_SPARK_CDS_DUMP_OPTIONS`` holding
``-XX:ArchiveClassesAtExit=...``): the classes it loads are the archive's."""

from __future__ import annotations

import os
import time

from streaming.session import build_session


def main() -> None:
    """What the archive is built from: a driver with the job's settings runs a batch query,
    a pandas grouped map (Arrow, the Python runner) and a streaming aggregation on the RocksDB
    state store; then it stops and this process exits (the JVM dumps as it exits)."""
    import pandas as pd  # type: ignore[import-untyped]

    options = os.environ["MONITOR_SPARK_CDS_DUMP_OPTIONS"]
    spark = build_session(
        master="local[1]", shuffle_partitions=1, conf={"spark.driver.extraJavaOptions": options}
    )
    df = spark.range(2000).selectExpr("id % 7 AS k", "id AS v")
    df.groupBy("k").count().collect()
    schema = "k long, n long"
    df.groupBy("k").applyInPandas(
        lambda p: pd.DataFrame({"k": [p.k.iloc[0]], "n": [len(p)]}), schema
    ).collect()
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 100)
        .load()
        .selectExpr("value % 5 AS k")
        .groupBy("k")
        .count()
        .writeStream.format("memory")
        .queryName("cds_warmup")
        .outputMode("complete")
        .start()
    )
    try:
        time.sleep(1)
        query.processAllAvailable()
    finally:
        query.stop()
    pid = spark.sparkContext._gateway.proc.pid
    spark.stop()
    print(f"jvm {pid}", flush=True)


if __name__ == "__main__":
    main()
