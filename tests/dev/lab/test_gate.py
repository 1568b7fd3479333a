"""The lab's endpoint gate against a real HTTP server on 127.0.0.1: it forwards, it holds
connections unanswered while blocked (the client times out), and it forwards again."""

from __future__ import annotations

import http.server
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from monitor.dev.lab.gate import EndpointGate


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # http.server's name
        body = b"kafka_server_up 1\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/metrics"
    finally:
        srv.shutdown()
        srv.server_close()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=1.0) as resp:
        return bytes(resp.read())


def test_forwards_blocks_and_opens_again(server: str) -> None:
    with EndpointGate(server) as gate:
        assert gate.url.endswith(f":{gate.port}/metrics") and gate.url != server
        assert _get(gate.url) == b"kafka_server_up 1\n"
        gate.block()
        with pytest.raises(OSError):  # TimeoutError or URLError(timeout): nothing answered
            _get(gate.url)
        assert gate.held_total == 1
        gate.open()
        assert _get(gate.url) == b"kafka_server_up 1\n"
        assert _get(server) == b"kafka_server_up 1\n"  # the endpoint itself never blocked


def test_a_target_without_a_port_is_named() -> None:
    with pytest.raises(ValueError, match="gate target 'localhost'"):
        EndpointGate("localhost")
