"""Pick a free, reserved port block for a lab (tests, parallel sessions).

A lab uses nine ports (client, controller and exporter port of three nodes). Two test
sessions on one machine (two developers, or a developer and CI) must not pick the same
block: the second one would fail with "port in use", or worse, talk to the other's
cluster. :func:`reserve_base_port` takes an exclusive ``flock`` on a per-block lock file
(released by the kernel when the process exits, however it exits) and checks that every
port of the block can be bound right now.

Ports inside the kernel's ephemeral range (``net.ipv4.ip_local_port_range``, 32768-60999 by
default) are avoided: while a broker is down, any outgoing connection on the machine may
take its port as a local port, and the restart then fails with "address in use" (seen in
CI: a stopped broker's exporter port held by a client socket in TIME_WAIT for a minute).
:func:`wait_ports_free` rides out such leftovers; a listening socket is a real conflict.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from monitor.dev.lab.config import CONTROLLER_PORT_OFFSET, JMX_PORT_OFFSET, SECURE_PORT_OFFSET
from monitor.dev.lab.errors import LabError


def block_ports(base_port: int, brokers: int = 3, secure: bool = False) -> list[int]:
    """Every port a lab on ``base_port`` binds (``secure``: with the SECURE listener's)."""
    offsets = [0, CONTROLLER_PORT_OFFSET, JMX_PORT_OFFSET]
    if secure:
        offsets.append(SECURE_PORT_OFFSET)
    return [base_port + offset + i for offset in offsets for i in range(brokers)]


def port_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now (the one check the lab uses everywhere)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's ``st`` column


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int] | None:
    """The kernel's range of local ports for outgoing connections; None where unknown."""
    try:
        low, high = (int(x) for x in path.read_text().split())
    except (OSError, ValueError):
        return None
    return low, high


def ephemeral_ports(ports: Iterable[int], bounds: tuple[int, int] | None) -> list[int]:
    """Those of ``ports`` an outgoing connection may take as its local port."""
    if bounds is None:
        return []
    low, high = bounds
    return [p for p in ports if low <= p <= high]


def listening(port: int, tables: Iterable[Path] = _TCP_TABLES) -> bool:
    """Whether a socket *listens* on ``port`` (any address), from ``/proc/net/tcp{,6}``.

    A port can be unbindable without a listener: a closing connection (TIME_WAIT) or an
    outgoing connection's local port. Those go away by themselves; a listener does not.
    """
    for table in tables:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            listens = len(fields) > 3 and fields[3] == _LISTEN
            if listens and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


#: How long a listening socket on a lab port may linger before it is another program's.
LISTENER_GRACE_S = 10.0


def wait_ports_free(
    host: str,
    ports: Iterable[int],
    timeout: float,
    *,
    say: Callable[[str], None] = lambda _msg: None,
    what: str = "",
) -> None:
    """Return once every port can be bound; raise :class:`LabError` for a port a listener
    holds for more than ``LISTENER_GRACE_S`` (another program), or after ``timeout`` for
    one that stays busy.

    Non-listening holders (a connection in TIME_WAIT keeps its port for 60 s on Linux) are
    waited out, so a broker restarted right after it stopped does not fail for them.
    """
    deadline = time.monotonic() + timeout
    told: set[int] = set()
    for port in ports:
        listened_since: float | None = None
        while not port_free(host, port):
            if not listening(port):
                listened_since = None
            elif listened_since is None:
                # A JVM that just exited can still hold its listeners for a moment: Linux
                # shows its main thread as a zombie while other threads finish exiting and
                # the shared file table closes only with the last (found by CI: a restart
                # right after a stop saw the old exporter port listening).
                listened_since = time.monotonic()
            elif time.monotonic() - listened_since > LISTENER_GRACE_S:
                raise LabError(
                    f"port {host}:{port}{what} is already in use by a listening socket; "
                    "choose another --base-port or stop whatever holds it"
                )
            if time.monotonic() > deadline:
                raise LabError(
                    f"port {host}:{port}{what} stayed in use for {timeout:.0f}s "
                    "(held by a connection, not a listener; see `ss -tan`)"
                )
            if port not in told:
                told.add(port)
                held = "a listener (exiting?)" if listened_since else "a closing connection"
                say(f"waiting for port {port}{what}: held by {held}")
            time.sleep(0.2)


def _candidates(first: int, step: int, tries: int, span: int) -> list[int]:
    """Base ports to try: ``first, first+step, ...``, those clear of the ephemeral range
    first, then blocks below ``first`` (clear ones), then the rest."""
    bounds = ephemeral_range()
    upward = [first + k * step for k in range(tries) if first + k * step + span <= 65535]
    downward = [first - k * step for k in range(1, tries) if first - k * step >= 1024]

    def clear(base: int) -> bool:
        return not ephemeral_ports(range(base, base + span + 1), bounds)

    return (
        [b for b in upward if clear(b)]
        + [b for b in downward if clear(b)]
        + [b for b in upward if not clear(b)]
    )


@contextlib.contextmanager
def reserve_base_port(
    first: int,
    *,
    step: int = 1000,
    tries: int = 20,
    brokers: int = 3,
    host: str = "127.0.0.1",
    secure: bool = False,
) -> Iterator[int]:
    """Yield a base port from ``first, first+step, ...`` whose block is free and locked.

    Blocks clear of the kernel's ephemeral range come first (see the module's docstring);
    when none of the ``tries`` upward blocks is, blocks below ``first`` are tried. The lock
    is held until the ``with`` block ends (or the process dies).
    """
    lock_dir = Path(tempfile.gettempdir())
    top = SECURE_PORT_OFFSET if secure else JMX_PORT_OFFSET
    for base in _candidates(first, step, tries, top + brokers - 1):
        handle = (lock_dir / f"monitor-lab-ports-{base}.lock").open("w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        if not all(port_free(host, p) for p in block_ports(base, brokers, secure)):
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
            continue
        try:
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            yield base
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
        return
    raise LabError(f"no free lab port block from {first} in {tries} tries (step {step})")
