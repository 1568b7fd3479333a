"""The job's wait for its events topic (``--wait-for-topics``, what ``monitor run`` gives it
while it starts the monitor's cluster): a cluster that never answers, or answers without the
topic, ends the wait with one line naming the topic, the cluster and what to do."""

from __future__ import annotations

import pytest

from monitor.dev.processes.prom import free_port
from streaming.job import TopicMissing, wait_for_topic


def test_a_topic_that_never_comes_is_named_with_its_cluster() -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens
    client = {"bootstrap_servers": [address], "request_timeout_ms": 1000}
    with pytest.raises(TopicMissing) as raised:
        wait_for_topic(client, "__replication_monitor_events", timeout_s=1.5, poll_s=0.2)
    text = str(raised.value)
    assert "the events topic __replication_monitor_events is not on" in text
    assert address in text and "--create-topics" in text
