"""Bucket keys spread the operator's work evenly over Spark's shuffle partitions.

Checked on the real Spark: its ``hash()`` agrees with :func:`streaming.operator.spark_int_hash`,
and hash partitioning of the keys (what the stateful operator's exchange does) puts
exactly ``N / P`` buckets in each of ``P`` partitions, where plain indices did not.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from streaming.operator import bucket_index, bucket_keys, spark_int_hash


@pytest.mark.parametrize("buckets", [1, 3, 16, 64])
def test_spark_hashes_each_key_to_its_index(spark: Any, buckets: int) -> None:
    keys = bucket_keys(buckets)
    df = spark.createDataFrame([(k,) for k in keys], "k int")
    got = [r.i for r in df.selectExpr(f"pmod(hash(k), {buckets}) AS i").collect()]
    assert got == list(range(buckets))
    assert [spark_int_hash(k) % buckets for k in keys] == got


def _per_partition(spark: Any, keys: list[int], partitions: int) -> list[int]:
    df = spark.createDataFrame([(k,) for k in keys], "bucket int").repartition(partitions, "bucket")
    counts = Counter(r.p for r in df.selectExpr("spark_partition_id() AS p").collect())
    return [counts.get(p, 0) for p in range(partitions)]


@pytest.mark.parametrize(("buckets", "partitions"), [(16, 2), (16, 4), (64, 2), (64, 8)])
def test_hash_partitioning_gives_every_task_the_same_number_of_buckets(
    spark: Any, buckets: int, partitions: int
) -> None:
    even = [buckets // partitions] * partitions
    assert _per_partition(spark, list(bucket_keys(buckets)), partitions) == even
    # What the job grouped by before: the plain indices, unevenly spread.
    assert _per_partition(spark, list(range(buckets)), partitions) != even


def test_the_index_is_the_inverse_of_the_keys() -> None:
    keys = bucket_keys(16)
    assert len(set(keys)) == 16 and min(keys) >= 0
    assert [bucket_index(16)[k] for k in keys] == list(range(16))
