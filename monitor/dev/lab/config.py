"""Lab configuration (a validated pydantic model) and the files rendered from it.

The lab is a *fault-injection* cluster, not a production template: a few broker settings
are turned down so that the failures the monitor must see (ISR shrink, fencing, leader
change) happen within seconds instead of the production defaults' tens of seconds. Every
such setting is listed in :data:`LAB_ONLY_SETTINGS` with the reason, and documented in
``docs/lab.md``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from monitor import jars
from monitor.dev.lab import security
from monitor.dev.lab.paths import default_lab_dir

#: Default first broker (client) port; controller ports are +100, JMX exporter ports +200.
DEFAULT_BASE_PORT = 19092
CONTROLLER_PORT_OFFSET = 100
JMX_PORT_OFFSET = 200
#: Port offset of each node's remote JMX (RMI) port, where ``jmx_remote`` opens one.
JMX_REMOTE_PORT_OFFSET = 250
#: Port offset of the extra ``SECURE`` listener of a secured lab.
SECURE_PORT_OFFSET = 300

#: ``plaintext``: the lab as it always was. ``sasl_ssl`` / ``mtls`` / ``oauthbearer``: one
#: more listener per node (``SECURE``, base_port + 300 + n - 1) with SCRAM-SHA-512 over TLS /
#: mutual TLS / OAUTHBEARER (signed JWTs) over TLS; see ``monitor.dev.lab.security`` and
#: docs/lab.md.
LabSecurity = Literal["plaintext", "sasl_ssl", "mtls", "oauthbearer"]

#: Where the cluster keeps its metadata: a KRaft quorum of the nodes themselves, or one
#: ZooKeeper server (Kafka 3.x only; its client port is base_port + 100, where a KRaft
#: lab's first controller listens).
LabMetadata = Literal["kraft", "zookeeper"]

#: Settings only a KRaft node knows; a ZooKeeper-mode broker gets its own instead.
KRAFT_ONLY = (
    "broker.session.timeout.ms",
    "broker.heartbeat.interval.ms",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
)
#: Settings of features newer than Kafka 3.x (share groups, KIP-932).
SINCE_4 = (
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
    "share.coordinator.state.topic.num.partitions",
)
#: ZooKeeper mode's counterpart of the KRaft session settings, with why.
ZOOKEEPER_SETTINGS: dict[str, tuple[str, str]] = {
    "zookeeper.session.timeout.ms": (
        "4000",
        "18 s by default: ZooKeeper expires a dead broker's session (and the controller moves "
        "its leaderships) after 4 s, as broker.session.timeout.ms does under KRaft. The lab's "
        "ZooKeeper runs with tickTime=1000 so that it accepts a session this short.",
    ),
}

_HEAP_RE = re.compile(r"^\d+[kmgKMG]$")

#: Broker settings that differ from Kafka's defaults to make faults show fast, with why.
#: Values may be overridden per lab through ``LabConfig`` fields / ``extra_broker_config``.
LAB_ONLY_SETTINGS: dict[str, tuple[str, str]] = {
    "replica.lag.time.max.ms": (
        "4000",
        "30 s by default: a stalled follower leaves the ISR after ~4-6 s instead of ~30-45 s. "
        "Must stay >= replica.fetch.wait.max.ms (500 ms).",
    ),
    "broker.session.timeout.ms": (
        "4000",
        "9 s by default: the controller fences a dead/paused broker (and elects new leaders "
        "for its partitions) after 4 s.",
    ),
    "broker.heartbeat.interval.ms": (
        "500",
        "2 s by default; must be well below the session timeout above.",
    ),
    "unclean.leader.election.interval.ms": (
        "1000",
        "5 min by default: how often the KRaft controller retries unclean elections for "
        "topics with unclean.leader.election.enable=true.",
    ),
    "offsets.topic.replication.factor": (
        "3",
        "Kafka's default, stated explicitly: consumer offsets survive the loss of a broker.",
    ),
    "offsets.topic.num.partitions": ("6", "50 by default: fewer partitions, faster start."),
    "transaction.state.log.replication.factor": ("3", "as for offsets"),
    "transaction.state.log.min.isr": ("2", "as for offsets"),
    "transaction.state.log.num.partitions": ("6", "50 by default: fewer partitions."),
    "share.coordinator.state.topic.replication.factor": ("3", "as for offsets"),
    "share.coordinator.state.topic.min.isr": ("2", "as for offsets"),
    "share.coordinator.state.topic.num.partitions": ("6", "50 by default: fewer partitions."),
    "group.initial.rebalance.delay.ms": ("0", "3 s by default: consumers start at once."),
    "num.partitions": ("1", "default for topics created without a partition count"),
    "default.replication.factor": ("3", "1 by default: replication is what the lab is about."),
    "min.insync.replicas": ("1", "cluster default; lab topics set their own."),
    "auto.create.topics.enable": (
        "false",
        "a typo'd topic name must fail, not silently create an RF-3 topic.",
    ),
    "auto.leader.rebalance.enable": (
        "false",
        "leadership moves only when a test or `lab preferred-elect` asks, so leader epochs "
        "change only for the reasons a scenario injects.",
    ),
    "controller.quorum.election.timeout.ms": ("1000", "Kafka's default, stated explicitly."),
    "controller.quorum.fetch.timeout.ms": ("2000", "Kafka's default, stated explicitly."),
    "log.retention.check.interval.ms": ("60000", "5 min by default."),
}

Port = Annotated[int, Field(ge=1024, le=65535)]


class LabConfig(BaseModel):
    """How to run one lab cluster. Stored in the state file so other processes reuse it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dir: Path = Field(default_factory=default_lab_dir, description="work folder of the cluster")
    brokers: int = Field(3, ge=1, le=9, description="combined broker+controller nodes")
    base_port: Port = Field(
        DEFAULT_BASE_PORT,
        description="client port of node 1; controller ports are +100, JMX exporter ports +200",
    )
    host: str = Field("127.0.0.1", description="address every listener binds to")
    heap: str = Field("384m", description="-Xmx of each broker JVM")
    elr: bool = Field(
        True,
        description=(
            "eligible.leader.replicas.version=1 at format time (KIP-966; Kafka 4.1's default "
            "for new clusters). Unclean elections still work when the ISR is empty; see "
            "docs/lab.md."
        ),
    )
    start_timeout_s: float = Field(120.0, gt=0, description="how long `up` waits for brokers")
    stop_timeout_s: float = Field(
        20.0, gt=0, description="SIGTERM grace period before SIGKILL in `down`/`stop`"
    )
    down_timeout_s: float = Field(
        8.0, gt=0, description="SIGTERM grace period in `down` (all nodes at once)"
    )
    port_wait_s: float = Field(
        75.0,
        gt=0,
        description="how long a start waits for a port held by a closing connection "
        "(TIME_WAIT lasts 60 s); a listening socket fails at once",
    )
    extra_broker_config: dict[str, str] = Field(
        default_factory=dict, description="server.properties overrides (applied last)"
    )
    class_sharing: bool = Field(
        True,
        description=(
            "share Kafka's parsed classes between broker starts: a JVM class-data sharing "
            "archive per JVM and classpath, written at a broker's first clean stop into "
            "<cache>/cds/ (5.45 -> 3.53 CPU-s a start: bench.lab_start_bench)"
        ),
    )
    jmx_remote: bool = Field(
        False,
        description=(
            "open each node's JMX to 127.0.0.1 on base_port + 250 + n - 1 (no authentication): "
            "for exporters run beside the broker (the exporter's standalone HTTP server)"
        ),
    )
    kafka_version: str = Field(
        jars.KAFKA_VERSION,
        description="the brokers' Kafka version, resolved from Maven Central (3.9.x, 4.x)",
    )
    metadata: LabMetadata = Field(
        "kraft",
        description="kraft, or zookeeper (Kafka 3.x only: one ZooKeeper server beside the "
        "brokers, from the same jars)",
    )
    security: LabSecurity = Field(
        "plaintext",
        description=(
            "plaintext, or an extra SECURE listener (base_port + 300 + n - 1): sasl_ssl "
            "(SCRAM-SHA-512 over TLS), mtls (TLS, client certificates required) or "
            "oauthbearer (OAUTHBEARER over TLS, JWTs signed by the lab's key; Kafka 3.9)"
        ),
    )
    exporter_rules: Path | None = Field(
        None,
        description=(
            "the JMX exporter agent's rules file for every broker (e.g. rules in another "
            "project's style); None: the project's rules, written to <dir>/jmx-exporter.yaml"
        ),
    )

    @field_validator("heap")
    @classmethod
    def _heap_format(cls, value: str) -> str:
        if not _HEAP_RE.match(value):
            raise ValueError(f"heap must look like 384m or 1g, got {value!r}")
        return value

    @field_validator("dir")
    @classmethod
    def _absolute_dir(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("exporter_rules")
    @classmethod
    def _absolute_rules(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser().resolve()

    @model_validator(mode="after")
    def _version_fits(self) -> LabConfig:
        try:
            major = jars.kafka_major(self.kafka_version)
        except jars.JarError as e:
            raise ValueError(str(e)) from None
        if major < 3:
            raise ValueError(f"kafka_version {self.kafka_version}: the lab runs Kafka 3.9 and 4.x")
        if self.metadata == "zookeeper" and major >= 4:
            raise ValueError(
                f"kafka_version {self.kafka_version} has no ZooKeeper mode (removed in 4.0): "
                "use metadata='kraft', or a 3.x version"
            )
        if self.metadata == "zookeeper" and self.secured:
            raise ValueError("a secured lab (security != plaintext) runs in KRaft mode only")
        if self.security == "oauthbearer" and major >= 4:
            raise ValueError(
                f"security oauthbearer runs Kafka 3.9 brokers (kafka_version='3.9.2'), not "
                f"{self.kafka_version}: a Kafka 4 broker reads the lab's JWKS file only if its "
                "JVM lists it in -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls, which the "
                "lab's broker command line does not set"
            )
        return self

    @model_validator(mode="after")
    def _ports_fit(self) -> LabConfig:
        top = self.base_port + JMX_PORT_OFFSET + self.brokers - 1
        if top > 65535:
            raise ValueError(f"base_port {self.base_port} leaves no room for JMX ports (max {top})")
        top = self.base_port + SECURE_PORT_OFFSET + self.brokers - 1
        if self.secured and top > 65535:
            raise ValueError(
                f"base_port {self.base_port} leaves no room for secure ports (max {top})"
            )
        return self

    # -- derived values -------------------------------------------------------------------

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    @property
    def zookeeper(self) -> bool:
        return self.metadata == "zookeeper"

    @property
    def kafka3(self) -> bool:
        """Kafka 3.x: log4j 1 logging, no share groups, no ELR feature to format with."""
        return jars.kafka_major(self.kafka_version) < 4

    @property
    def elr_feature(self) -> str | None:
        """``eligible.leader.replicas.version`` to format with; None where the version has
        no such feature (3.x, which rejects it) or ZooKeeper mode (no format at all)."""
        if self.zookeeper or self.kafka3:
            return None
        return "1" if self.elr else "0"

    @property
    def zookeeper_port(self) -> int:
        """The ZooKeeper server's client port (ZooKeeper mode)."""
        return self.base_port + CONTROLLER_PORT_OFFSET

    @property
    def zookeeper_dir(self) -> Path:
        return self.dir / "zookeeper"

    def broker_port(self, node: int) -> int:
        return self.base_port + node - 1

    def controller_port(self, node: int) -> int:
        return self.base_port + CONTROLLER_PORT_OFFSET + node - 1

    def jmx_port(self, node: int) -> int:
        return self.base_port + JMX_PORT_OFFSET + node - 1

    def jmx_remote_port(self, node: int) -> int:
        """Port of ``node``'s remote JMX (only opened when :attr:`jmx_remote`)."""
        return self.base_port + JMX_REMOTE_PORT_OFFSET + node - 1

    @property
    def secured(self) -> bool:
        return self.security != "plaintext"

    def secure_port(self, node: int) -> int:
        """Port of the ``SECURE`` listener (only bound when :attr:`secured`)."""
        return self.base_port + SECURE_PORT_OFFSET + node - 1

    def ports(self, node: int) -> list[int]:
        """Every port ``node`` binds (node 0: the ZooKeeper server of a ZooKeeper lab)."""
        if node == 0:
            return [self.zookeeper_port]
        ports = [self.broker_port(node), self.jmx_port(node)]
        if not self.zookeeper:
            ports.insert(1, self.controller_port(node))
        if self.jmx_remote:
            ports.append(self.jmx_remote_port(node))
        return [*ports, self.secure_port(node)] if self.secured else ports

    @property
    def secure_bootstrap_servers(self) -> str:
        """Bootstrap servers of the ``SECURE`` listener (a secured lab only)."""
        if not self.secured:
            raise ValueError("this lab has no secured listener (security='plaintext')")
        return ",".join(f"{self.host}:{self.secure_port(n)}" for n in self.node_ids)

    @property
    def security_dir(self) -> Path:
        """CA, certificates, keys and passwords of a secured lab (monitor.dev.lab.security)."""
        return self.dir / "security"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{self.broker_port(n)}" for n in self.node_ids)

    @property
    def quorum_voters(self) -> str:
        return ",".join(f"{n}@{self.host}:{self.controller_port(n)}" for n in self.node_ids)

    def node_dir(self, node: int) -> Path:
        """A broker's folder; node 0 is a ZooKeeper lab's ZooKeeper server."""
        return self.zookeeper_dir if node == 0 else self.dir / f"broker-{node}"

    def data_dir(self, node: int) -> Path:
        return self.node_dir(node) / "data"

    def logs_dir(self, node: int) -> Path:
        return self.node_dir(node) / "logs"

    def properties_path(self, node: int) -> Path:
        name = "zookeeper.properties" if node == 0 else "server.properties"
        return self.node_dir(node) / name

    def server_log(self, node: int) -> Path:
        return self.logs_dir(node) / "server.log"

    def stdout_log(self, node: int) -> Path:
        return self.logs_dir(node) / "stdout.log"

    @property
    def exporter_config_path(self) -> Path:
        return self.dir / "jmx-exporter.yaml"

    @property
    def agent_rules_path(self) -> Path:
        """The rules file the brokers' exporter agent reads: ``exporter_rules``, or the
        project's rules (:attr:`exporter_config_path`)."""
        return self.exporter_rules or self.exporter_config_path

    @property
    def log4j_config_path(self) -> Path:
        """Kafka 4's log4j2 file, or Kafka 3's log4j 1 file."""
        return self.dir / ("log4j.properties" if self.kafka3 else "log4j2.properties")

    @property
    def state_path(self) -> Path:
        return self.dir / "lab.json"

    def jmx_url(self, node: int) -> str:
        return f"http://{self.host}:{self.jmx_port(node)}/metrics"


def broker_properties(config: LabConfig, node: int) -> dict[str, str]:
    """``server.properties`` of one node, as an ordered dict: a combined broker+controller
    under KRaft, a broker registered in ZooKeeper in ZooKeeper mode."""
    host = config.host
    props: dict[str, str]
    if config.zookeeper:
        props = {
            "broker.id": str(node),
            "zookeeper.connect": f"{host}:{config.zookeeper_port}",
            "listeners": f"PLAINTEXT://{host}:{config.broker_port(node)}",
            "advertised.listeners": f"PLAINTEXT://{host}:{config.broker_port(node)}",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
            "log.dirs": str(config.data_dir(node)),
        }
    else:
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node),
            "controller.quorum.voters": config.quorum_voters,
            "listeners": (
                f"PLAINTEXT://{host}:{config.broker_port(node)},"
                f"CONTROLLER://{host}:{config.controller_port(node)}"
            ),
            "advertised.listeners": f"PLAINTEXT://{host}:{config.broker_port(node)}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(config.data_dir(node)),
        }
    left_out = (KRAFT_ONLY if config.zookeeper else ()) + (SINCE_4 if config.kafka3 else ())
    props.update({k: v for k, (v, _why) in LAB_ONLY_SETTINGS.items() if k not in left_out})
    if config.zookeeper:
        props.update({key: value for key, (value, _why) in ZOOKEEPER_SETTINGS.items()})
    if config.secured:
        secure = f"{security.SECURE_LISTENER}://{host}:{config.secure_port(node)}"
        props["listeners"] += f",{secure}"
        props["advertised.listeners"] += f",{secure}"
        props["listener.security.protocol.map"] += (
            f",{security.SECURE_LISTENER}:{security.protocol(config.security)}"
        )
        files = security.files_for(config.dir)
        props.update(security.listener_properties(files, config.security))
        props.update(security.AUTHORIZER)
    props.update(config.extra_broker_config)
    return props


