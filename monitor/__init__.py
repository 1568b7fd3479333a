"""Kafka replication monitor.

The pipeline is collect -> transport -> model -> export / alert / query (docs/architecture.md):

- ``monitor.model``: the watermark model, pure Python (no Spark, Kafka, clock or I/O);
- ``monitor.contract``: what the stages exchange -- the event contract (schema version 1),
  a partition's state row and view, the state store's layout;
- ``monitor.collector``: ``monitor collect`` (JMX exporter + Admin API -> events);
- ``monitor.query`` and ``monitor.exporter``: the runbook's side and ``/metrics``;
- ``monitor.commands``: the CLI commands (``monitor --help``);
- ``monitor.dev``: the lab, demo, soak and test helpers (development only).

The Spark job is the sibling package ``streaming``.
"""

from importlib import metadata as _metadata

#: The installed distribution's version (pyproject.toml's), "unknown" from a bare source tree.
try:
    __version__ = _metadata.version("kafka-replication-monitor")
except _metadata.PackageNotFoundError:  # pragma: no cover
    __version__ = "unknown"
