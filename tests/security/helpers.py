"""What the secured-lab tests share: a one-broker lab's settings, reading a topic back over
the secured listener, capturing every log record, the job's JVM logs in a file."""

from __future__ import annotations

import logging
import socket
import time
import urllib.request
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from monitor.connection import KafkaConnection

#: One broker: every replicated internal topic down to RF 1.
ONE_BROKER = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "default.replication.factor": "1",
}

#: The job's JVM logs, INFO and up, into a file (``{log}``). Not the console: pyspark counts
#: as a shell, and Spark filters a shell's console appenders at WARN whatever the level.
LOG4J2_INFO = """\
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""


class Capture(logging.Handler):
    """Every record, formatted, from DEBUG up."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter("%(name)s %(levelname)s %(message)s").format(record))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return str(r.read().decode())


def consumer(settings: KafkaConnection) -> KafkaConsumer:
    kw = settings.client_kwargs()
    kw.pop("request_timeout_ms", None)
    return KafkaConsumer(enable_auto_commit=False, **kw)


def read_topic(settings: KafkaConnection, topic: str, timeout_s: float = 30) -> list[Any]:
    """Every record of ``topic`` up to its current end, read over the secured listener."""
    c = consumer(settings)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        out: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(c.position(tp) < end[tp] for tp in tps):
            for batch in c.poll(timeout_ms=500).values():
                out.extend(batch)
        return out
    finally:
        c.close()


def raw(record: Any) -> bytes:
    """A record as bytes: key, value and headers."""
    parts = [record.key or b"", record.value or b""]
    for k, v in record.headers or []:
        parts += [k.encode(), v or b""]
    return b"\n".join(parts)
