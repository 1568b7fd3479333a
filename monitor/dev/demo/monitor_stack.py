"""The monitor's own side, as the demo and the soak start it: a one-broker cluster for the
monitor's topics, the topics on it, and the Spark job's settings.

The monitor's topics belong on a cluster other than the one it watches: a monitor whose
telemetry rides on the cluster it watches goes blind during the very outage it must report.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from monitor.contract.events import DEADLETTER_TOPIC, EVENTS_TOPIC, FINDINGS_TOPIC

if TYPE_CHECKING:
    from monitor.dev.lab.cluster import Lab

EVENTS, FINDINGS, DEADLETTER = EVENTS_TOPIC, FINDINGS_TOPIC, DEADLETTER_TOPIC
#: The lab's broker settings make faults show within seconds; the model's lag thresholds
#: follow (3 collection intervals, as docs/findings.md recommends). Passed to the job as
#: MONITOR_STREAMING_* settings.
STREAM_ENV = {
    "MONITOR_STREAMING_MODEL__FOLLOWER_LAG_MS": "6000",
    "MONITOR_STREAMING_MODEL__HW_LAG_MS": "6000",
    "MONITOR_STREAMING_MODEL__STALE_AFTER_MS": "15000",
    # The demo draws its partition's watermarks from the store, round by round: every row
    # (a fleet's job writes a partition's offsets every state_refresh_ms when nothing else
    # moved).
    "MONITOR_STREAMING_STATE_REFRESH_MS": "0",
}
STREAM_ARGS = ["--trigger-seconds", "1", "--tick-ms", "2000", "--buckets", "2"]

#: A one-broker cluster: internal topics with one replica.
ONE_BROKER = {
    name: "1"
    for name in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.replication.factor",
        "default.replication.factor",
    )
}


def monitor_cluster(workdir: Path, base_port: int) -> Lab:
    """The one-broker cluster that holds the monitor's own topics (demo and soak)."""
    from monitor.dev.lab.cluster import Lab
    from monitor.dev.lab.config import LabConfig

    return Lab(
        LabConfig(dir=workdir, base_port=base_port, brokers=1, extra_broker_config=ONE_BROKER)
    )


def create_monitor_topics(bootstrap: str) -> None:
    """The events, findings and dead-letter topics on the monitor's cluster."""
    from monitor.dev.lab.admin import create_topic

    for name in (EVENTS, FINDINGS, DEADLETTER):
        create_topic(
            bootstrap,
            name,
            partitions=2 if name == EVENTS else 1,
            replication_factor=1,
            min_insync_replicas=1,
        )
