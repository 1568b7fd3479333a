"""Serving ``/metrics`` on a configurable bind address."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from monitor.exporter.collector import PerPartition, ReplicationCollector
from monitor.exporter.snapshot import Snapshot


class MetricsServer:
    """``/metrics`` over HTTP. Bind to 127.0.0.1 unless Prometheus scrapes from elsewhere."""

    def __init__(
        self,
        snapshot: Snapshot,
        host: str = "127.0.0.1",
        port: int = 9478,
        per_partition: PerPartition = "findings",
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = ReplicationCollector(snapshot, per_partition)
        self.registry.register(self.collector)
        self.host, self.port = host, port
        self._server: Any = None

    def start(self) -> None:
        self._server = start_http_server(self.port, self.host, self.registry)

    def stop(self) -> None:
        if self._server is not None:
            server, thread = self._server
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
            self._server = None
