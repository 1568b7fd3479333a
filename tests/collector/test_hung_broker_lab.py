"""A hung broker holds the collector's Admin client no longer than its request timeout.

A SIGSTOPped broker accepts TCP connections (the kernel does) but never answers. kafka-python
gives a new connection 10 s to set up, doubling to 30 s, whatever the request timeout: in the
CI short soak, broker 2 paused, the collector's round waited twice 10 s on it and every broker
looked silent for 23 s (``stale_telemetry`` on all three). The connection settings now cap
the setup at ``request_timeout_ms`` (:meth:`monitor.connection.KafkaConnection.client_kwargs`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import KafkaError

from monitor.connection import KafkaConnection
from monitor.dev.lab.cluster import Lab
from tests.dev.lab.helpers import heal

pytestmark = pytest.mark.lab

REQUEST_TIMEOUT_MS = 2_000


@pytest.fixture
def paused_3(lab: Lab) -> Iterator[Lab]:
    lab.pause(3)
    try:
        yield lab
    finally:
        heal(lab)


def test_a_request_to_a_paused_broker_fails_within_the_request_timeout(paused_3: Lab) -> None:
    kw = KafkaConnection(
        bootstrap_servers=paused_3.bootstrap_servers.split(",")[0],  # broker 1
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    ).client_kwargs()
    admin = KafkaAdminClient(client_id="hung-broker-test", **kw)
    try:
        # A broker's own configs are asked of that broker: a new connection to broker 3.
        with pytest.raises(KafkaError) as failed:
            admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "3")])
    finally:
        admin.close()
    # kafka-python names the deadline it gave up at: the setup's (10 s by default, 30 s
    # after failures) or the request's -- both now at most the request timeout (+20%
    # jitter on the setup's).
    waited = re.search(r"timed out after (\d+) ms", str(failed.value))
    assert waited is not None, repr(failed.value)
    assert int(waited.group(1)) <= REQUEST_TIMEOUT_MS * 1.2, repr(failed.value)
