"""``monitor run``'s live view: each finding as the job writes it to the findings topic, one
line each -- its time, severity, kind, state, subject and what it says.

The view starts at the topic's end when ``monitor run`` starts (what an earlier run said is
in the store: ``monitor status --store``), assigned to every partition before the job
starts, so that no finding of this run is missed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from monitor.connection import KafkaConnection
from monitor.model import Finding, Severity
from monitor.query.render import summary

MARKS = {Severity.CRITICAL: "!!", Severity.WARNING: " !", Severity.INFO: "  "}


def line(f: Finding) -> str:
    """A finding as the live view prints it."""
    clock = time.strftime("%H:%M:%S", time.localtime(f.at / 1000))
    mark = MARKS.get(f.severity, "  ")
    kind, state = f"{f.kind:<20}", f"{f.state.value:<8}"
    return f"{clock} {mark} {f.severity.label:<8} {kind} {state} {f.subject:<24} {summary(f)}"


class FindingsView:
    """A consumer of the findings topic, from its end at :meth:`open`."""

    def __init__(
        self, conn: KafkaConnection, topic: str, say: Callable[[str], None] = print
    ) -> None:
        self.conn, self.topic, self.say = conn, topic, say
        self.seen = 0
        self._consumer: Any = None

    def open(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            client_id="replication-monitor-run-view",
            enable_auto_commit=False,
            **self.conn.client_kwargs(),
        )
        parts = consumer.partitions_for_topic(self.topic) or {0}
        assigned = [TopicPartition(self.topic, p) for p in sorted(parts)]
        consumer.assign(assigned)
        consumer.seek_to_end(*assigned)
        for tp in assigned:
            consumer.position(tp)  # resolve the end now: findings after this are shown
        self._consumer = consumer

    def poll(self, timeout_s: float = 0.5) -> list[Finding]:
        """The findings written since the last poll, each said."""
        got: list[Finding] = []
        batches = self._consumer.poll(timeout_ms=int(timeout_s * 1000))
        for records in batches.values():
            for record in records:
                try:
                    f = Finding.from_dict(json.loads(record.value))
                except (ValueError, KeyError, TypeError) as e:
                    self.say(f"(a findings record at offset {record.offset} not read: {e!r})")
                    continue
                got.append(f)
                self.seen += 1
                self.say(line(f))
        return got

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