def render_properties(props: dict[str, str]) -> str:
    lines = ["# Generated by monitor.dev.lab: lab-only settings, see docs/lab.md"]
    lines += [f"{key}={value}" for key, value in props.items()]
    return "\n".join(lines) + "\n"


#: Log4j2 configuration for the brokers: everything INFO+ into one rolling ``server.log``
#: per node (``${sys:kafka.logs.dir}`` is set per JVM), request logging off. One file per
#: node is what `up` shows the tail of when a broker dies.
LOG4J2_PROPERTIES = """\
# Generated by monitor.dev.lab
status = warn
name = monitor-lab
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
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = INFO
logger.netty.name = org.apache.kafka.common.network
logger.netty.level = WARN
# ... except the Selector's one INFO line per refused client ("Failed authentication with")
logger.selector.name = org.apache.kafka.common.network.Selector
logger.selector.level = INFO
"""


#: Log4j 1 configuration for Kafka 3.x brokers (reload4j), the same one ``server.log``.
LOG4J1_PROPERTIES = """\
# Generated by monitor.dev.lab
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.common.network=WARN
log4j.logger.org.apache.zookeeper=WARN
"""


def zookeeper_properties(config: LabConfig) -> dict[str, str]:
    """The ZooKeeper server's configuration (standalone: no ``server.N`` lines).

    ``tickTime`` 1000 lets brokers hold 4 s sessions (ZooKeeper clamps a session to
    2-20 ticks); the admin server and every four-letter word but ``srvr`` stay off."""
    return {
        "dataDir": str(config.zookeeper_dir / "data"),
        "clientPort": str(config.zookeeper_port),
        "clientPortAddress": config.host,
        "tickTime": "1000",
        "maxClientCnxns": "0",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "srvr",
    }


