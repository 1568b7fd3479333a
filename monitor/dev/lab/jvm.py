"""A node's JVM: the files it reads, its storage format and its command line.

Each node is one JVM running ``kafka.Kafka`` in combined ``broker,controller`` mode, with
the Prometheus JMX exporter as a java agent; its command line carries the lab's marker
(``-Dmonitor.lab.node=<dir>#<n>``), by which :mod:`monitor.dev.lab.nodes` recognises it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from monitor.dev.lab import security
from monitor.dev.lab.config import (
    LOG4J2_PROPERTIES,
    LabConfig,
    broker_properties,
    exporter_yaml,
    render_properties,
)
from monitor.dev.lab.errors import LabError


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


def broker_command(config: LabConfig, node: int, classpath: str, agent: Path) -> list[str]:
    cfg = config
    return [
        *java_base(cfg),
        node_marker(cfg, node),
        f"-Dlog4j2.configurationFile={cfg.log4j_config_path}",
        f"-Dkafka.logs.dir={cfg.logs_dir(node)}",
        f"-javaagent:{agent}={cfg.host}:{cfg.jmx_port(node)}:{cfg.exporter_config_path}",
        *(jmx_remote_flags(cfg, node) if cfg.jmx_remote else []),
        "-cp",
        classpath,
        "kafka.Kafka",
        str(cfg.properties_path(node)),
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
    cfg.log4j_config_path.write_text(LOG4J2_PROPERTIES)
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
    """Run ``kafka.tools.StorageTool format`` for every unformatted node, in parallel."""
    cfg = config
    todo = [n for n in cfg.node_ids if not is_formatted(cfg, n)]
    if not todo:
        return
    elr = "1" if cfg.elr else "0"
    say(
        f"formatting storage of nodes {todo} (cluster id {cluster_id}, "
        f"eligible.leader.replicas.version={elr})"
    )
    procs: dict[int, subprocess.Popen[bytes]] = {}
    for node in todo:
        cmd = [
            *java_base(cfg),
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
