"""The HTTP(S) server of both ``/metrics`` (the job's and the collector's).

Built for a port that may face more than Prometheus:

- **Every connection has a deadline.** A TLS handshake and a request's headers must arrive
  within ``header_timeout_s`` (10 s); a keep-alive connection may wait ``idle_timeout_s``
  (120 s) for its next request; a response must be taken within ``write_timeout_s`` (60 s).
- **Connections are bounded, scrapes are not starved.** At ``max_connections`` (256) a new
  connection closes the oldest one still *waiting for its request* -- a half-open or idle
  one -- so a flood of slow clients cannot keep a real scrape out. One event loop thread
  holds every connection; rendering (and bcrypt) runs on ``workers`` threads (2): the
  thread count does not grow with the clients.
- **A client that leaves is not an error**: a reset, a timeout or a failed handshake ends
  its connection without a traceback.
- **The web configuration file** (:mod:`monitor.web.config`): TLS, mutual TLS, basic auth,
  headers, a rate limit; the file and the certificates it names are checked for changes
  at most once a second, on each request, and a change takes effect without a restart:
  users, headers and the rate limit on the next request (a kept-alive connection too),
  certificates and client CAs on the next connection. A change that does not load is
  logged and the previous configuration kept (a monitor whose certificate rotation went
  wrong keeps answering, guarded).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from monitor.web.config import WebConfig, WebConfigError, fingerprint, load

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: A request's line and headers, at most (a longer one is answered 431 and closed).
MAX_HEADER_BYTES = 16 * 1024
_QUIET = (ConnectionError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError, OSError)
_REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
    405: "Method Not Allowed", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 505: "HTTP Version Not Supported",
}  # fmt: skip


class _Conn:
    __slots__ = ("transport", "waiting")

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self.transport = transport
        self.waiting = True  # for its request (half-open or idle): evictable


class WebServer:
    """Serve ``render()`` (bytes of the text format) at ``paths`` on ``host:port``.

    :meth:`start` loads the web configuration (:class:`~monitor.web.config.WebConfigError`
    if it cannot be used) and binds (``OSError``); ``port`` 0 picks a free port
    (:attr:`bound_port`).
    """

    def __init__(
        self,
        render: Callable[[], bytes],
        host: str = "127.0.0.1",
        port: int = 0,
        web_config_file: Path | None = None,
        *,
        name: str = "metrics",
        paths: tuple[str, ...] = ("/metrics", "/"),
        content_type: str = CONTENT_TYPE,
        max_connections: int = 256,
        header_timeout_s: float = 10.0,
        idle_timeout_s: float = 120.0,
        write_timeout_s: float = 60.0,
        workers: int = 2,
    ) -> None:
        self.render = render
        self.host, self.port = host, port
        self.web_config_file = web_config_file
        self.name = name
        self.paths = paths
        self.content_type = content_type
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.write_timeout_s = write_timeout_s
        self.workers = workers
        #: Connections closed to admit a newer one; reloads that failed (tests, metrics).
        self.evicted = 0
        self.reload_failures = 0
        self.reloads = 0
        self._config = WebConfig(path=None)
        self._seen: tuple[tuple[str, int, int, int], ...] = ()
        self._checked_at = 0.0
        self._conns: OrderedDict[int, _Conn] = OrderedDict()
        self._tokens = 0.0
        self._tokens_at = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def bound_port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"the {self.name} server is not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def config(self) -> WebConfig:
        """The web configuration in force."""
        return self._config

    @property
    def scheme(self) -> str:
        return "https" if self._config.tls is not None else "http"

    def start(self) -> None:
        self._config = load(self.web_config_file)
        self._seen = fingerprint(self._config.files)
        self._checked_at = time.monotonic()
        self._tokens, self._tokens_at = float(self._config.rate_burst), time.monotonic()
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=f"{self.name}-render")
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(_quiet_handler)
        ready = threading.Event()
        failed: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(
                        self._connection, self.host or None, self.port,
                        limit=MAX_HEADER_BYTES, backlog=512, reuse_address=True,
                    )
                )  # fmt: skip
            except BaseException as e:  # the bind's error goes to start()
                failed.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=serve, name=f"{self.name}-http", daemon=True)
        self._thread.start()
        ready.wait()
        if failed:
            self._pool.shutdown(wait=False)
            self._thread.join(timeout=5)
            raise failed[0]
        guards = [
            g
            for g, on in (
                ("TLS", self._config.tls is not None),
                ("client certificates", self._config.allowed_sans
                 or (self._config.tls is not None
                     and self._config.tls.verify_mode != ssl.CERT_NONE)),
                ("basic auth", self._config.auth_required),
            )
            if on
        ]  # fmt: skip
        log.info(
            "%s: listening on %s://%s:%d%s (%s)",
            self.name, self.scheme, self.host, self.bound_port, self.paths[0],
            ", ".join(guards) or "no TLS, no authentication: --web-config-file adds them",
        )  # fmt: skip

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for conn in list(self._conns.values()):
                conn.transport.abort()
            self._conns.clear()
            # The connections' tasks end on their aborted transports before the loop does
            # (not cancelled: Python 3.11's stream callback reports a cancelled handler as
            # an error); a page still rendering is given two seconds.
            tasks = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
            if tasks:
                await asyncio.wait(tasks, timeout=2.0)
            loop.stop()

        with contextlib.suppress(RuntimeError):  # the loop already gone
            asyncio.run_coroutine_threadsafe(shutdown(), loop)
        thread.join(timeout=5)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._server = None

    # -- the web configuration's reload ----------------------------------------------------

    def _current(self) -> WebConfig:
        now = time.monotonic()
        if self.web_config_file is None or now - self._checked_at < 1.0:
            return self._config
        self._checked_at = now
        files = (self.web_config_file, *self._config.files[1:])
        seen = fingerprint(files)
        if seen == self._seen:
            return self._config
        self._seen = seen
        try:
            fresh = load(self.web_config_file)
        except WebConfigError as e:
            self.reload_failures += 1
            log.error("%s: %s -- the previous web configuration stays in force", self.name, e)
            return self._config
        if (fresh.tls is None) != (self._config.tls is None):
            self.reload_failures += 1
            log.error(
                "%s: web configuration %s turns TLS %s: that takes a restart -- the previous "
                "configuration stays in force",
                self.name, self.web_config_file, "on" if fresh.tls is not None else "off",
            )  # fmt: skip
            return self._config
        self._seen = fingerprint(fresh.files)
        self._config = fresh
        self._tokens = min(self._tokens, float(fresh.rate_burst))
        self.reloads += 1
        log.info("%s: web configuration %s reloaded", self.name, self.web_config_file)
        return fresh

    def _rate_allows(self, config: WebConfig) -> bool:
        if config.rate_interval_s <= 0:
            return True
        now = time.monotonic()
        self._tokens = min(
            float(config.rate_burst),
            self._tokens + (now - self._tokens_at) / config.rate_interval_s,
        )
        self._tokens_at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    # -- one connection --------------------------------------------------------------------

    def _admit(self, conn: _Conn) -> bool:
        while len(self._conns) >= self.max_connections:
            oldest = next((k for k, c in self._conns.items() if c.waiting), None)
            if oldest is None:
                return False  # every connection is being answered: this one waits no turn
            self._conns.pop(oldest).transport.abort()
            self.evicted += 1
        self._conns[id(conn)] = conn
        return True

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(writer.transport)
        if not self._admit(conn):
            conn.transport.abort()
            return
        try:
            config = self._current()
            if config.tls is not None:
                await _start_tls(writer, config.tls, self.header_timeout_s)
                conn.transport = writer.transport
                if config.allowed_sans and not _san_allowed(writer, config.allowed_sans):
                    return
            timeout = self.header_timeout_s
            while True:
                conn.waiting = True
                self._conns.move_to_end(id(conn))
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
                except asyncio.LimitOverrunError:
                    await self._respond(writer, config, 431, b"", keep=False)
                    return
                conn.waiting = False
                # Each request under the configuration in force now: a keep-alive scraper
                # (Prometheus keeps its connection) meets a rotated password at once.
                if not await self._request(reader, writer, self._current(), head):
                    return
                timeout = self.idle_timeout_s
        except _QUIET:
            pass  # the client left, stalled or failed its handshake: nothing to report
        except Exception:
            log.exception("%s: a request failed", self.name)
        finally:
            self._conns.pop(id(conn), None)
            conn.transport.abort()

    async def _request(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        config: WebConfig,
        head: bytes,
    ) -> bool:
        """Answer one request; whether the connection stays open for another."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self._respond(writer, config, 400 if len(parts) != 3 else 505, b"", keep=False)
            return False
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            key, sep, value = line.partition(":")
            if sep:
                headers[key.strip().lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        length = headers.get("content-length", "0")
        if not length.isdigit() or int(length) > MAX_HEADER_BYTES:
            await self._respond(writer, config, 400, b"", keep=False)
            return False
        if int(length):
            await asyncio.wait_for(reader.readexactly(int(length)), self.header_timeout_s)
        if method not in ("GET", "HEAD"):
            await self._respond(writer, config, 405, b"", keep, {"Allow": "GET, HEAD"})
            return keep
        if not self._rate_allows(config):
            await self._respond(writer, config, 429, b"", keep)
            return keep
        loop = asyncio.get_running_loop()
        if config.auth_required and not await loop.run_in_executor(
            self._pool, config.authorized, headers.get("authorization")
        ):
            await self._respond(
                writer, config, 401, b"Unauthorized\n", keep, {"WWW-Authenticate": "Basic"}
            )
            return keep
        if target.split("?", 1)[0] not in self.paths:
            await self._respond(writer, config, 404, b"Not Found\n", keep)
            return keep
        gz = "gzip" in headers.get("accept-encoding", "")
        body = await loop.run_in_executor(self._pool, self._body, gz)
        extra = {"Content-Type": self.content_type}
        if gz:
            extra["Content-Encoding"] = "gzip"
        await self._respond(writer, config, 200, body, keep, extra, head_only=method == "HEAD")
        return keep

    def _body(self, gz: bool) -> bytes:
        body = self.render()
        # Level 1: a 20 MB page in ~0.1 s, as Prometheus accepts it.
        return gzip.compress(body, compresslevel=1) if gz else body

    async def _respond(
        self,
        writer: asyncio.StreamWriter,
        config: WebConfig,
        status: int,
        body: bytes,
        keep: bool,
        extra: dict[str, str] | None = None,
        *,
        head_only: bool = False,
    ) -> None:
        lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in {**config.headers, **(extra or {})}.items()]
        if not keep:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if not head_only:
            writer.write(body)
        await asyncio.wait_for(writer.drain(), self.write_timeout_s)


async def _start_tls(writer: asyncio.StreamWriter, ctx: ssl.SSLContext, timeout: float) -> None:
    """``writer.start_tls``, for a client that may leave in its handshake. Python 3.11's
    ``StreamWriter.start_tls`` then sets its transport to None and fails with an
    AttributeError (and again in ``__del__``, printed as an unraisable exception); here the
    raw transport is put back and the client's leaving is a ConnectionResetError."""
    raw = writer.transport
    try:
        await writer.start_tls(ctx, ssl_handshake_timeout=timeout)
    except AttributeError:
        writer._transport = raw  # type: ignore[attr-defined]
        raise ConnectionResetError("the client left during the TLS handshake") from None


def _san_allowed(writer: asyncio.StreamWriter, allowed: frozenset[str]) -> bool:
    cert = writer.get_extra_info("peercert") or {}
    names = {value for _kind, value in cert.get("subjectAltName", ())}
    return bool(names & allowed)


def _quiet_handler(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    # asyncio reports a transport's failures itself (a reset during TLS, an aborted
    # write): a client that left, at debug; anything else as asyncio would.
    if isinstance(context.get("exception"), _QUIET):
        log.debug("%s", context.get("message"))
        return
    loop.default_exception_handler(context)
