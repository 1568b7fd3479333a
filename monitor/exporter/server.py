"""Serving ``/metrics`` on a configurable bind address.

A small threaded HTTP server around :meth:`ReplicationCollector.render` (the page is not
built through prometheus_client's registry: see :mod:`monitor.exporter.collector`). A
response is gzip-compressed (level 1: a 20 MB page in ~0.1 s) when the scraper accepts it,
as Prometheus does.
"""

from __future__ import annotations

import gzip
import http.server
import socket
import threading
import time
from collections.abc import Callable

from monitor.exporter.collector import DEFAULT_MAX_PARTITIONS, PerPartition, ReplicationCollector
from monitor.exporter.snapshot import Snapshot

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    render: Callable[[], bytes]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # http.server's naming
        if self.path.split("?", 1)[0] not in ("/metrics", "/"):
            self.send_error(404)
            return
        body = self.server.render()
        gz = "gzip" in (self.headers.get("Accept-Encoding") or "")
        if gz:
            body = gzip.compress(body, compresslevel=1)
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        if gz:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # a scrape every 15 s is not worth a log line


class MetricsServer:
    """``/metrics`` over HTTP. Bind to 127.0.0.1 unless Prometheus scrapes from elsewhere.

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
    ) -> None:
        self.collector = ReplicationCollector(
            snapshot, per_partition, clock=clock, max_partitions=max_partitions
        )
        self.host, self.port = host, port
        self._server: tuple[_Server, threading.Thread] | None = None

    @property
    def bound_port(self) -> int:
        """The port it listens on (``port`` 0 picks a free one)."""
        if self._server is None:
            raise RuntimeError("the metrics server is not started")
        return int(self._server[0].server_address[1])

    def start(self) -> None:
        # The address family of the bind address (an IPv6 host like "::" as well).
        family = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)[0][0]
        server_class = type("_BoundServer", (_Server,), {"address_family": family})
        server = server_class((self.host, self.port), _Handler)
        server.render = self.collector.render
        thread = threading.Thread(target=server.serve_forever, name="exporter-http", daemon=True)
        thread.start()
        self._server = (server, thread)

    def stop(self) -> None:
        if self._server is not None:
            server, thread = self._server
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
            self._server = None