def _rule(
    pattern: str,
    name: str,
    help_text: str,
    *,
    kind: str = "GAUGE",
    labels: dict[str, str] | None = None,
) -> dict[str, object]:
    rule: dict[str, object] = {"pattern": pattern, "name": name, "type": kind, "help": help_text}
    if labels:
        rule["labels"] = labels
    return rule


_TP = {"topic": "$1", "partition": "$2"}
_PARTITION_GAUGES = "|".join(
    [
        "UnderReplicated",
        "UnderMinIsr",
        "AtMinIsr",
        "InSyncReplicasCount",
        "ReplicasCount",
        "LastStableOffsetLag",
    ]
)
_RM_METERS = "IsrShrinksPerSec|IsrExpandsPerSec|FailedIsrUpdatesPerSec"
_RM_GAUGES = "|".join(
    [
        "UnderReplicatedPartitions",
        "UnderMinIsrPartitionCount",
        "AtMinIsrPartitionCount",
        "PartitionCount",
        "LeaderCount",
        "OfflineReplicaCount",
        "ReassigningPartitions",
    ]
)
_CONTROLLER_METERS = "UncleanLeaderElectionsPerSec|ElectionFromEligibleLeaderReplicasPerSec"
_RAFT = "current-leader|current-epoch|high-watermark|log-end-offset"

