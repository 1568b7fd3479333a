"""Replay a stream of JSON events through the model (shared by the CLI, tests and bench).

Order: the model's one event order (:mod:`monitor.model.order`: time, then configuration
before what it governs, then the file's own order), without holding the file. A small
reorder buffer keeps the events of the newest timestamp (and of ``reorder_ms`` before it)
and releases, sorted, every event older than that as soon as a later one arrives; an event
older than what was already released is applied late, and the model ignores it as late --
as the Spark job does with an event older than what it applied. Memory: the events of one
window, whatever the file's size. Files written in that order (``monitor collect --out``,
``tests/data/``) replay exactly as they stand.

Stamps: an event stamped further ahead of the stream's other sources than the model's
``max_stamp_ahead_ms`` is rejected with a reason, as the job dead-letters one ahead of its
Kafka record (:mod:`monitor.model.stamps`): one stamp in the future must not make every
later event of its partition late.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from monitor.contract.events import EventError, parse_event, to_model
from monitor.model import ClusterModel, Finding, ModelEvent
from monitor.model.order import event_order, unfold
from monitor.model.stamps import Decided, StampGuard


@dataclass
class ReplayStats:
    lines: int = 0
    accepted: int = 0
    rejected: int = 0
    findings: int = 0
    by_state: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        states = ", ".join(f"{n} {s}" for s, n in sorted(self.by_state.items())) or "none"
        return (
            f"replayed {self.lines} lines: {self.accepted} accepted, {self.rejected} rejected; "
            f"{self.findings} findings ({states})"
        )


def replay(
    lines: Iterable[bytes | str],
    model: ClusterModel,
    on_finding: Callable[[Finding], None],
    on_reject: Callable[[int, str], None],
    tick_ms: int = 5_000,
    reorder_ms: int = 0,
    on_applied: Callable[[ModelEvent], None] | None = None,
) -> ReplayStats:
    """Feed each line to ``model``; report findings and rejected lines through callbacks
    (and, with ``on_applied``, each event once the model has applied it).

    The model's clock is the events' own time: every ``tick_ms`` of event time, the
    time-driven checks (silence, flapping) run at the newest ``observed_at`` applied so far.
    """
    stats = ReplayStats()
    next_tick = -1
    now = -1
    # (observed_at, rank, line, sequence, event)
    buffer: list[tuple[int, int, int, int, ModelEvent]] = []
    seq = itertools.count()
    guard = StampGuard(model.config.max_stamp_ahead_ms)

    def emit(findings: list[Finding]) -> None:
        for f in findings:
            stats.findings += 1
            stats.by_state[f.state.value] = stats.by_state.get(f.state.value, 0) + 1
            on_finding(f)

    held_lines: dict[int, int] = {}  # id(event) -> its line, while the guard holds it

    def release(lineno: int, event: ModelEvent | None, decided: Decided) -> None:
        """Apply or reject what the guard decided; remember ``event``'s line if it is held."""
        if event is not None and not any(ev is event for ev, _ in decided):
            held_lines[id(event)] = lineno
        for ev, reason in decided:
            line = lineno if ev is event else held_lines.pop(id(ev))
            if reason is None:
                apply(ev)
            else:
                stats.accepted -= 1
                stats.rejected += 1
                on_reject(line, reason)

    def apply(event: ModelEvent) -> None:
        nonlocal next_tick, now
        emit(model.apply(event))
        if on_applied is not None:
            on_applied(event)
        now = max(now, event.observed_at)
        if next_tick < 0:
            next_tick = now + tick_ms
        elif now >= next_tick:
            emit(model.tick(now))
            next_tick = now + tick_ms

    for lineno, raw in enumerate(lines, start=1):
        stats.lines += 1
        try:
            record = to_model(parse_event(raw))
        except EventError as e:
            stats.rejected += 1
            on_reject(lineno, str(e))
            continue
        stats.accepted += 1
        # A round's samples and metadata keep their order at equal keys (heapq compares
        # the line next: one record's events share it, so a sequence number breaks the tie).
        for event in unfold(record):
            heapq.heappush(buffer, (*event_order(event), lineno, next(seq), event))
        horizon = record.observed_at - reorder_ms
        while buffer and buffer[0][0] < horizon:
            _, _, line, _, ready = heapq.heappop(buffer)
            release(line, ready, guard.admit(ready))
    while buffer:
        _, _, line, _, ready = heapq.heappop(buffer)
        release(line, ready, guard.admit(ready))
    release(0, None, guard.flush())
    if now >= 0:
        emit(model.tick(now))
    return stats
