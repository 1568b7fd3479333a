"""A one-broker Kafka of the monitor's own, for a single-host install (``monitor run``): the
monitor's topics on a cluster other than the one it watches, with nothing to set up.

KRaft, one node that is broker and controller, from the same Maven jars the project
resolves (:func:`monitor.jars.kafka_classpath`), listening on 127.0.0.1 only, its data,
settings and log under ``<state>/kafka``. Its JVM is started in a session of its own and
known by pid; :meth:`LocalKafka.stop` stops it by that pid (SIGTERM, then SIGKILL). A JVM a
killed ``monitor run`` left behind is recognised by the marker on its command line and
stopped before a new one starts. Its ports are chosen free at its first start and kept.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from monitor import jars

#: The broker's settings that are not where it listens: one node, every internal topic
#: with one replica, no topic created by a client asking for it.
SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
}

LOG4J2 = """\
# Written by monitor run (monitor/run/local_kafka.py): the broker's log, WARN and above.
status = warn
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.filePattern = ${sys:kafka.logs.dir}/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 2
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


def new_cluster_id() -> str:
    """A Kafka cluster id: base64url of a random UUID, as ``kafka-storage random-uuid``
    gives, made here to save a JVM start. Never starting with ``-``: ``StorageTool`` reads
    such an id as a flag and fails the format (one id in 64) -- Kafka's own generator
    avoids them too."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class LocalKafkaError(RuntimeError):
    """The local broker could not be started; the message says why and where its log is."""


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


class LocalKafka:
    """The monitor's own one-broker cluster in ``folder`` (``<state>/kafka``)."""

    def __init__(
        self,
        folder: Path,
        *,
        host: str = "127.0.0.1",
        heap: str = "512m",
        say: Callable[[str], None] = print,
    ) -> None:
        self.folder = folder.resolve()
        self.host = host
        self.heap = heap
        self.say = say
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.controller_port = 0

    # -- where things are -------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def marker(self) -> str:
        """The system property on its command line that says whose JVM it is."""
        return f"-Dkafka-replication-monitor.local-kafka={self.folder}"

    @property
    def log(self) -> Path:
        return self.folder / "logs" / "server.log"

    def _state(self) -> dict[str, object]:
        path = self.folder / "local-kafka.json"
        try:
            loaded: dict[str, object] = json.loads(path.read_text())
            return loaded
        except (OSError, ValueError):
            return {}

    def _save(self, **values: object) -> None:
        path = self.folder / "local-kafka.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**self._state(), **values}, indent=2) + "\n")
        tmp.replace(path)

    # -- lifecycle ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Its folder, a leftover broker of it stopped, and its ports chosen: its address
        is known before it starts (``monitor run`` starts the job meanwhile)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "logs").mkdir(exist_ok=True)
        self._stop_leftover()
        self.port, self.controller_port = self._ports(self._state())

    def start(self, timeout_s: float = 120.0) -> None:
        """Start the broker (formatting its storage the first time) and wait until it
        answers. Raises :class:`LocalKafkaError` naming the step and the log."""
        if not self.port:
            self.prepare()
        try:
            classpath = jars.kafka_classpath()
        except jars.JarError as e:
            raise LocalKafkaError(f"the Kafka broker's jars: {e}") from None
        state = self._state()
        cluster_id = str(state.get("cluster_id") or new_cluster_id())
        properties = self._write_settings()
        if not (self.folder / "data" / "meta.properties").is_file():
            self._format(classpath, cluster_id, properties)
        self._save(cluster_id=cluster_id, port=self.port, controller_port=self.controller_port)
        out = (self.folder / "logs" / "stdout.log").open("ab")
        try:
            self.proc = subprocess.Popen(
                [*self._java(), "-cp", classpath, "kafka.Kafka", str(properties)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.folder,
                start_new_session=True,  # Ctrl-C reaches monitor run, which stops it in turn
            )
        finally:
            out.close()
        self._save(pid=self.proc.pid)
        self._wait_ready(timeout_s)

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL after ``grace_s``; by its pid."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.say(f"local Kafka (pid {proc.pid}) still up {grace_s:g} s after SIGTERM: SIGKILL")
            proc.kill()
            proc.wait(timeout=30)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- steps -------------------------------------------------------------------------------

    def _stop_leftover(self) -> None:
        """A broker of this folder still running (a ``monitor run`` killed without its
        stop): recognised by pid and marker, stopped."""
        pid = self._state().get("pid")
        if not isinstance(pid, int) or self.marker not in _cmdline(pid):
            return
        self.say(f"stopping the local Kafka a previous run left (pid {pid})")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while self.marker in _cmdline(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if self.marker in _cmdline(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _ports(self, state: dict[str, object]) -> tuple[int, int]:
        """The ports of its last start while they are free, else new free ones."""
        port, controller = state.get("port"), state.get("controller_port")
        if (
            isinstance(port, int)
            and isinstance(controller, int)
            and _port_free(self.host, port)
            and _port_free(self.host, controller)
        ):
            return port, controller
        return _free_port(self.host), _free_port(self.host)

    def _write_settings(self) -> Path:
        props = {
            **SETTINGS,
            "listeners": f"PLAINTEXT://{self.host}:{self.port},"
            f"CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "log.dirs": str(self.folder / "data"),
        }
        path = self.folder / "server.properties"
        lines = ["# Written by monitor run (monitor/run/local_kafka.py) at each start"]
        path.write_text("\n".join([*lines, *(f"{k}={v}" for k, v in props.items())]) + "\n")
        (self.folder / "log4j2.properties").write_text(LOG4J2)
        return path

    def _java(self) -> list[str]:
        java = (
            str(Path(os.environ["JAVA_HOME"], "bin", "java"))
            if os.environ.get("JAVA_HOME")
            else "java"
        )
        return [
            java,
            f"-Xmx{self.heap}",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            self.marker,
            f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.folder / 'logs'}",
        ]

    def _format(self, classpath: str, cluster_id: str, properties: Path) -> None:
        self.say(f"formatting the local Kafka's storage in {self.folder / 'data'}")
        cmd = [
            *self._java(), "-cp", classpath, "kafka.tools.StorageTool", "format",
            "--cluster-id", cluster_id, "--config", str(properties),
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
        if done.returncode != 0:
            raise LocalKafkaError(
                f"formatting the local Kafka's storage failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-2000:]}"
            )

    def _wait_ready(self, timeout_s: float) -> None:
        """Until the broker answers a metadata request with itself in it."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalKafkaError(
                    f"the local Kafka exited (code {self.proc.returncode}) while starting: "
                    f"see {self.log} and {self.folder / 'logs' / 'stdout.log'}"
                )
            try:  # listening yet? (a client's connection errors would fill the terminal)
                socket.create_connection((self.host, self.port), timeout=1).close()
            except OSError:
                time.sleep(0.3)
                continue
            try:
                admin = KafkaAdminClient(
                    bootstrap_servers=[self.bootstrap_servers],
                    request_timeout_ms=3000,
                    bootstrap_timeout_ms=3000,
                )
            except KafkaError:
                time.sleep(0.5)
                continue
            try:
                if admin.describe_cluster().get("brokers"):
                    return
            except KafkaError:
                pass
            finally:
                admin.close()
            time.sleep(0.5)
        self.stop()
        raise LocalKafkaError(
            f"the local Kafka did not answer on {self.bootstrap_servers} within {timeout_s:g} s: "
            f"see {self.log}"
        )