#: Prometheus JMX exporter configuration (rendered as JSON, which is valid YAML).
#: Names are explicit rather than the exporter's automatic mangling so they stay stable
#: across exporter versions; ``lowercaseOutputName`` lowercases the ``$1`` parts.
#: ``includeObjectNames`` limits the MBeans scanned: scraping every Kafka MBean costs far
#: more CPU than a 2-core lab box should spend on it. docs/lab.md lists every name with a
#: sample line.
EXPORTER_CONFIG: dict[str, object] = {
    "startDelaySeconds": 0,
    "lowercaseOutputName": True,
    "lowercaseOutputLabelNames": False,
    "includeObjectNames": [
        "kafka.log:type=Log,*",
        "kafka.server:type=FetcherLagMetrics,*",
        "kafka.cluster:type=Partition,*",
        "kafka.server:type=ReplicaManager,*",
        "kafka.controller:type=KafkaController,*",
        "kafka.controller:type=ControllerStats,*",
        "kafka.server:type=KafkaServer,name=BrokerState",
        "kafka.server:type=raft-metrics,*",
    ],
    "rules": [
        # Per-partition log of *this* broker's replica (leader or follower).
        _rule(
            r"kafka.log<type=Log, name=LogEndOffset, topic=(.+), partition=(\d+)><>Value",
            "kafka_log_log_end_offset",
            "Log end offset of this broker's replica of the partition (next offset to write).",
            labels=_TP,
        ),
        _rule(
            r"kafka.log<type=Log, name=LogStartOffset, topic=(.+), partition=(\d+)><>Value",
            "kafka_log_log_start_offset",
            "Log start offset (low watermark) of this broker's replica.",
            labels=_TP,
        ),
        _rule(
            r"kafka.log<type=Log, name=Size, topic=(.+), partition=(\d+)><>Value",
            "kafka_log_size_bytes",
            "Bytes on disk of this broker's replica.",
            labels=_TP,
        ),
        _rule(
            r"kafka.log<type=Log, name=NumLogSegments, topic=(.+), partition=(\d+)><>Value",
            "kafka_log_segments",
            "Segment count of this broker's replica.",
            labels=_TP,
        ),
        # Follower side: how far this broker's fetcher is behind the leader's LEO.
        _rule(
            r"kafka.server<type=FetcherLagMetrics, name=ConsumerLag, clientId=(.+), "
            r"topic=(.+), partition=(\d+)><>Value",
            "kafka_server_replica_fetcher_lag",
            "Follower lag in offsets (leader LEO - this replica's LEO), seen by this follower.",
            labels={"client_id": "$1", "topic": "$2", "partition": "$3"},
        ),
        # Per-partition state, reported by the partition's leader (0 on followers).
        _rule(
            rf"kafka.cluster<type=Partition, name=({_PARTITION_GAUGES}), topic=(.+), "
            r"partition=(\d+)><>Value",
            "kafka_cluster_partition_$1",
            "kafka.cluster Partition gauge $1 (meaningful on the leader only).",
            labels={"topic": "$2", "partition": "$3"},
        ),
        # Broker-wide replica manager meters (cumulative counts) and gauges.
        _rule(
            rf"kafka.server<type=ReplicaManager, name=({_RM_METERS})><>Count",
            "kafka_server_replica_manager_$1_total",
            "ReplicaManager meter $1 (cumulative count since broker start).",
            kind="COUNTER",
        ),
        _rule(
            rf"kafka.server<type=ReplicaManager, name=({_RM_GAUGES})><>Value",
            "kafka_server_replica_manager_$1",
            "ReplicaManager gauge $1.",
        ),
        # Controller (cluster-wide values come from the active controller only).
        _rule(
            r"kafka.controller<type=KafkaController, name=([^,]+), broker=(\d+)><>Value",
            "kafka_controller_$1",
            "KafkaController per-broker gauge $1 (active controller only).",
            labels={"broker": "$2"},
        ),
        _rule(
            r"kafka.controller<type=KafkaController, name=([^,]+)><>Value",
            "kafka_controller_$1",
            "KafkaController gauge $1 (cluster-wide values come from the active controller).",
        ),
        _rule(
            rf"kafka.controller<type=ControllerStats, name=({_CONTROLLER_METERS})><>Count",
            "kafka_controller_stats_$1_total",
            "ControllerStats meter $1 (cumulative count on the reporting controller).",
            kind="COUNTER",
        ),
        _rule(
            r"kafka.server<type=KafkaServer, name=BrokerState><>Value",
            "kafka_server_broker_state",
            "Broker state (3 = RUNNING).",
        ),
        _rule(
            rf"kafka.server<type=raft-metrics><>({_RAFT})",
            "kafka_raft_$1",
            "KRaft metadata quorum: $1.",
        ),
    ],
}


def exporter_yaml() -> str:
    """The exporter configuration file's text (JSON is a subset of YAML)."""
    return json.dumps(EXPORTER_CONFIG, indent=2) + "\n"
