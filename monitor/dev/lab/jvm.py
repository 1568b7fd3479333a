"""A node's JVM: the files it reads, its storage format and its command line.

Each node is one JVM running ``kafka.Kafka`` (in combined ``broker,controller`` mode under
KRaft), with the Prometheus JMX exporter as a java agent; a ZooKeeper lab has one more JVM,
node 0, running ZooKeeper's ``QuorumPeerMain`` from the same jars. Every command line
carries the lab's marker (``-Dmonitor.lab.node=<dir>#<n>``), by which
:mod:`monitor.dev.lab.nodes` recognises it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from monitor.dev.lab import security
from monitor.dev.lab.config import (
    LOG4J1_PROPERTIES,
    LOG4J2_PROPERTIES,
    LabConfig,
    broker_properties,
    exporter_yaml,
    render_properties,
    zookeeper_properties,
)
from monitor.dev.lab.errors import LabError
from monitor.jars import archive_written, java_identity


def node_marker(config: LabConfig, node: int) -> str:
    """The system property that marks ``node``'s JVM as this lab's."""
    return f"-Dmonitor.lab.node={config.dir}#{node}"


def java_base(config: LabConfig) -> list[str]:
    return [
        "java",
        f"-Xmx{config.heap}",
        "-Xms64m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        "-Djava.net.preferIPv4Stack=true",
    ]


def logging_flags(config: LabConfig, node: int) -> list[str]:
    """Where the JVM's logging setup is (log4j2 for Kafka 4, log4j 1 for 3.x) and where
    its ``server.log`` goes."""
    cfg = config
    where = (
        f"-Dlog4j.configuration=file:{cfg.log4j_config_path}"
        if cfg.kafka3
        else f"-Dlog4j2.configurationFile={cfg.log4j_config_path}"
    )
    return [where, f"-Dkafka.logs.dir={cfg.logs_dir(node)}"]


#: A broker JVM's class-data sharing archive being written at its exit, in its node folder
#: (``class_sharing_flags``), and the file naming where it goes once complete.
PARTIAL_ARCHIVE = "classes.jsa.partial"
ARCHIVE_TARGET = "classes.jsa.target"
ARCHIVE_LOG = "classes.jsa.log"  # "Written dynamic archive" once it is whole


def class_archive(cache: Path, classpath: str, agent: Path) -> Path:
    """Where the class-data sharing archive of brokers run by this ``java`` on this
    classpath with this exporter agent lives (``<cache>/cds/kafka-<fingerprint>.jsa``): the
    archive is only valid for the JVM and classpath it was written by.

    >>> class_archive(Path("/c"), "a.jar:b.jar", Path("agent.jar")).parent
    PosixPath('/c/cds')
    """
    text = f"{java_identity(shutil.which('java'))}\n{classpath}\n{agent}"
    return cache / "cds" / f"kafka-{hashlib.sha256(text.encode()).hexdigest()[:16]}.jsa"


def class_sharing_flags(config: LabConfig, node: int, archive: Path) -> list[str]:
    """The JVM flags that share Kafka's classes between broker starts (5.45 -> 3.53 CPU-s a
    start, ``bench.lab_start_bench``; docs/lab.md). With ``archive`` written: map it. Without: this
    JVM writes one at a clean exit into its node folder, and :func:`keep_class_archive`
    moves it to ``archive`` once the JVM has exited by itself (SIGTERM, not SIGKILL) and
    its log says the archive was written whole (a JVM killed while writing leaves a
    partial file, never used). The exporter is a java agent, which the JVM must be told to
    allow in an archive; a JVM mapping such an archive says so in its stdout.log ("This
    archive was created with AllowArchivingWithJavaAgent...": the lab is a test bed)."""
    unlock = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+AllowArchivingWithJavaAgent"]
    if archive.is_file():
        return [*unlock, f"-XX:SharedArchiveFile={archive}"]
    folder = config.node_dir(node)
    (folder / PARTIAL_ARCHIVE).unlink(missing_ok=True)
    (folder / ARCHIVE_LOG).unlink(missing_ok=True)
    (folder / ARCHIVE_TARGET).write_text(str(archive))
    return [
        *unlock,
        f"-XX:ArchiveClassesAtExit={folder / PARTIAL_ARCHIVE}",
        f"-Xlog:cds+dynamic=info:file={folder / ARCHIVE_LOG}",
    ]


def keep_class_archive(config: LabConfig, node: int, clean_exit: bool) -> Path | None:
    """After ``node``'s JVM is gone: its archive written at exit, moved where later starts
    find it (atomic: another lab may do the same); a partial one dropped."""
    folder = config.node_dir(node)
    partial, target, log = folder / PARTIAL_ARCHIVE, folder / ARCHIVE_TARGET, folder / ARCHIVE_LOG
    kept = None
    if clean_exit and archive_written(log) and target.is_file() and partial.is_file():
        kept = Path(target.read_text().strip())
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial.replace(kept)
    for leftover in (partial, target, log):
        leftover.unlink(missing_ok=True)
    return kept


def broker_command(
    config: LabConfig, node: int, classpath: str, agent: Path, archive: Path | None = None
) -> list[str]:
    """``node``'s command line; ``archive``: its class-data sharing archive (read or
    written: :func:`class_sharing_flags`), none for ZooKeeper."""
    if node == 0:
        return zookeeper_command(config, classpath)
    cfg = config
    return [
        *java_base(cfg),
        *(class_sharing_flags(cfg, node, archive) if archive is not None else []),
        node_marker(cfg, node),
        *logging_flags(cfg, node),
        f"-javaagent:{agent}={cfg.host}:{cfg.jmx_port(node)}:{cfg.agent_rules_path}",
        *(jmx_remote_flags(cfg, node) if cfg.jmx_remote else []),
        "-cp",
        classpath,
        "kafka.Kafka",
        str(cfg.properties_path(node)),
    ]


def zookeeper_command(config: LabConfig, classpath: str) -> list[str]:
    """The ZooKeeper server of a ZooKeeper lab (node 0), standalone, from the broker's jars."""
    cfg = config
    return [
        *java_base(cfg),
        node_marker(cfg, 0),
        *logging_flags(cfg, 0),
        "-cp",
        classpath,
        "org.apache.zookeeper.server.quorum.QuorumPeerMain",
        str(cfg.properties_path(0)),
    ]


def jmx_remote_flags(config: LabConfig, node: int) -> list[str]:
    """Remote JMX on one port (registry and connector), bound to the lab's host, no
    authentication: a lab on 127.0.0.1 only."""
    port = config.jmx_remote_port(node)
    return [
        f"-Dcom.sun.management.jmxremote.port={port}",
        f"-Dcom.sun.management.jmxremote.rmi.port={port}",
        f"-Dcom.sun.management.jmxremote.host={config.host}",
        f"-Djava.rmi.server.hostname={config.host}",
        "-Dcom.sun.management.jmxremote.authenticate=false",
        "-Dcom.sun.management.jmxremote.ssl=false",
    ]


def write_configs(config: LabConfig) -> None:
    """The exporter rules, the logging setup, a secured lab's material and every node's
    folders and ``server.properties``."""
    cfg = config
    cfg.dir.mkdir(parents=True, exist_ok=True)
    cfg.exporter_config_path.write_text(exporter_yaml())
    if cfg.exporter_rules is not None and not cfg.exporter_rules.is_file():
        raise LabError(f"exporter_rules: no such file {cfg.exporter_rules}")
    cfg.log4j_config_path.write_text(LOG4J1_PROPERTIES if cfg.kafka3 else LOG4J2_PROPERTIES)
    if cfg.zookeeper:
        (cfg.zookeeper_dir / "data").mkdir(parents=True, exist_ok=True)
        cfg.logs_dir(0).mkdir(parents=True, exist_ok=True)
        zk = "\n".join(f"{k}={v}" for k, v in zookeeper_properties(cfg).items())
        cfg.properties_path(0).write_text(f"# Generated by monitor.dev.lab\n{zk}\n")
    if cfg.secured:
        security.ensure_material(cfg.dir, cfg.host, scram=cfg.security == "sasl_ssl")
    for node in cfg.node_ids:
        cfg.data_dir(node).mkdir(parents=True, exist_ok=True)
        cfg.logs_dir(node).mkdir(parents=True, exist_ok=True)
        cfg.properties_path(node).write_text(render_properties(broker_properties(cfg, node)))


def is_formatted(config: LabConfig, node: int) -> bool:
    return (config.data_dir(node) / "meta.properties").is_file()


def format_storage(
    config: LabConfig, cluster_id: str, classpath: str, say: Callable[[str], None]
) -> None:
    """Run ``kafka.tools.StorageTool format`` for every unformatted node, in parallel
    (KRaft only: a ZooKeeper-mode broker writes its own ``meta.properties``)."""
    cfg = config
    todo = [n for n in cfg.node_ids if not is_formatted(cfg, n)]
    if not todo or cfg.zookeeper:
        return
    elr = cfg.elr_feature
    features = [] if elr is None else ["--feature", f"eligible.leader.replicas.version={elr}"]
    say(
        f"formatting storage of nodes {todo} (Kafka {cfg.kafka_version}, cluster id "
        f"{cluster_id}{'' if elr is None else f', eligible.leader.replicas.version={elr}'})"
    )
    procs: dict[int, subprocess.Popen[bytes]] = {}
    for node in todo:
        cmd = [
            *java_base(cfg),
            *logging_flags(cfg, node),
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            cluster_id,
            "--config",
            str(cfg.properties_path(node)),
            *features,
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
            f"--- node {n} ---\n{tail(cfg.logs_dir(n) / 'format.log')}" for n in failed
        )
        raise LabError(f"storage format failed for nodes {failed}:\n{details}")


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` of a log (read from its last 64 KiB)."""
    if not path.is_file():
        return f"(no {path.name})"
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - 64 * 1024))
        text = handle.read().decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])
