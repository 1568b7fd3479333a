"""Prometheus exporter: metric families built from a :class:`Snapshot` at scrape time."""

from monitor.exporter.collector import ReplicationCollector
from monitor.exporter.server import MetricsServer
from monitor.exporter.snapshot import Health, Snapshot

__all__ = ["Health", "MetricsServer", "ReplicationCollector", "Snapshot"]
