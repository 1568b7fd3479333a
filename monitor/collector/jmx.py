"""Reading a broker's JMX exporter endpoint (Prometheus text format).

Only the few metric families the collector needs are parsed, line by line: a broker with
10,000 replicas exposes tens of thousands of series and the generic parser would spend
most of a collection round on ones we drop.

Sites name these metrics as their exporter rules say. :data:`PROFILES` holds the names of
three styles of rules (the collector's ``jmx_profile``; ``auto`` detects one from a broker's
page with :func:`detect`), and any name can be set (``jmx_names``):

* ``monitor`` -- this project's rules (``monitor/assets/jmx-exporter/kafka-replication.yaml``, the
  lab's): only the MBeans read here;
* ``strimzi`` -- the style of Strimzi's example Kafka metrics configuration: lower-cased
  ``kafka_<domain>_<type>_<name>``, meters as counters without ``PerSec``
  (``kafka_server_replicamanager_isrshrinks_total``), the fetcher's label ``clientId``;
* ``confluent`` -- the style of Confluent's jmx-monitoring-stacks: the same names, but
  meters untyped and keeping ``persec`` (``kafka_server_replicamanager_isrshrinkspersec``),
  label names lower-cased (``clientid``).

The MBeans behind each field are listed in ``docs/collector.md`` ("JMX exporter profiles").
"""

from __future__ import annotations

import re
import urllib.request
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class JmxNames(BaseModel):
    """The exported metric name of each MBean the collector reads (defaults: ``monitor``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    log_end_offset: str = "kafka_log_log_end_offset"
    log_start_offset: str = "kafka_log_log_start_offset"
    fetcher_lag: str = "kafka_server_replica_fetcher_lag"
    isr_shrinks: str = "kafka_server_replica_manager_isrshrinkspersec_total"
    isr_expands: str = "kafka_server_replica_manager_isrexpandspersec_total"
    under_replicated: str = "kafka_server_replica_manager_underreplicatedpartitions"
    active_controller: str = "kafka_controller_activecontrollercount"
    unclean_elections: str = "kafka_controller_stats_uncleanleaderelectionspersec_total"
    #: The JVM's start (the agent's standard process metrics): tells a restart that
    #: happened between two scrapes, which the counters alone cannot.
    process_start: str = "process_start_time_seconds"


_STRIMZI = JmxNames(
    log_end_offset="kafka_log_log_logendoffset",
    log_start_offset="kafka_log_log_logstartoffset",
    fetcher_lag="kafka_server_fetcherlagmetrics_consumerlag",
    isr_shrinks="kafka_server_replicamanager_isrshrinks_total",
    isr_expands="kafka_server_replicamanager_isrexpands_total",
    under_replicated="kafka_server_replicamanager_underreplicatedpartitions",
    active_controller="kafka_controller_kafkacontroller_activecontrollercount",
    unclean_elections="kafka_controller_controllerstats_uncleanleaderelections_total",
)
PROFILES: dict[str, JmxNames] = {
    "monitor": JmxNames(),
    "strimzi": _STRIMZI,
    # The same names but for the meters: untyped, ``persec`` kept, no ``_total``.
    "confluent": _STRIMZI.model_copy(
        update={
            "isr_shrinks": "kafka_server_replicamanager_isrshrinkspersec",
            "isr_expands": "kafka_server_replicamanager_isrexpandspersec",
            "unclean_elections": "kafka_controller_controllerstats_uncleanleaderelectionspersec",
        }
    ),
}

#: The fetcher-lag series' client id label, as each style spells it.
_CLIENT_LABELS = ("client_id", "clientId", "clientid")
#: A fetcher whose lag is not a follower's: while ``kafka-reassign-partitions`` moves a
#: replica between a broker's log directories, ConsumerLag is also published for the same
#: partition by this thread.
_NOT_A_FOLLOWER = "ReplicaAlterLogDirsThread"


def metric_names(text: str) -> set[str]:
    """The metric names on an exposition-format page."""
    names = set()
    for line in text.splitlines():
        if line and line[0] != "#":
            brace = line.find("{")
            names.add(line[:brace] if brace > 0 else line.split(" ", 1)[0])
    return names


def detect(text: str) -> str | None:
    """The profile whose names a broker's page carries most of (None: none of any).

    >>> detect("kafka_server_replicamanager_isrshrinkspersec 0.0\\n")
    'confluent'
    >>> detect("jvm_threads_current 40.0\\n") is None
    True
    """
    present = metric_names(text)
    best, score = None, 0
    for name, names in PROFILES.items():
        n = len(present & set(names.model_dump().values()) - {names.process_start})
        if n > score:
            best, score = name, n
    return best


def profile_for(text: str, configured: str) -> str | None:
    """The profile to read a page with: ``configured``, or for ``"auto"`` the one
    :func:`detect` finds on it (None: none)."""
    return detect(text) if configured == "auto" else configured


def missing(text: str, names: JmxNames) -> list[str]:
    """The fields of ``names`` whose metric is not on the page (``process_start`` included)."""
    present = metric_names(text)
    return [field for field, name in names.model_dump().items() if name not in present]


@dataclass
class BrokerScrape:
    """What one broker said about its own replicas and itself."""

    leo: dict[tuple[str, int], int] = field(default_factory=dict)
    log_start: dict[tuple[str, int], int] = field(default_factory=dict)
    fetch_lag: dict[tuple[str, int], int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    #: When the broker's JVM started, ms since the epoch (None: not exported).
    started_at: int | None = None


def fetch(url: str, timeout_s: float) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        body: bytes = resp.read()
    return body.decode("utf-8", errors="replace")


def parse(text: str, names: JmxNames) -> BrokerScrape:
    """Pick the needed series out of an exposition-format page."""
    out = BrokerScrape()
    per_partition = {
        names.log_end_offset: out.leo,
        names.log_start_offset: out.log_start,
        names.fetcher_lag: out.fetch_lag,
    }
    scalars = {
        names.isr_shrinks: "isr_shrinks_total",
        names.isr_expands: "isr_expands_total",
        names.under_replicated: "under_replicated_partitions",
        names.active_controller: "active_controller",
        names.unclean_elections: "unclean_elections_total",
    }
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        space = line.rfind(" ")
        name = line[:brace] if brace > 0 else line[:space]
        target = per_partition.get(name)
        if target is not None and brace > 0:
            labels = dict(_LABEL.findall(line[brace : line.rfind("}")]))
            if target is out.fetch_lag and any(
                labels.get(c, "").startswith(_NOT_A_FOLLOWER) for c in _CLIENT_LABELS
            ):
                continue
            try:
                target[(labels["topic"], int(labels["partition"]))] = int(float(line[space + 1 :]))
            except (KeyError, ValueError):
                continue
        elif name in scalars:
            try:
                out.counters[scalars[name]] = int(float(line[space + 1 :]))
            except ValueError:
                continue
        elif name == names.process_start:
            try:
                out.started_at = round(float(line[space + 1 :]) * 1000)
            except ValueError:
                continue
    return out
