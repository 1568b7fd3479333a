"""A real 3-node Kafka 4.x KRaft cluster on 127.0.0.1, run from Maven Central jars.

Each node is one JVM running ``kafka.Kafka`` in combined ``broker,controller`` mode, with
the Prometheus JMX exporter as a java agent. The cluster lives in one work folder::

    <dir>/lab.json                 state file: config, cluster id, one pid per node
    <dir>/jmx-exporter.yaml        exporter rules (same for every node)
    <dir>/log4j2.properties        broker logging (one server.log per node)
    <dir>/broker-<n>/server.properties
    <dir>/broker-<n>/data/         log.dirs (and the KRaft metadata log)
    <dir>/broker-<n>/logs/         server.log, stdout.log

Why a state file and pid checks: `up`, `kill 2` and `down` are separate processes (CLI
calls, a pytest session), so the pids must be on disk; and because a pid can be reused by
the OS after a broker exits, every signal is sent only after checking that the pid's
command line still carries this lab's marker (``-Dmonitor.lab.node=<dir>#<n>``). Nothing
is ever killed by name.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType

from pydantic import BaseModel, Field

from monitor import jars
from monitor.dev.lab import security
from monitor.dev.lab.config import (
    LOG4J2_PROPERTIES,
    LabConfig,
    broker_properties,
    exporter_yaml,
    render_properties,
)
from monitor.dev.lab.errors import LabError
from monitor.dev.lab.ports import ephemeral_ports, ephemeral_range, wait_ports_free

Progress = Callable[[str], None]

_log = logging.getLogger(__name__)


def _print_progress(message: str) -> None:
    print(f"[lab] {message}", flush=True)


class NodeState(BaseModel):
    """What the state file remembers about one node."""

    node: int
    pid: int | None = None
    started_at: float | None = None


class LabState(BaseModel):
    """The state file (``<dir>/lab.json``)."""

    config: LabConfig
    cluster_id: str
    kafka_version: str
    jmx_exporter_version: str
    nodes: dict[int, NodeState] = Field(default_factory=dict)


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


def new_cluster_id() -> str:
    """A Kafka cluster id (base64url of a random UUID, as ``kafka-storage random-uuid``).

    Generated here rather than by running ``StorageTool random-uuid`` to save one JVM
    start (~1-2 s on a 2-core box). Kafka's own generator avoids ids starting with ``-``
    (they look like command-line flags); so does this one.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _proc_state(pid: int) -> str | None:
    """The one-letter state from /proc/<pid>/stat (R, S, T, Z ...), or None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) is in parentheses and may contain spaces.
    return stat.rsplit(")", 1)[1].split()[0]


def _proc_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _tail(path: Path, lines: int = 40) -> str:
    if not path.is_file():
        return f"(no {path.name})"
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - 64 * 1024))
        text = handle.read().decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


class Lab:
    """Start, stop and break a local KRaft cluster.

    ``Lab(LabConfig(dir=..., base_port=...))`` describes a cluster; :meth:`up` formats (on
    first use) and starts it; :meth:`load` re-attaches to one started by another process.
    Used as a context manager it always calls :meth:`down` on exit.
    """

    def __init__(
        self,
        config: LabConfig | None = None,
        *,
        progress: Progress | None = _print_progress,
    ) -> None:
        self.config = config or LabConfig()
        self._progress = progress
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._state: LabState | None = self._read_state()
        # The quorum voters (hence the ports) are baked into a formatted cluster's metadata.
        if self._state is not None and self._state.config.base_port != self.config.base_port:
            raise LabError(
                f"{self.config.dir} holds a lab on base port {self._state.config.base_port}, "
                f"not {self.config.base_port}; use that port, or `lab down --wipe` first"
            )

    # -- construction helpers -------------------------------------------------------------

    @classmethod
    def load(cls, dir: Path | str, *, progress: Progress | None = _print_progress) -> Lab:
        """Attach to the lab whose state file is in ``dir`` (started by any process)."""
        path = Path(dir).expanduser().resolve() / "lab.json"
        if not path.is_file():
            raise LabError(f"no lab state file at {path}: run `monitor lab up` first")
        state = LabState.model_validate_json(path.read_text())
        return cls(state.config, progress=progress)

    def __enter__(self) -> Lab:
        self.up()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()

    # -- public properties ---------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the brokers that are running and not paused right now.

        Deliberately dynamic: kafka-python's bootstrap picks one address and waits for it;
        a SIGSTOPped broker accepts the TCP connection (the kernel does that) but never
        answers, so a client that happens to pick it stalls until its request timeout
        and can fail to bootstrap at all. Falls back to every broker when none is alive.
        ``config.bootstrap_servers`` is the static list of all three.
        """
        alive = [n for n in self.node_ids if self.node_status(n) is NodeStatus.ALIVE]
        nodes = alive or self.node_ids
        return ",".join(f"{self.config.host}:{self.config.broker_port(n)}" for n in nodes)

    @property
    def jmx_urls(self) -> dict[int, str]:
        """Prometheus scrape URL of each node's JMX exporter, by node (= broker) id."""
        return {n: self.config.jmx_url(n) for n in self.config.node_ids}

    @property
    def node_ids(self) -> list[int]:
        return self.config.node_ids

    @property
    def cluster_id(self) -> str | None:
        return self._state.cluster_id if self._state else None

    # -- state file ----------------------------------------------------------------------

    def _read_state(self) -> LabState | None:
        path = self.config.state_path
        if not path.is_file():
            return None
        return LabState.model_validate_json(path.read_text())

    def _write_state(self) -> None:
        assert self._state is not None
        path = self.config.state_path
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(self._state.model_dump_json(indent=2))
        tmp.replace(path)

    def collector_config(self) -> dict[str, object]:
        """A ``monitor collect --config`` file's content for this lab: every broker, its
        exporters, and on a secured lab its ``SECURE`` listener with secrets as files."""
        cfg = self.config
        kafka: dict[str, object] = {"bootstrap_servers": cfg.bootstrap_servers}
        if cfg.secured:
            kafka = security.kafka_settings(cfg.dir, cfg.security, cfg.secure_bootstrap_servers)
        return {
            "cluster": "lab",
            "kafka": kafka,
            "jmx_urls": {str(n): url for n, url in self.jmx_urls.items()},
        }

    def _write_collector_config(self) -> None:
        """``<dir>/collector.json``: what ``monitor collect --lab DIR`` reads."""
        path = self.config.dir / "collector.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.collector_config(), indent=2) + "\n")
        tmp.replace(path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise state changes between processes acting on the same lab folder."""
        self.config.dir.mkdir(parents=True, exist_ok=True)
        with (self.config.dir / "lab.lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                self._state = self._read_state() or self._state
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _say(self, message: str) -> None:
        if self._progress is not None:
            self._progress(message)

    # -- process inspection ----------------------------------------------------------------

    def _marker(self, node: int) -> str:
        return f"-Dmonitor.lab.node={self.config.dir}#{node}"

    def pid(self, node: int) -> int | None:
        """The pid of ``node``'s JVM if it is running and verifiably ours, else None."""
        self._check_node(node)
        self._reap()
        state = self._read_state() or self._state
        if state is None:
            return None
        entry = state.nodes.get(node)
        if entry is None or entry.pid is None:
            return None
        proc = _proc_state(entry.pid)
        if proc is None or proc in ("Z", "X"):
            return None
        if self._marker(node) not in _proc_cmdline(entry.pid):
            return None
        return entry.pid

    def node_status(self, node: int) -> NodeStatus:
        pid = self.pid(node)
        if pid is None:
            return NodeStatus.STOPPED
        return NodeStatus.PAUSED if _proc_state(pid) in ("T", "t") else NodeStatus.ALIVE

    def status(self) -> list[NodeInfo]:
        return [
            NodeInfo(
                node=n,
                pid=self.pid(n),
                status=self.node_status(n),
                broker_port=self.config.broker_port(n),
                controller_port=self.config.controller_port(n),
                jmx_port=self.config.jmx_port(n),
            )
            for n in self.node_ids
        ]

    def _reap(self) -> None:
        """Collect exit statuses of JVMs this process started (no zombies left behind)."""
        for node, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[node]

    def _check_node(self, node: int) -> None:
        if node not in self.config.node_ids:
            raise LabError(f"no broker {node} in this lab (brokers: {self.config.node_ids})")

    def log_tail(self, node: int, lines: int = 40) -> str:
        """Last lines of a node's server.log and stdout.log (for error reports)."""
        return (
            f"--- {self.config.server_log(node)} ---\n{_tail(self.config.server_log(node), lines)}"
            f"\n--- {self.config.stdout_log(node)} ---\n"
            f"{_tail(self.config.stdout_log(node), lines // 2)}"
        )

    # -- start-up ----------------------------------------------------------------------------

    def _java_base(self) -> list[str]:
        return [
            "java",
            f"-Xmx{self.config.heap}",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            "-Djava.net.preferIPv4Stack=true",
        ]

    def _broker_command(self, node: int, classpath: str, agent: Path) -> list[str]:
        cfg = self.config
        return [
            *self._java_base(),
            self._marker(node),
            f"-Dlog4j2.configurationFile={cfg.log4j_config_path}",
            f"-Dkafka.logs.dir={cfg.logs_dir(node)}",
            f"-javaagent:{agent}={cfg.host}:{cfg.jmx_port(node)}:{cfg.exporter_config_path}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(cfg.properties_path(node)),
        ]

    def _write_configs(self) -> None:
        cfg = self.config
        cfg.dir.mkdir(parents=True, exist_ok=True)
        cfg.exporter_config_path.write_text(exporter_yaml())
        cfg.log4j_config_path.write_text(LOG4J2_PROPERTIES)
        if cfg.secured:
            security.ensure_material(cfg.dir, cfg.host, scram=cfg.security == "sasl_ssl")
        for node in cfg.node_ids:
            cfg.data_dir(node).mkdir(parents=True, exist_ok=True)
            cfg.logs_dir(node).mkdir(parents=True, exist_ok=True)
            cfg.properties_path(node).write_text(render_properties(broker_properties(cfg, node)))

    def _is_formatted(self, node: int) -> bool:
        return (self.config.data_dir(node) / "meta.properties").is_file()

    def _format(self, cluster_id: str, classpath: str) -> None:
        """Run ``kafka.tools.StorageTool format`` for every unformatted node, in parallel."""
        cfg = self.config
        todo = [n for n in cfg.node_ids if not self._is_formatted(n)]
        if not todo:
            return
        elr = "1" if cfg.elr else "0"
        self._say(
            f"formatting storage of nodes {todo} (cluster id {cluster_id}, "
            f"eligible.leader.replicas.version={elr})"
        )
        procs: dict[int, subprocess.Popen[bytes]] = {}
        for node in todo:
            cmd = [
                *self._java_base(),
                f"-Dlog4j2.configurationFile={cfg.log4j_config_path}",
                f"-Dkafka.logs.dir={cfg.logs_dir(node)}",
                "-cp",
                classpath,
                "kafka.tools.StorageTool",
                "format",
                "--cluster-id",
                cluster_id,
                "--config",
                str(cfg.properties_path(node)),
                "--feature",
                f"eligible.leader.replicas.version={elr}",
            ]
            if cfg.security == "sasl_ssl":
                files = security.files_for(cfg.dir)
                password = files.read(files.scram_password)
                cmd += ["--add-scram", security.scram_format_argument(password)]
            log = cfg.logs_dir(node) / "format.log"
            with log.open("wb") as out:
                procs[node] = subprocess.Popen(
                    cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
        failed = []
        for node, proc in procs.items():
            if proc.wait(timeout=120) != 0:
                failed.append(node)
        if failed:
            details = "\n".join(
                f"--- node {n} ---\n{_tail(cfg.logs_dir(n) / 'format.log')}" for n in failed
            )
            raise LabError(f"storage format failed for nodes {failed}:\n{details}")

    def _launch(self, node: int, classpath: str, agent: Path) -> int:
        cfg = self.config
        wait_ports_free(
            cfg.host, cfg.ports(node), cfg.port_wait_s, say=self._say, what=f" (node {node})"
        )
        stdout = cfg.stdout_log(node).open("ab")
        try:
            child = subprocess.Popen(
                self._broker_command(node, classpath, agent),
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
        while self._marker(node) not in _proc_cmdline(child.pid):
            if child.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self._children[node] = child
        assert self._state is not None
        self._state.nodes[node] = NodeState(node=node, pid=child.pid, started_at=time.time())
        self._write_state()
        return child.pid

    def up(self, timeout: float | None = None) -> None:
        """Format (first time only) and start every node, then wait until all serve metadata.

        Idempotent: nodes already running are left alone. Raises :class:`LabError` with the
        tail of a node's log if it dies while starting, or on timeout.
        """
        started = time.monotonic()
        cfg = self.config
        paths = jars.resolve([jars.JarSet.KAFKA, jars.JarSet.JMX])
        assert paths.kafka is not None
        classpath = jars.kafka_classpath()
        agent = jars.jmx_agent_jar()
        with self._locked():
            if self._state is not None:
                self._state.config = cfg
            else:
                self._state = LabState(
                    config=cfg,
                    cluster_id=new_cluster_id(),
                    kafka_version=jars.KAFKA_VERSION,
                    jmx_exporter_version=jars.JMX_EXPORTER_VERSION,
                )
            self._write_configs()
            self._write_state()
            self._write_collector_config()
            self._format(self._state.cluster_id, classpath)
        bounds = ephemeral_range()
        exposed = ephemeral_ports([p for n in cfg.node_ids for p in cfg.ports(n)], bounds)
        if exposed:
            self._say(
                f"warning: ports {exposed} are in the kernel's ephemeral range "
                f"{bounds}: an outgoing connection may take a stopped broker's "
                "port and delay its restart; a --base-port below the range avoids it"
            )
        try:
            with self._locked():
                for node in cfg.node_ids:
                    if self.pid(node) is not None:
                        self._say(f"node {node} already running (pid {self.pid(node)})")
                        continue
                    pid = self._launch(node, classpath, agent)
                    self._say(
                        f"started node {node}: pid {pid}, "
                        f"broker {cfg.host}:{cfg.broker_port(node)}, "
                        f"controller :{cfg.controller_port(node)}, jmx {cfg.jmx_url(node)}"
                    )
            self.wait_ready(cfg.node_ids, timeout=timeout or cfg.start_timeout_s)
        except BaseException:
            # Never leave a half-started cluster behind when `up` fails (or is interrupted).
            self.down()
            raise
        self._say(f"lab up in {time.monotonic() - started:.1f}s: {self.config.bootstrap_servers}")

    def wait_ready(self, nodes: list[int], timeout: float) -> None:
        """Wait until ``nodes`` are registered, unfenced brokers and their exporters answer."""
        deadline = time.monotonic() + timeout
        last_report = 0.0
        seen: set[int] = set()
        while True:
            for node in nodes:
                if self.pid(node) is None:
                    raise LabError(
                        f"broker {node} exited while starting; log tail:\n{self.log_tail(node)}"
                    )
            seen = self._registered_brokers()
            exporters = {n for n in nodes if _port_open(self.config.host, self.config.jmx_port(n))}
            if set(nodes) <= seen and set(nodes) <= exporters:
                return
            now = time.monotonic()
            if now >= deadline:
                waiting = sorted(set(nodes) - seen)
                tails = "\n".join(self.log_tail(n, 15) for n in waiting)
                raise LabError(
                    f"brokers {waiting} not ready after {timeout:.0f}s "
                    f"(registered: {sorted(seen)})\n{tails}"
                )
            if now - last_report >= 5:
                self._say(
                    f"waiting for brokers: registered {sorted(seen)} of {nodes}, "
                    f"exporters up {sorted(exporters)}"
                )
                last_report = now
            time.sleep(0.5)

    def _registered_brokers(self) -> set[int]:
        """Ids of unfenced brokers in the cluster's metadata (empty if none reachable)."""
        from monitor.dev.lab.admin import unfenced_brokers

        try:
            return unfenced_brokers(self.bootstrap_servers, timeout_s=3.0)
        except Exception as exc:  # not up yet: connection refused, timeouts, ...
            _log.debug("metadata not available yet: %s", exc)
            return set()

    # -- faults ------------------------------------------------------------------------------

    def _signal(self, node: int, sig: signal.Signals) -> int:
        pid = self.pid(node)
        if pid is None:
            raise LabError(f"broker {node} is not running")
        os.kill(pid, sig)
        return pid

    def _wait_state(self, pid: int, paused: bool, timeout: float = 5.0) -> None:
        """Signals to a many-threaded JVM land asynchronously: wait until /proc agrees."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = _proc_state(pid)
            if state is None or (state in ("T", "t")) == paused:
                return
            time.sleep(0.02)
        raise LabError(f"pid {pid} did not become {'stopped' if paused else 'running'}")

    def pause(self, node: int) -> None:
        """SIGSTOP: the JVM freezes with sockets open — a hung broker, not a dead one."""
        pid = self._signal(node, signal.SIGSTOP)
        self._wait_state(pid, paused=True)
        self._say(f"paused broker {node} (pid {pid})")

    def resume(self, node: int) -> None:
        """SIGCONT a paused broker."""
        pid = self._signal(node, signal.SIGCONT)
        self._wait_state(pid, paused=False)
        self._say(f"resumed broker {node} (pid {pid})")

    def kill(self, node: int) -> None:
        """SIGKILL: a crash (no controlled shutdown, unflushed page cache kept by the OS)."""
        pid = self._signal(node, signal.SIGKILL)
        self._wait_gone(node, pid, timeout=10.0)
        self._say(f"killed broker {node} (pid {pid})")

    def stop(self, node: int, timeout: float | None = None) -> None:
        """SIGTERM (controlled shutdown); SIGKILL if it has not exited after ``timeout``."""
        pid = self.pid(node)
        if pid is None:
            raise LabError(f"broker {node} is not running")
        self._terminate({node: pid}, timeout or self.config.stop_timeout_s)
        self._say(f"stopped broker {node} (pid {pid})")

    def start(self, node: int, wait: bool = True, timeout: float | None = None) -> None:
        """Restart a stopped/killed broker with the same configuration."""
        self._check_node(node)
        if self.pid(node) is not None:
            raise LabError(f"broker {node} is already running (pid {self.pid(node)})")
        with self._locked():
            if self._state is None:
                raise LabError("this lab was never started: run `up` first")
            pid = self._launch(node, jars.kafka_classpath(), jars.jmx_agent_jar())
        self._say(f"started broker {node} (pid {pid})")
        if wait:
            self.wait_ready([node], timeout=timeout or self.config.start_timeout_s)
            self._say(f"broker {node} registered")

    def _wait_gone(self, node: int, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            child = self._children.get(node)
            if child is not None and child.pid == pid:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=0.2)
            if self.pid(node) != pid:
                return True
            time.sleep(0.1)
        return self.pid(node) != pid

    def _terminate(self, pids: dict[int, int], timeout: float) -> None:
        """SIGCONT + SIGTERM every pid, wait, then SIGKILL the stragglers."""
        for node, pid in pids.items():
            if self.pid(node) == pid:
                os.kill(pid, signal.SIGCONT)  # a stopped JVM cannot act on SIGTERM
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node, pid in pids.items():
            if not self._wait_gone(node, pid, max(0.1, deadline - time.monotonic())):
                self._say(f"broker {node} (pid {pid}) ignored SIGTERM for {timeout:.0f}s: SIGKILL")
                if self.pid(node) == pid:
                    os.kill(pid, signal.SIGKILL)
                if not self._wait_gone(node, pid, 10.0):
                    raise LabError(f"broker {node} (pid {pid}) survived SIGKILL")

    def down(self, timeout: float | None = None) -> None:
        """Stop every node this lab started (and only those). Data is kept for the next `up`.

        All nodes get SIGTERM at once. The last node standing can never finish a controlled
        shutdown (its controller has lost the KRaft quorum, so nobody can acknowledge it),
        so the grace period here is short (``down_timeout_s``) before SIGKILL; the next
        `up` recovers the logs, which for lab-sized data takes well under a second.
        """
        pids = {n: p for n in self.node_ids if (p := self.pid(n)) is not None}
        if pids:
            self._say(f"stopping brokers {sorted(pids)} (pids {sorted(pids.values())})")
            self._terminate(pids, timeout or self.config.down_timeout_s)
        self._reap()
        self._say("lab down")
