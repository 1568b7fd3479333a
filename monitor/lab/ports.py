"""Pick a free, reserved port block for a lab (tests, parallel sessions).

A lab uses nine ports (client, controller and exporter port of three nodes). Two test
sessions on one machine (two developers, or a developer and CI) must not pick the same
block: the second one would fail with "port in use", or worse, talk to the other's
cluster. :func:`reserve_base_port` takes an exclusive ``flock`` on a per-block lock file
(released by the kernel when the process exits, however it exits) and checks that every
port of the block can be bound right now.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from monitor.lab.config import CONTROLLER_PORT_OFFSET, JMX_PORT_OFFSET, SECURE_PORT_OFFSET
from monitor.lab.errors import LabError


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

    The lock is held until the ``with`` block ends (or the process dies).
    """
    lock_dir = Path(tempfile.gettempdir())
    for attempt in range(tries):
        base = first + attempt * step
        top = SECURE_PORT_OFFSET if secure else JMX_PORT_OFFSET
        if base + top + brokers - 1 > 65535:
            break
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
