"""Reading a broker's JMX exporter endpoint (Prometheus text format).

Only the few metric families the collector needs are parsed, line by line: a broker with
10,000 replicas exposes tens of thousands of series and the generic parser would spend
most of a collection round on ones we drop. Metric names are those of the exporter
configuration this project ships (``deploy/jmx-exporter/kafka-replication.yaml``, the
same rules the lab uses); they are settings in case a site's exporter differs.
"""

from __future__ import annotations

import re
import urllib.request
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class JmxNames(BaseModel):
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
