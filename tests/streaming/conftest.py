"""Shared fixtures of the streaming tests: one local SparkSession for the whole session.

The session is built by ``streaming.session.build_session`` (the job's own settings:
RocksDB state store, the venv's Python on workers, the Kafka connector jars), so the tests
run the job's configuration, not a look-alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from streaming.session import build_session, kafka_jars

    session = build_session(master="local[2]", shuffle_partitions=2, jars=kafka_jars())
    try:
        yield session
    finally:
        session.stop()
