"""Serving the job's ``/metrics``: :meth:`ReplicationCollector.render` through
:class:`monitor.web.WebServer` -- timeouts, bounded connections, and TLS, mutual TLS and basic
auth from a Prometheus web configuration file (the page is not built through
prometheus_client's registry: see :mod:`monitor.exporter.collector`). A response is
gzip-compressed (level 1: a 20 MB page in ~0.1 s) when the scraper accepts it, as Prometheus
does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from monitor.exporter.collector import DEFAULT_MAX_PARTITIONS, PerPartition, ReplicationCollector
from monitor.exporter.snapshot import Snapshot
from monitor.web import CONTENT_TYPE, WebServer

__all__ = ["CONTENT_TYPE", "MetricsServer"]


class MetricsServer:
    """``/metrics`` over HTTP(S). Bind to 127.0.0.1 unless Prometheus scrapes from elsewhere;
    then give a ``web_config_file`` (TLS, basic auth: :mod:`monitor.web.config`).

    ``max_partitions``: partitions with per-partition series, at most (the job's
    ``metrics_max_partitions``).
    """

    def __init__(
        self,
        snapshot: Snapshot,
        host: str = "127.0.0.1",
        port: int = 9478,
        per_partition: PerPartition = "findings",
        max_partitions: int = DEFAULT_MAX_PARTITIONS,
        clock: Callable[[], float] = time.time,
        web_config_file: Path | None = None,
    ) -> None:
        self.collector = ReplicationCollector(
            snapshot, per_partition, clock=clock, max_partitions=max_partitions
        )
        self.host, self.port = host, port
        self.web = WebServer(
            self.collector.render, host, port, web_config_file, name="job /metrics"
        )

    @property
    def bound_port(self) -> int:
        """The port it listens on (``port`` 0 picks a free one)."""
        return self.web.bound_port

    def start(self) -> None:
        self.web.start()

    def stop(self) -> None:
        self.web.stop()
