"""A real 3-node Kafka cluster on 127.0.0.1, run from Maven Central jars: Kafka 4.x in
KRaft mode by default, or any 3.9/4.x version (``kafka_version``), 3.x also in ZooKeeper
mode (``metadata``: one ZooKeeper server, ``<dir>/zookeeper/``, started first, stopped last).

Each node is one JVM running ``kafka.Kafka`` in combined ``broker,controller`` mode, with
the Prometheus JMX exporter as a java agent. The cluster lives in one work folder::

    <dir>/lab.json                 state file: config, cluster id, one pid per node
    <dir>/jmx-exporter.yaml        exporter rules (same for every node)
    <dir>/log4j2.properties        broker logging (one server.log per node)
    <dir>/collector.json           what ``monitor collect --lab DIR`` reads
    <dir>/broker-<n>/server.properties
    <dir>/broker-<n>/data/         log.dirs (and the KRaft metadata log)
    <dir>/broker-<n>/logs/         server.log, stdout.log

:class:`Lab` is the one face of it: start-up, shutdown and the faults. Its parts:
``statefile`` (``lab.json`` and the lock: `up`, `kill 2` and `down` are separate
processes), ``jvm`` (a node's files, storage format and command line), ``nodes`` (the JVMs by
pid, checked against the lab's marker before every signal: nothing is ever killed by name),
``readiness`` (registered and exporting) and ``collector_file``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from monitor import jars
from monitor.dev.lab.collector_file import collector_config, write_collector_config
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.errors import LabError
from monitor.dev.lab.jvm import format_storage, write_configs
from monitor.dev.lab.nodes import NodeInfo, Nodes, NodeStatus
from monitor.dev.lab.ports import ephemeral_ports, ephemeral_range
from monitor.dev.lab.readiness import wait_ready, wait_zookeeper
from monitor.dev.lab.statefile import LabState, NodeState, StateFile
from monitor.run.local_kafka import new_cluster_id

__all__ = [
    "Lab",
    "LabState",
    "NodeInfo",
    "NodeState",
    "NodeStatus",
    "Progress",
]

Progress = Callable[[str], None]

#: In ``down``, how long the last node standing gets once the others have exited. It cannot
#: finish a controlled shutdown and gave up ~5 s later on its own (the others exited within
#: 0.7 s): a 3-broker lab's ``down`` took 6.0 s, now 1.9-2.3 s (docs/lab.md), in every lab
#: test's teardown.
LAST_NODE_GRACE_S = 1.0


def _print_progress(message: str) -> None:
    print(f"[lab] {message}", flush=True)


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
        self._file = StateFile(self.config)
        self._nodes = Nodes(self.config, self._file, self._say)
        # The quorum voters (hence the ports) are baked into a formatted cluster's metadata.
        state = self._file.state
        if state is not None and state.config.base_port != self.config.base_port:
            raise LabError(
                f"{self.config.dir} holds a lab on base port {state.config.base_port}, "
                f"not {self.config.base_port}; use that port, or `lab down --wipe` first"
            )
        # Storage formatted by one version is not for another (4.4 refuses older tools').
        if state is not None and (state.kafka_version, state.config.metadata) != (
            self.config.kafka_version,
            self.config.metadata,
        ):
            raise LabError(
                f"{self.config.dir} holds a Kafka {state.kafka_version} lab "
                f"({state.config.metadata}), not {self.config.kafka_version} "
                f"({self.config.metadata}); `lab down --wipe` first, or another --dir"
            )

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

    def _say(self, message: str) -> None:
        if self._progress is not None:
            self._progress(message)

    # -- what it is ------------------------------------------------------------------------

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
        return self._file.state.cluster_id if self._file.state else None

    def collector_config(self) -> dict[str, object]:
        """A ``monitor collect --config`` file's content for this lab (``collector_file``)."""
        return collector_config(self.config)

    def pid(self, node: int) -> int | None:
        """The pid of ``node``'s JVM if it is running and verifiably ours, else None."""
        return self._nodes.pid(node)

    def node_status(self, node: int) -> NodeStatus:
        return self._nodes.status(node)

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

    def log_tail(self, node: int, lines: int = 40) -> str:
        """Last lines of a node's server.log and stdout.log (for error reports)."""
        return self._nodes.log_tail(node, lines)

    # -- start-up and shutdown ---------------------------------------------------------------

    def up(self, timeout: float | None = None) -> None:
        """Format (first time only) and start every node, then wait until all serve metadata.

        Idempotent: nodes already running are left alone. Raises :class:`LabError` with the
        tail of a node's log if it dies while starting, or on timeout.
        """
        started = time.monotonic()
        cfg = self.config
        paths = jars.resolve([jars.JarSet.KAFKA, jars.JarSet.JMX], kafka_version=cfg.kafka_version)
        assert paths.kafka is not None
        classpath = jars.kafka_classpath(cfg.kafka_version)
        agent = jars.jmx_agent_jar()
        with self._file.locked():
            if self._file.state is not None:
                self._file.state.config = cfg
            else:
                self._file.state = LabState(
                    config=cfg,
                    cluster_id=new_cluster_id(),
                    kafka_version=cfg.kafka_version,
                    jmx_exporter_version=jars.JMX_EXPORTER_VERSION,
                )
            write_configs(cfg)
            self._file.write()
            write_collector_config(cfg)
            format_storage(cfg, self._file.state.cluster_id, classpath, self._say)
        bounds = ephemeral_range()
        exposed = ephemeral_ports([p for n in cfg.node_ids for p in cfg.ports(n)], bounds)
        if exposed:
            self._say(
                f"warning: ports {exposed} are in the kernel's ephemeral range "
                f"{bounds}: an outgoing connection may take a stopped broker's "
                "port and delay its restart; a --base-port below the range avoids it"
            )
        try:
            if cfg.zookeeper:
                self._start_zookeeper(classpath, agent)
            with self._file.locked():
                for node in cfg.node_ids:
                    if self.pid(node) is not None:
                        self._say(f"node {node} already running (pid {self.pid(node)})")
                        continue
                    pid = self._nodes.launch(node, classpath, agent)
                    controller = (
                        "" if cfg.zookeeper else f"controller :{cfg.controller_port(node)}, "
                    )
                    self._say(
                        f"started node {node}: pid {pid}, "
                        f"broker {cfg.host}:{cfg.broker_port(node)}, "
                        f"{controller}jmx {cfg.jmx_url(node)}"
                    )
            self.wait_ready(cfg.node_ids, timeout=timeout or cfg.start_timeout_s)
        except BaseException:
            # Never leave a half-started cluster behind when `up` fails (or is interrupted).
            self.down()
            raise
        self._say(
            f"lab up in {time.monotonic() - started:.1f}s: Kafka {cfg.kafka_version} "
            f"({cfg.metadata}), {self.config.bootstrap_servers}"
        )

    def _start_zookeeper(self, classpath: str, agent: Path) -> None:
        """Start the ZooKeeper server (node 0) unless it runs, and wait until it serves."""
        cfg = self.config
        with self._file.locked():
            if self.pid(0) is None:
                pid = self._nodes.launch(0, classpath, agent)
                self._say(f"started ZooKeeper: pid {pid}, {cfg.host}:{cfg.zookeeper_port}")
        wait_zookeeper(self._nodes, cfg.start_timeout_s)

    def wait_ready(self, nodes: list[int], timeout: float) -> None:
        """Wait until ``nodes`` are registered, unfenced brokers and their exporters answer."""
        wait_ready(self._nodes, nodes, timeout, lambda: self.bootstrap_servers)

    def down(self, timeout: float | None = None) -> None:
        """Stop every node this lab started (and only those). Data is kept for the next `up`.

        All nodes get SIGTERM at once. The last node standing can never finish a controlled
        shutdown (its controller has lost the KRaft quorum, so nobody can acknowledge it),
        so the grace period here is short (``down_timeout_s``) before SIGKILL, and shorter
        for the last node once the others are gone (:data:`LAST_NODE_GRACE_S`); the next
        `up` recovers the logs, which for lab-sized data takes well under a second.
        """
        pids = {n: p for n in self.node_ids if (p := self.pid(n)) is not None}
        if pids:
            self._say(f"stopping brokers {sorted(pids)} (pids {sorted(pids.values())})")
            self._nodes.terminate(
                pids, timeout or self.config.down_timeout_s, last_grace=LAST_NODE_GRACE_S
            )
        if self.config.zookeeper and (zk := self.pid(0)) is not None:
            self._say(f"stopping ZooKeeper (pid {zk})")  # last: the brokers' sessions end
            self._nodes.terminate({0: zk}, timeout or self.config.down_timeout_s)
        self._nodes.reap()
        self._say("lab down")

    # -- faults ------------------------------------------------------------------------------

    def pause(self, node: int) -> None:
        """SIGSTOP: the JVM freezes with sockets open — a hung broker, not a dead one."""
        pid = self._nodes.signal(node, signal.SIGSTOP)
        self._nodes.wait_state(pid, paused=True)
        self._say(f"paused broker {node} (pid {pid})")

    def resume(self, node: int) -> None:
        """SIGCONT a paused broker."""
        pid = self._nodes.signal(node, signal.SIGCONT)
        self._nodes.wait_state(pid, paused=False)
        self._say(f"resumed broker {node} (pid {pid})")

    def kill(self, node: int) -> None:
        """SIGKILL: a crash (no controlled shutdown, unflushed page cache kept by the OS)."""
        pid = self._nodes.signal(node, signal.SIGKILL)
        self._nodes.wait_gone(node, pid, timeout=10.0)
        self._say(f"killed broker {node} (pid {pid})")

    def stop(self, node: int, timeout: float | None = None) -> None:
        """SIGTERM (controlled shutdown); SIGKILL if it has not exited after ``timeout``."""
        pid = self.pid(node)
        if pid is None:
            raise LabError(f"broker {node} is not running")
        self._nodes.terminate({node: pid}, timeout or self.config.stop_timeout_s)
        self._say(f"stopped broker {node} (pid {pid})")

    def start(self, node: int, wait: bool = True, timeout: float | None = None) -> None:
        """Restart a stopped/killed broker with the same configuration."""
        self._nodes.check(node)
        if self.pid(node) is not None:
            raise LabError(f"broker {node} is already running (pid {self.pid(node)})")
        with self._file.locked():
            if self._file.state is None:
                raise LabError("this lab was never started: run `up` first")
            classpath = jars.kafka_classpath(self.config.kafka_version)
            pid = self._nodes.launch(node, classpath, jars.jmx_agent_jar())
        self._say(f"started broker {node} (pid {pid})")
        if wait:
            self.wait_ready([node], timeout=timeout or self.config.start_timeout_s)
            self._say(f"broker {node} registered")
