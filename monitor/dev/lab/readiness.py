"""When a started node is ready: registered as an unfenced broker, its listener and its
exporter answering."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable

from monitor.dev.lab.errors import LabError
from monitor.dev.lab.nodes import Nodes

_log = logging.getLogger(__name__)


def port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def registered_brokers(bootstrap: str) -> set[int]:
    """Ids of unfenced brokers in the cluster's metadata (empty if none reachable)."""
    from monitor.dev.lab.admin import unfenced_brokers

    try:
        return unfenced_brokers(bootstrap, timeout_s=3.0)
    except Exception as exc:  # not up yet: connection refused, timeouts, ...
        _log.debug("metadata not available yet: %s", exc)
        return set()


def wait_ready(
    nodes: Nodes, which: list[int], timeout: float, bootstrap: Callable[[], str]
) -> None:
    """Wait until ``which`` are registered, unfenced brokers, and their listeners and
    exporters answer.

    ``bootstrap`` gives the brokers to ask at each try (those alive at that moment).
    Raises :class:`LabError` with the log tail of a node that exits meanwhile, or on
    timeout with the tails of those not ready."""
    cfg = nodes.config
    deadline = time.monotonic() + timeout
    last_report = 0.0
    seen: set[int] = set()
    while True:
        for node in which:
            if nodes.pid(node) is None:
                raise LabError(
                    f"broker {node} exited while starting; log tail:\n{nodes.log_tail(node)}"
                )
        seen = registered_brokers(bootstrap())
        exporters = {n for n in which if port_open(cfg.host, cfg.jmx_port(n))}
        # The exporter (a JVM agent) listens before the broker does, and a ZooKeeper lab can
        # list a restarted broker under its old session: its own listener must answer too
        # (found by CI: a healed 3.9 ZooKeeper lab was "ready", and the next admin request
        # to broker 2 met ECONNREFUSED).
        listening = {n for n in which if port_open(cfg.host, cfg.broker_port(n))}
        if set(which) <= seen & exporters & listening:
            return
        now = time.monotonic()
        progress = (
            f"registered {sorted(seen)} of {which}, exporters up {sorted(exporters)}, "
            f"listening {sorted(listening)}"
        )
        if now >= deadline:
            waiting = sorted(set(which) - (seen & exporters & listening))
            tails = "\n".join(nodes.log_tail(n, 15) for n in waiting)
            raise LabError(
                f"brokers {waiting} not ready after {timeout:.0f}s ({progress})\n{tails}"
            )
        if now - last_report >= 5:
            nodes.say(f"waiting for brokers: {progress}")
            last_report = now
        time.sleep(0.5)


def zookeeper_serves(host: str, port: int) -> bool:
    """Whether a ZooKeeper server answers ``srvr`` (the one four-letter word it allows)."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as sock:
            sock.sendall(b"srvr")
            return b"Mode:" in sock.recv(4096)
    except OSError:
        return False


def wait_zookeeper(nodes: Nodes, timeout: float) -> None:
    """Wait until the lab's ZooKeeper (node 0) serves; :class:`LabError` with its log tail
    if it exits, or on timeout."""
    cfg = nodes.config
    deadline = time.monotonic() + timeout
    while not zookeeper_serves(cfg.host, cfg.zookeeper_port):
        if nodes.pid(0) is None:
            raise LabError(f"ZooKeeper exited while starting; log tail:\n{nodes.log_tail(0)}")
        if time.monotonic() >= deadline:
            raise LabError(
                f"ZooKeeper not serving on {cfg.host}:{cfg.zookeeper_port} after "
                f"{timeout:.0f}s\n{nodes.log_tail(0)}"
            )
        time.sleep(0.3)
