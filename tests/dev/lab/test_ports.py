"""The lab's port handling without a JVM: which blocks it reserves, and what a start does
when a port is busy (a listener fails at once, a connection's port is waited out)."""

from __future__ import annotations

import socket
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from monitor.dev.lab import ports
from monitor.dev.lab.errors import LabError
from monitor.dev.lab.ports import ephemeral_range, listening, reserve_base_port, wait_ports_free


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock
    sock.close()


def _outgoing_connection_from_a_port(target: socket.socket) -> socket.socket:
    """What took the stopped broker's port in CI: an outgoing connection whose local port
    is that port (bound without SO_REUSEADDR, as a client's is)."""
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Close with RST, not FIN: the port must come free when the test says, not after the
    # 60 s of TIME_WAIT a FIN would leave.
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.bind(("127.0.0.1", 0))
    client.connect(target.getsockname())
    return client


def test_the_kernels_ephemeral_range_is_read() -> None:
    bounds = ephemeral_range()
    assert bounds is not None and 1024 <= bounds[0] < bounds[1] <= 65535
    assert ephemeral_range(Path("/nonexistent")) is None


def _counted_checks(
    monkeypatch: pytest.MonkeyPatch, port: int, after_busy: Callable[[], None] = lambda: None
) -> list[bool]:
    """The results of every ``port_free`` check of ``port`` wait_ports_free makes, in order;
    ``after_busy`` runs after each check that found it busy."""
    real, checks = ports.port_free, []

    def check(host: str, p: int) -> bool:
        free = real(host, p)
        if p == port:
            checks.append(free)
            if not free:
                after_busy()
        return free

    monkeypatch.setattr(ports, "port_free", check)
    return checks


def test_a_port_held_by_a_listener_fails_after_the_grace(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another program's listener fails the start, naming the port -- once it has outlived
    the grace an exiting JVM gets (shortened here)."""
    port = listener.getsockname()[1]
    assert listening(port)
    monkeypatch.setattr(ports, "LISTENER_GRACE_S", 0.5)
    checks = _counted_checks(monkeypatch, port)
    said: list[str] = []
    with pytest.raises(LabError, match=f"127.0.0.1:{port} \\(node 2\\) is already in use by a"):
        wait_ports_free("127.0.0.1", [port], timeout=30, say=said.append, what=" (node 2)")
    assert len(checks) > 1 and not any(checks)
    assert said == [f"waiting for port {port} (node 2): held by a listener (exiting?)"]


def test_a_listener_that_closes_within_the_grace_is_waited_out(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by CI: a broker restarted right after its stop saw its old exporter port
    listening -- the exiting JVM's threads had not all gone."""
    port = listener.getsockname()[1]
    busy = 0

    def close_after_three() -> None:
        nonlocal busy
        busy += 1
        if busy == 3:
            listener.close()

    checks = _counted_checks(monkeypatch, port, close_after_three)
    wait_ports_free("127.0.0.1", [port], timeout=30)
    assert checks == [False, False, False, True]


def test_a_port_held_by_a_connection_is_waited_out(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _outgoing_connection_from_a_port(listener)
    port = client.getsockname()[1]
    assert not ports.port_free("127.0.0.1", port) and not listening(port)
    busy = 0

    def let_go_after_three() -> None:  # the connection closes while the start waits
        nonlocal busy
        busy += 1
        if busy == 3:
            client.close()

    checks = _counted_checks(monkeypatch, port, let_go_after_three)
    said: list[str] = []
    wait_ports_free("127.0.0.1", [port], timeout=30, say=said.append)
    assert checks == [False, False, False, True]  # waited while held, went on once free
    assert said == [f"waiting for port {port}: held by a closing connection"]  # said once
    assert ports.port_free("127.0.0.1", port)


def test_a_port_that_stays_busy_times_out_naming_it(listener: socket.socket) -> None:
    client = _outgoing_connection_from_a_port(listener)
    port = client.getsockname()[1]
    try:
        with pytest.raises(LabError, match=f"127.0.0.1:{port} stayed in use for 1s"):
            wait_ports_free("127.0.0.1", [port], timeout=1)
    finally:
        client.close()


@pytest.mark.parametrize(
    ("first", "bounds", "expected"),
    [
        (19092, (32768, 60999), 19092),  # the default range: the first block is clear
        (25092, (20000, 30000), 30092),  # upward past the range
        (25092, (26000, 60999), 25092),  # clear below the range
        (29092, (29000, 60999), 28092),  # no clear block upward: below the first
        (29092, (1024, 65535), 29092),  # nothing is clear: the first free block
    ],
)
def test_reserved_blocks_avoid_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    first: int,
    bounds: tuple[int, int],
    expected: int,
) -> None:
    # Own lock files: this session's lab holds the lock of its real block (CI: 29092).
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(ports, "ephemeral_range", lambda: bounds)
    monkeypatch.setattr(ports, "port_free", lambda _host, _port: True)
    with reserve_base_port(first, tries=8) as base:
        assert base == expected
