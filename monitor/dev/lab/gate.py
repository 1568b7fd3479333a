"""A gate in front of a TCP endpoint: a lab fault for "this exporter does not answer".

A broker busy taking over leadership, a garbage-collection pause in the exporter's JVM
thread, a scrape that times out: the collector then has no sample of that broker for the
round. :class:`EndpointGate` listens on its own 127.0.0.1 port and forwards every
connection to the real endpoint; :meth:`block` makes it accept connections and hold them
unanswered (the client times out, as with a hung exporter) until :meth:`open` -- held
connections are then closed, and new ones forwarded again. Point the collector at
:attr:`url` instead of the exporter's own.

Only 127.0.0.1, only for the lab and its tests; plain threads, one per connection.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class EndpointGate:
    """Forward 127.0.0.1:``port`` to ``target`` (``host:port`` or an ``http://`` URL)."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target if "//" in target else f"//{target}")
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"gate target {target!r}: give host:port or a URL with a port")
        self._target_url = parts
        self.target = (parts.hostname, parts.port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._blocked = threading.Event()
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        #: Connections refused an answer while blocked (what the test can assert on).
        self.held_total = 0
        self._thread = threading.Thread(target=self._accept, daemon=True, name="gate")
        self._thread.start()

    @property
    def url(self) -> str:
        """The target's URL with the gate's port in place of its own."""
        p = self._target_url
        return urlunsplit((p.scheme or "http", f"127.0.0.1:{self.port}", p.path, p.query, ""))

    def block(self) -> None:
        """From now on, hold connections unanswered."""
        self._blocked.set()

    def open(self) -> None:
        """Forward again; close the connections held meanwhile."""
        self._blocked.clear()
        with self._lock:
            held, self._held = self._held, []
        for s in held:
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._closed = True
        self.open()
        with contextlib.suppress(OSError):
            self._listener.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> EndpointGate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------------------

    def _accept(self) -> None:
        self._listener.settimeout(0.2)  # to notice close(): a closed socket does not wake it
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            if self._blocked.is_set():
                with self._lock:
                    self._held.append(conn)
                    self.held_total += 1
                continue
            threading.Thread(target=self._forward, args=(conn,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        done = threading.Event()

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while chunk := src.recv(65536):
                    dst.sendall(chunk)
            except OSError:
                pass
            finally:
                done.set()
                for s in (src, dst):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        pump(client, upstream)
        done.wait(timeout=10)
        for s in (client, upstream):
            with contextlib.suppress(OSError):
                s.close()
