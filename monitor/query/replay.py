"""Replay a stream of JSON events through the model (shared by the CLI, tests and bench)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from monitor.contract.events import EventError, parse_event, to_model
from monitor.model import ClusterModel, Finding


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
) -> ReplayStats:
    """Feed each line to ``model``; report findings and rejected lines through callbacks.

    The model's clock is the events' own time: every ``tick_ms`` of event time, the
    time-driven checks (silence, flapping) run at the newest ``observed_at`` seen so far.
    """
    stats = ReplayStats()
    next_tick = -1
    now = -1

    def emit(findings: list[Finding]) -> None:
        for f in findings:
            stats.findings += 1
            stats.by_state[f.state.value] = stats.by_state.get(f.state.value, 0) + 1
            on_finding(f)

    for lineno, raw in enumerate(lines, start=1):
        stats.lines += 1
        try:
            event = to_model(parse_event(raw))
        except EventError as e:
            stats.rejected += 1
            on_reject(lineno, str(e))
            continue
        stats.accepted += 1
        emit(model.apply(event))
        now = max(now, event.observed_at)
        if next_tick < 0:
            next_tick = now + tick_ms
        elif now >= next_tick:
            emit(model.tick(now))
            next_tick = now + tick_ms
    if now >= 0:
        emit(model.tick(now))
    return stats
