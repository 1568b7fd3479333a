"""The lines of a check: ``<what>: ok -- <detail>`` or ``<what>: FAIL -- <problem>: <what
to do>``, notes indented under them, and the count of problems (exit 2 when any)."""

from __future__ import annotations

from collections.abc import Callable


class Report:
    """Says each check's line through ``say`` (print, or a list's append for --json)."""

    def __init__(self, say: Callable[[str], None] = print) -> None:
        self.say = say
        self.problems = 0

    def ok(self, what: str, detail: str) -> None:
        self.say(f"{what}: ok -- {detail}")

    def fail(self, what: str, problem: str, fix: str = "") -> None:
        """A blocker: the problem and, after a colon, what to do about it."""
        self.problems += 1
        self.say(f"{what}: FAIL -- {problem}" + (f": {fix}" if fix else ""))

    def note(self, text: str) -> None:
        """A line under the last, indented: what a passing check still costs."""
        self.say(f"    {text}")

    def result(self) -> int:
        """The last line, and the exit code: 0 when every check passed, 2 otherwise."""
        self.say("result: ok" if self.problems == 0 else f"result: {self.problems} problem(s)")
        return 0 if self.problems == 0 else 2
