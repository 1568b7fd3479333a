"""Fixtures of the Spark tests: one local SparkSession for the whole session, and the lab.

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
    from tests import released

    session = build_session(master="local[2]", shuffle_partitions=2, jars=kafka_jars())
    released.on_release("spark", session.stop)  # stopped after its last user
    try:
        yield session
    finally:
        session.stop()


# --- the real Kafka lab: the session's (tests/conftest.py) -----------------------------------

import uuid  # noqa: E402


@pytest.fixture(scope="session")
def kafka_lab(lab_session: Any) -> Any:
    """The session lab (tests/conftest.py), every broker healthy at first use. One lab for
    the whole suite: a second one cost its start and three more brokers' idle CPU (1-3 CPU-s
    a minute each on the lab's fast heartbeats: docs/benchmarks.md) for half the run."""
    from tests.dev.lab.helpers import heal

    heal(lab_session)
    return lab_session


@pytest.fixture
def topics(kafka_lab: Any) -> dict[str, str]:
    """Fresh events / findings / dead-letter topics for one test, on a healed lab (a test
    before may have stopped a broker)."""
    from monitor.dev.lab.admin import create_topic
    from tests.dev.lab.helpers import heal

    heal(kafka_lab)

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
