"""JMX exporter configurations written here in the style of the ones fleets already run, and
the exporter's standalone HTTP server running them beside the lab's brokers.

* ``strimzi`` -- in the style of Strimzi's example Kafka metrics configuration: generic
  rules, names lower-cased, ``kafka_<domain>_<type>_<name>``; meters counted as
  ``..._<name without PerSec>_total`` counters; the fetcher's client id label ``clientId``;
  extra MBean keys become labels.
* ``confluent`` -- in the style of Confluent's jmx-monitoring-stacks: names and label names
  lower-cased (``clientid``); meters' ``Count`` untyped under the name with ``persec``.

Both keep ``includeObjectNames`` narrow (the styles scrape every MBean; the names do not
change). Two exporter agents cannot share one JVM -- each registers its build info in the
one default registry and the second exits the JVM (tried with 1.0.1, the newest agent on
Maven Central) -- so each style runs as the exporter's standalone HTTP server
(``jmx_prometheus_httpserver``, the same collector in standalone mode) reading the broker's
remote JMX (``LabConfig.jmx_remote``). Standalone exporters have no process metrics:
``process_start_time_seconds`` is the one field their pages lack.

:data:`BROAD_RULES` are the same styles as operators run them: agent configuration files
(``exporter_rules/*.yaml``) with no ``includeObjectNames``, every MBean of the JVM walked
and tried against dozens of generic patterns -- for a broker's own agent
(``LabConfig.exporter_rules``): the stranger's-cluster test runs the Strimzi style, and
``bench.exporter_pages_bench`` times both.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from monitor.dev.lab.cluster import Lab
from monitor.dev.processes.prom import free_port
from monitor.jars import jmx_httpserver_jar

#: Broad rules in each style, as agent configuration files (no includeObjectNames).
BROAD_RULES: dict[str, Path] = {
    style: Path(__file__).parent / "exporter_rules" / f"{style}-style.yaml"
    for style in ("strimzi", "confluent")
}

#: The MBeans the collector reads (docs/collector.md "JMX exporter profiles").
INCLUDE = [
    "kafka.log:type=Log,name=LogEndOffset,*",
    "kafka.log:type=Log,name=LogStartOffset,*",
    "kafka.server:type=FetcherLagMetrics,name=ConsumerLag,*",
    "kafka.server:type=ReplicaManager,*",
    "kafka.controller:type=KafkaController,name=ActiveControllerCount",
    "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec",
]

#: Both styles give the fetchers' per-partition lag a rule of its own (its three keys).
_FETCHER_RULE = {
    "pattern": (
        r"kafka.server<type=(.+), name=(.+), clientId=(.+), topic=(.+), partition=(.*)><>Value"
    ),
    "name": "kafka_server_$1_$2",
    "type": "GAUGE",
    "labels": {"clientId": "$3", "topic": "$4", "partition": "$5"},
}

STYLES: dict[str, dict[str, object]] = {
    "strimzi": {
        "lowercaseOutputName": True,
        "includeObjectNames": INCLUDE,
        "rules": [
            _FETCHER_RULE,
            {
                "pattern": r"kafka.(\w+)<type=(.+), name=(.+)PerSec\w*><>Count",
                "name": "kafka_$1_$2_$3_total",
                "type": "COUNTER",
            },
            {
                "pattern": r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Value",
                "name": "kafka_$1_$2_$3",
                "type": "GAUGE",
                "labels": {"$4": "$5", "$6": "$7"},
            },
            {
                "pattern": r"kafka.(\w+)<type=(.+), name=(.+)><>Value",
                "name": "kafka_$1_$2_$3",
                "type": "GAUGE",
            },
        ],
    },
    "confluent": {
        "lowercaseOutputName": True,
        "lowercaseOutputLabelNames": True,
        "includeObjectNames": INCLUDE,
        "rules": [
            _FETCHER_RULE,
            {
                "pattern": r"kafka.(\w+)<type=(.+), name=(.+), topic=(.+), partition=(.+)><>Value",
                "name": "kafka_$1_$2_$3",
                "type": "GAUGE",
                "labels": {"topic": "$4", "partition": "$5"},
            },
            {
                "pattern": r"kafka.(\w+)<type=(.+), name=(.+)><>(Count|Value)",
                "name": "kafka_$1_$2_$3",
            },
        ],
    },
}


@contextmanager
def standalone_exporters(lab: Lab, style: str, work: Path) -> Iterator[dict[int, str]]:
    """One standalone exporter in ``style`` per broker of ``lab`` (which must have
    ``jmx_remote``); yields their ``/metrics`` URLs by broker, stops them by pid."""
    jar = jmx_httpserver_jar()
    procs: list[subprocess.Popen[bytes]] = []
    urls: dict[int, str] = {}
    try:
        for node in lab.node_ids:
            config = work / f"{style}-{node}.yaml"
            host_port = f"{lab.config.host}:{lab.config.jmx_remote_port(node)}"
            config.write_text(json.dumps({"hostPort": host_port, **STYLES[style]}, indent=2))
            port = free_port()
            log = (work / f"{style}-{node}.log").open("wb")
            cmd = ["java", "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-jar"]
            cmd += [str(jar), f"127.0.0.1:{port}", str(config)]
            procs.append(
                subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            )
            log.close()  # the exporter has its own copy
            urls[node] = f"http://127.0.0.1:{port}/metrics"
        for node, url in urls.items():
            _wait_page(url, work / f"{style}-{node}.log")
        yield urls
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)


def _wait_page(url: str, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if b"kafka_" in resp.read():
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, (
            f"exporter {url} gave no Kafka metric: {log.read_text()[-2000:]}"
        )
        time.sleep(0.5)
