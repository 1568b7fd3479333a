"""Fixtures of the Spark tests: one local SparkSession for the whole session, and a lab.

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


# --- the real Kafka lab (own ports and folder, always stopped) ---------------------------------

import os  # noqa: E402
import uuid  # noqa: E402


@pytest.fixture(scope="session")
def kafka_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A 3-broker KRaft lab on base port 31092 or the next free block, reserved with a lock
    (``monitor.dev.lab.ports``; env MONITOR_TEST_STREAMING_LAB_PORT pins it)."""
    from monitor.dev.lab.cluster import Lab
    from monitor.dev.lab.config import LabConfig
    from monitor.dev.lab.ports import reserve_base_port

    env = os.environ.get("MONITOR_TEST_STREAMING_LAB_PORT")
    with reserve_base_port(int(env) if env else 31092, tries=1 if env else 20) as port:
        lab = Lab(LabConfig(dir=tmp_path_factory.mktemp("streaming-lab"), base_port=port))
        try:
            lab.up()
            yield lab
        finally:
            lab.down()


@pytest.fixture
def topics(kafka_lab: Any) -> dict[str, str]:
    """Fresh events / findings / dead-letter topics for one test."""
    from monitor.dev.lab.admin import create_topic

    tag = uuid.uuid4().hex[:8]
    names = {
        "events": f"events-{tag}",
        "findings": f"findings-{tag}",
        "deadletter": f"deadletter-{tag}",
    }
    for role, name in names.items():
        create_topic(
            kafka_lab.bootstrap_servers,
            name,
            partitions=3 if role == "events" else 1,
            replication_factor=3,
            min_insync_replicas=2,
        )
    return names
