"""What the guarded ``/metrics`` server costs a scrape, beside the server it replaced.

    python -m bench.web_server_bench [--page-mb 20] [--scrapes 8] [--half-open 500]

One page of ``--page-mb`` MB of text (``name{labels} value`` lines), served in turn, each
scraped ``--scrapes`` times by one client on 127.0.0.1 (a new connection each, as after a
restart; connect to last byte; gzip accepted, as Prometheus does):

* ``before`` -- the server ``/metrics`` had until issue 51: the standard library's
  ``ThreadingHTTPServer``, a thread per connection, no deadlines;
* ``plain`` -- :class:`monitor.web.WebServer` without a web configuration;
* ``tls+auth`` -- the same with TLS and a bcrypt basic-auth user (cost 10; the first
  request checks it, the rest hit the cache as Prometheus's do: each server is scraped
  once to warm up, printed apart for tls+auth);
* ``plain, flooded`` -- ``plain`` while ``--half-open`` connections sit half-sent.

Printed: the median and the worst scrape per server, and each median over ``before``'s
(the ratio travels between hosts; the absolute times do not). Then the threads each server
held with ``--half-open`` connections open (one per connection before, a fixed few now), and
the tracebacks each logged when those clients left (the stock server prints one per client).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import http.server
import logging
import socket
import ssl
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import bcrypt

from monitor.dev.pki import make_pki
from monitor.web import WebServer


def _page(mb: float) -> bytes:
    line = b'kafka_replication_partition_high_watermark{cluster="c",partition="%d"} 1234567\n'
    out, i, size = [], 0, 0
    while size < mb * 1e6:
        chunk = line % i
        out.append(chunk)
        size += len(chunk)
        i += 1
    return b"".join(out)


class _Tracebacks(logging.Handler):
    """Counts the log records that carry a traceback (the new server's, if any)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.count += 1


class _Before:
    """The server of monitor/exporter/server.py at ee441cf (issue 50), as it was."""

    def __init__(self, render: Callable[[], bytes]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = render()
                gz = "gzip" in (self.headers.get("Accept-Encoding") or "")
                if gz:
                    body = gzip.compress(body, compresslevel=1)
                self.send_response(200)
                if gz:
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        outer = self

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                # The stock one prints the traceback to stderr; counted here instead.
                outer.tracebacks += 1

        self.tracebacks = 0
        server = Server(("127.0.0.1", 0), Handler)
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, daemon=True)
        self.thread.start()
        self.bound_port = server.server_address[1]
        self.scheme = "http"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _scrape(url: str, ctx: ssl.SSLContext | None, auth: str | None) -> float:
    headers = {"Accept-Encoding": "gzip"}
    if auth:
        headers["Authorization"] = auth
    t0 = time.perf_counter()
    with urllib.request.urlopen(
        urllib.request.Request(url, headers=headers), timeout=60, context=ctx
    ) as r:
        r.read()
    return time.perf_counter() - t0


def _half_open(port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /metrics HTTP/1.1\r\n")
        out.append(s)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--page-mb", type=float, default=20.0)
    ap.add_argument("--scrapes", type=int, default=8)
    ap.add_argument("--half-open", type=int, default=500)
    args = ap.parse_args()
    page = _page(args.page_mb)
    render = lambda: page  # noqa: E731
    tmp = Path(tempfile.mkdtemp(prefix="web-bench-"))
    pki = make_pki(tmp / "pki")
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(10)).decode()
    web = tmp / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    client_tls = ssl.create_default_context(cafile=str(pki.ca))
    auth = "Basic " + base64.b64encode(b"prometheus:pw").decode()

    print(f"page {len(page) / 1e6:.1f} MB, {args.scrapes} scrapes each, in turn, gzip accepted")
    times: dict[str, list[float]] = {}
    threads: dict[str, int] = {}
    tracebacks: dict[str, int] = {}
    logged = _Tracebacks()
    logging.getLogger().addHandler(logged)
    kinds = ["before", "plain", "tls+auth", "plain, flooded"]
    servers: dict[str, _Before | WebServer] = {}
    for kind in kinds:
        if kind == "before":
            servers[kind] = _Before(render)
        else:
            guarded = WebServer(render, "127.0.0.1", 0, web if kind == "tls+auth" else None)
            guarded.start()
            servers[kind] = guarded
    first_tls = 0.0
    server: _Before | WebServer
    try:
        for _round in range(args.scrapes + 1):
            for kind, server in servers.items():
                flood = _half_open(server.bound_port, args.half_open) if "flooded" in kind else []
                try:
                    url = f"{server.scheme}://127.0.0.1:{server.bound_port}/metrics"
                    tls = kind == "tls+auth"
                    took = _scrape(url, client_tls if tls else None, auth if tls else None)
                    if _round == 0:  # a warm-up; tls+auth's checks the bcrypt hash
                        first_tls = took if tls else first_tls
                        continue
                    times.setdefault(kind, []).append(took)
                finally:
                    for s in flood:
                        s.close()
        for kind in ("before", "plain"):
            server = servers[kind]
            base = threading.active_count()
            before_logged = logged.count
            held = _half_open(server.bound_port, args.half_open)
            time.sleep(0.5)
            threads[kind] = threading.active_count() - base
            for s in held:
                s.close()
            time.sleep(1.0)  # the servers see the clients leave
            own = server.tracebacks if isinstance(server, _Before) else 0
            tracebacks[kind] = own + logged.count - before_logged
    finally:
        for server in servers.values():
            server.stop()
    base_median = statistics.median(times["before"])
    print(f"{'server':<16} {'median ms':>10} {'worst ms':>10} {'x before':>9}")
    for kind in kinds:
        med = statistics.median(times[kind])
        print(
            f"{kind:<16} {med * 1e3:>10.1f} {max(times[kind]) * 1e3:>10.1f} "
            f"{med / base_median:>9.2f}"
        )
    print(f"tls+auth's first scrape (the bcrypt check, cost 10): {first_tls * 1e3:.1f} ms")
    for kind, n in threads.items():
        print(f"threads added by {args.half_open} half-open connections, {kind}: {n}")
    for kind, n in tracebacks.items():
        print(f"tracebacks when those {args.half_open} clients left, {kind}: {n}")


if __name__ == "__main__":
    main()
