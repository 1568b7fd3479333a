"""Session fixtures that hold processes, stopped right after the last test that uses them.

The session lab's three brokers and the tests' Spark driver idle between their users (the
brokers at 1-3 CPU-s a minute each, on the lab's fast heartbeats: docs/benchmarks.md).
Kept to the session's end, they ran beside every test after their last user: the whole
stacks of the demo and the soak, the secured labs, the stranger's cluster. So
``tests/conftest.py`` runs the test files using them first, and after the last test of the
run that uses one (by the fixtures it names: name them, never ``getfixturevalue``) calls
:func:`release`. The fixture's own teardown still runs at the session's end: each stop
given here must be safe to run twice.

A test after the release that still reached the lab would find it healed by its ``lab``
fixture (stopped brokers are restarted), only slower.
"""

from __future__ import annotations

from collections.abc import Callable

#: The fixtures released early (each registers its stop with :func:`on_release`).
RELEASED = ("lab_session", "spark")

_stops: dict[str, Callable[[], None]] = {}


def on_release(name: str, stop: Callable[[], None]) -> None:
    """``stop`` ends what fixture ``name`` holds (called once, by :func:`release`)."""
    assert name in RELEASED, name
    _stops[name] = stop


def release(name: str) -> None:
    """Stop what fixture ``name`` holds, if it was set up in this run."""
    stop = _stops.pop(name, None)
    if stop is not None:
        stop()
