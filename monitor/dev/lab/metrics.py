"""Read the lab brokers' JMX exporter endpoints (Prometheus text format).

The exporter is the only place a *follower's* log end offset is visible: Kafka's admin
APIs report offsets from the leader only (ListOffsets) and DescribeLogDirs reports sizes,
not offsets. Scenarios therefore read ``kafka_log_log_end_offset`` per broker here.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from monitor.dev.lab.errors import LabError


@dataclass(frozen=True)
class MetricSample:
    """One sample of an exporter's page: a Prometheus series (name, labels) and its value.

    Not :class:`monitor.query.sources.Sample` (one point of a partition's history)."""

    name: str
    labels: dict[str, str]
    value: float


def scrape(url: str, timeout_s: float = 5.0) -> list[MetricSample]:
    """All samples served at ``url`` (one HTTP GET)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            text = response.read().decode()
    except OSError as exc:
        raise LabError(f"cannot scrape {url}: {exc}") from exc
    out: list[MetricSample] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.append(MetricSample(sample.name, dict(sample.labels), float(sample.value)))
    return out


def partition_value(
    samples: list[MetricSample], name: str, topic: str, partition: int
) -> float | None:
    """The value of per-partition series ``name`` for ``topic``/``partition``, if present."""
    for sample in samples:
        if (
            sample.name == name
            and sample.labels.get("topic") == topic
            and sample.labels.get("partition") == str(partition)
        ):
            return sample.value
    return None


def log_end_offset(url: str, topic: str, partition: int) -> int | None:
    """This broker's replica LEO for the partition (None if it hosts no replica)."""
    value = partition_value(scrape(url), "kafka_log_log_end_offset", topic, partition)
    return None if value is None else int(value)
