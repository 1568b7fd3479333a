"""The nodes' JVMs, known by pid: launched, found, signalled and stopped.

A pid can be reused by the OS after a broker exits, so every signal is sent only after
checking that the pid's command line still carries this lab's marker
(``-Dmonitor.lab.node=<dir>#<n>``, :func:`monitor.dev.lab.jvm.node_marker`). Nothing is
ever killed by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from monitor import jars
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.errors import LabError
from monitor.dev.lab.jvm import (
    broker_command,
    class_archive,
    keep_class_archive,
    node_marker,
    tail,
)
from monitor.dev.lab.ports import wait_ports_free
from monitor.dev.lab.statefile import NodeState, StateFile


class NodeStatus(StrEnum):
    ALIVE = "alive"
    PAUSED = "paused"
    STOPPED = "stopped"


@dataclass(frozen=True)
class NodeInfo:
    """One row of ``lab status``."""

    node: int
    pid: int | None
    status: NodeStatus
    broker_port: int
    controller_port: int
    jmx_port: int


def proc_state(pid: int) -> str | None:
    """The one-letter state from /proc/<pid>/stat (R, S, T, Z ...), or None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) is in parentheses and may contain spaces.
    return stat.rsplit(")", 1)[1].split()[0]


def proc_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


class Nodes:
    """The JVMs of one lab's nodes, by the pids its state file holds."""

    def __init__(self, config: LabConfig, file: StateFile, say: Callable[[str], None]) -> None:
        self.config = config
        self.file = file
        self.say = say
        self.children: dict[int, subprocess.Popen[bytes]] = {}

    # -- inspection ------------------------------------------------------------------------

    def check(self, node: int) -> None:
        if node == 0 and self.config.zookeeper:
            return  # the ZooKeeper server
        if node not in self.config.node_ids:
            raise LabError(f"no broker {node} in this lab (brokers: {self.config.node_ids})")

    def pid(self, node: int) -> int | None:
        """The pid of ``node``'s JVM if it is running and verifiably ours, else None."""
        self.check(node)
        self.reap()
        state = self.file.current()
        if state is None:
            return None
        entry = state.nodes.get(node)
        if entry is None or entry.pid is None:
            return None
        proc = proc_state(entry.pid)
        if proc is None or proc in ("Z", "X"):
            return None
        if node_marker(self.config, node) not in proc_cmdline(entry.pid):
            return None
        return entry.pid

    def status(self, node: int) -> NodeStatus:
        pid = self.pid(node)
        if pid is None:
            return NodeStatus.STOPPED
        return NodeStatus.PAUSED if proc_state(pid) in ("T", "t") else NodeStatus.ALIVE

    def reap(self) -> None:
        """Collect exit statuses of JVMs this process started (no zombies left behind)."""
        for node, child in list(self.children.items()):
            if child.poll() is not None:
                del self.children[node]

    def log_tail(self, node: int, lines: int = 40) -> str:
        """Last lines of a node's server.log and stdout.log (for error reports)."""
        cfg = self.config
        return (
            f"--- {cfg.server_log(node)} ---\n{tail(cfg.server_log(node), lines)}"
            f"\n--- {cfg.stdout_log(node)} ---\n"
            f"{tail(cfg.stdout_log(node), lines // 2)}"
        )

    # -- launching -------------------------------------------------------------------------

    def launch(self, node: int, classpath: str, agent: Path) -> int:
        """Start ``node``'s JVM in a session of its own and record its pid (under the lock)."""
        cfg = self.config
        wait_ports_free(
            cfg.host, cfg.ports(node), cfg.port_wait_s, say=self.say, what=f" (node {node})"
        )
        stdout = cfg.stdout_log(node).open("ab")
        try:
            child = subprocess.Popen(
                broker_command(
                    cfg,
                    node,
                    classpath,
                    agent,
                    class_archive(jars.cache_root(), classpath, agent)
                    if cfg.class_sharing
                    else None,
                ),
                stdout=stdout,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cfg.node_dir(node),
                # Own session: Ctrl-C on the CLI that started the lab must not kill it.
                start_new_session=True,
            )
        finally:
            stdout.close()
        # Until exec() completes, /proc/<pid>/cmdline is still this Python process's, so
        # pid() would not find the node marker and report the node as exited. On a loaded
        # machine that window is long enough for wait_ready() to hit it: wait it out.
        deadline = time.monotonic() + 10
        while node_marker(cfg, node) not in proc_cmdline(child.pid):
            if child.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.children[node] = child
        assert self.file.state is not None
        self.file.state.nodes[node] = NodeState(node=node, pid=child.pid, started_at=time.time())
        self.file.write()
        return child.pid

    # -- signals ---------------------------------------------------------------------------

    def signal(self, node: int, sig: signal.Signals) -> int:
        pid = self.pid(node)
        if pid is None:
            raise LabError(f"broker {node} is not running")
        os.kill(pid, sig)
        return pid

    def wait_state(self, pid: int, paused: bool, timeout: float = 5.0) -> None:
        """Signals to a many-threaded JVM land asynchronously: wait until /proc agrees."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = proc_state(pid)
            if state is None or (state in ("T", "t")) == paused:
                return
            time.sleep(0.02)
        raise LabError(f"pid {pid} did not become {'stopped' if paused else 'running'}")

    def wait_gone(self, node: int, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            child = self.children.get(node)
            if child is not None and child.pid == pid:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=0.2)
            if self.pid(node) != pid:
                return True
            time.sleep(0.1)
        return self.pid(node) != pid

    def terminate(
        self, pids: dict[int, int], timeout: float, last_grace: float | None = None
    ) -> None:
        """SIGCONT + SIGTERM every pid, wait up to ``timeout``, then SIGKILL the stragglers.

        ``last_grace``: once all but one have exited, the last gets at most that much longer
        (``Lab.down``: :data:`monitor.dev.lab.cluster.LAST_NODE_GRACE_S` says why)."""
        for node, pid in pids.items():
            if self.pid(node) == pid:
                os.kill(pid, signal.SIGCONT)  # a stopped JVM cannot act on SIGTERM
                os.kill(pid, signal.SIGTERM)
        started = time.monotonic()
        deadline = started + timeout
        if last_grace is not None and len(pids) > 1:
            while time.monotonic() < deadline:
                left = [n for n, p in pids.items() if self.pid(n) == p]
                if len(left) <= 1:
                    if left:
                        deadline = min(deadline, time.monotonic() + last_grace)
                    break
                time.sleep(0.1)
        for node, pid in pids.items():
            clean = self.wait_gone(node, pid, max(0.1, deadline - time.monotonic()))
            if not clean:
                waited = time.monotonic() - started
                self.say(f"broker {node} (pid {pid}) still up {waited:.1f}s after SIGTERM: SIGKILL")
                if self.pid(node) == pid:
                    os.kill(pid, signal.SIGKILL)
                if not self.wait_gone(node, pid, 10.0):
                    raise LabError(f"broker {node} (pid {pid}) survived SIGKILL")
            if node != 0 and keep_class_archive(self.config, node, clean) is not None:
                self.say(f"broker {node} wrote the brokers' class-data sharing archive")
