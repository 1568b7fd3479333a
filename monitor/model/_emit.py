"""Opening, updating and resolving conditions; emitting one-off events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from monitor.model.findings import SEVERITY, Finding, FindingKind, FindingState, Severity
from monitor.model.state import OpenCondition


class Emitter:
    """Collects the findings of one transition for one subject (partition/topic/broker)."""

    __slots__ = ("cluster", "open", "out", "partition", "topic")

    def __init__(
        self,
        cluster: str,
        topic: str | None,
        partition: int | None,
        open_: dict[str, OpenCondition],
        out: list[Finding],
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.open = open_
        self.out = out

    def event(
        self,
        kind: FindingKind,
        at: int,
        details: dict[str, Any],
        broker: int | None = None,
        severity: Severity | None = None,
    ) -> None:
        self.out.append(
            Finding(
                kind,
                FindingState.EVENT,
                severity if severity is not None else SEVERITY[kind],
                self.cluster,
                self.topic,
                self.partition,
                at,
                at,
                broker,
                details,
            )
        )

    def condition(
        self,
        kind: FindingKind,
        active: bool,
        at: int,
        details: Callable[[], dict[str, Any]] | None = None,
        broker: int | None = None,
        severity: Severity | None = None,
    ) -> None:
        """Open ``kind`` if it becomes active, resolve it if it stops; else refresh numbers.

        ``details`` is called only when the numbers are needed (the condition is or was
        active): this runs for every condition after every event, and building the detail
        dicts of healthy partitions would be most of the model's cost.
        """
        key = kind if broker is None else f"{kind}:{broker}"
        current = self.open.get(key)
        if not active and current is None:
            return
        if active:
            details_now = details() if details is not None else {}
            if current is None:
                sev = severity if severity is not None else SEVERITY[kind]
                self.open[key] = OpenCondition(kind, sev, at, broker, details_now)
                self.out.append(
                    Finding(
                        kind,
                        FindingState.OPEN,
                        sev,
                        self.cluster,
                        self.topic,
                        self.partition,
                        at,
                        at,
                        broker,
                        details_now,
                    )
                )
            else:
                current.details = details_now
        else:
            assert current is not None  # (not active and current is None) returned above
            del self.open[key]
            # Never before the open: a tick may open a condition at a clock past events
            # still in flight (a silent broker whose delayed samples then arrive).
            at = max(at, current.opened_at)
            self.out.append(
                Finding(
                    kind,
                    FindingState.RESOLVED,
                    current.severity,
                    self.cluster,
                    self.topic,
                    self.partition,
                    at,
                    current.opened_at,
                    broker,
                    {**current.details, "open_for_ms": at - current.opened_at},
                )
            )

    def resolve_all(self, at: int, broker: int | None = None) -> None:
        """Resolve every open condition (of ``broker``, when given)."""
        for cond in list(self.open.values()):
            if broker is None or cond.broker == broker:
                self.condition(cond.kind, False, at, broker=cond.broker)

    def is_open(self, kind: FindingKind, broker: int | None = None) -> bool:
        return (kind if broker is None else f"{kind}:{broker}") in self.open
