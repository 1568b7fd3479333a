"""The web configuration file and the server that takes it, with real TLS clients on
127.0.0.1: what each key does, the errors that name the file and the key, the reload."""

from __future__ import annotations

import base64
import http.client
import logging
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from monitor.dev.pki import Pki, make_pki
from monitor.web import WebConfigError, WebServer, load

PASSWORD = "correct horse"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _hash(password: str, cost: int = 4) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(cost)).decode()


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture()
def serve() -> Iterator[list[WebServer]]:
    started: list[WebServer] = []
    yield started
    for s in started:
        s.stop()


def _start(serve: list[WebServer], config: Path | None, body: bytes = b"up 1\n") -> WebServer:
    server = WebServer(lambda: body, "127.0.0.1", 0, config, header_timeout_s=2.0)
    server.start()
    serve.append(server)
    return server


def _get(
    server: WebServer,
    *,
    ctx: ssl.SSLContext | None = None,
    user: str | None = None,
    password: str = PASSWORD,
    path: str = "/metrics",
) -> tuple[int, bytes, dict[str, str]]:
    headers = {}
    if user is not None:
        headers["Authorization"] = (
            "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        )
    url = f"{server.scheme}://127.0.0.1:{server.bound_port}{path}"
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=5, context=ctx
        ) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def _client_ctx(pki: Pki, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    return ctx


def test_plain_http_without_a_file(serve: list[WebServer]) -> None:
    server = _start(serve, None)
    assert server.scheme == "http"
    assert _get(server)[:2] == (200, b"up 1\n")
    assert _get(server, path="/other")[0] == 404


def test_tls_and_basic_auth(pki: Pki, tmp_path: Path, serve: list[WebServer]) -> None:
    config = _write(
        tmp_path / "web.yml",
        f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"basic_auth_users:\n  prometheus: '{_hash(PASSWORD)}'\n"
        "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n",
    )
    server = _start(serve, config)
    ctx = _client_ctx(pki)
    status, body, headers = _get(server, ctx=ctx, user="prometheus")
    assert (status, body) == (200, b"up 1\n")
    assert headers["X-Content-Type-Options"] == "nosniff"
    status, _, headers = _get(server, ctx=ctx, user="prometheus", password="wrong")
    assert status == 401 and headers["WWW-Authenticate"] == "Basic"
    assert _get(server, ctx=ctx, user="nobody")[0] == 401
    assert _get(server, ctx=ctx)[0] == 401
    # A client that does not trust the server's CA does not get in either.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        _get(server, ctx=ssl.create_default_context(), user="prometheus")


def test_mutual_tls(pki: Pki, tmp_path: Path, serve: list[WebServer]) -> None:
    config = _write(
        tmp_path / "web.yml",
        f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {pki.ca}\n",
    )
    server = _start(serve, config)
    assert _get(server, ctx=_client_ctx(pki, (pki.client_cert, pki.client_key)))[0] == 200
    for ctx in (_client_ctx(pki), _client_ctx(pki, pki.foreign_client("intruder"))):
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            _get(server, ctx=ctx)


def test_client_allowed_sans(pki: Pki, tmp_path: Path, serve: list[WebServer]) -> None:
    config = _write(
        tmp_path / "web.yml",
        f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {pki.ca}\n"
        "  client_allowed_sans: [prometheus]\n",
    )
    server = _start(serve, config)
    assert _get(server, ctx=_client_ctx(pki, (pki.client_cert, pki.client_key)))[0] == 200
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        _get(server, ctx=_client_ctx(pki, pki.client("grafana")))


def test_a_changed_file_takes_effect_without_a_restart(
    pki: Pki, tmp_path: Path, serve: list[WebServer], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "web.yml"
    head = f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
    _write(path, head + f"basic_auth_users:\n  prometheus: '{_hash(PASSWORD)}'\n")
    server = _start(serve, path)
    ctx = _client_ctx(pki)
    assert _get(server, ctx=ctx, user="prometheus")[0] == 200
    _write(path, head + f"basic_auth_users:\n  prometheus: '{_hash('rotated')}'\n")
    time.sleep(1.1)  # the file is looked at once a second at most
    assert _get(server, ctx=ctx, user="prometheus")[0] == 401
    assert _get(server, ctx=ctx, user="prometheus", password="rotated")[0] == 200
    assert server.reloads == 1
    # A broken edit keeps the last good configuration, and says so.
    with caplog.at_level(logging.ERROR, logger="monitor.web.server"):
        _write(path, head + "basic_auth_users:\n  prometheus: not-a-hash\n")
        time.sleep(1.1)
        assert _get(server, ctx=ctx, user="prometheus", password="rotated")[0] == 200
    assert server.reload_failures == 1
    assert "basic_auth_users.prometheus: not a bcrypt hash" in caplog.text
    assert "previous web configuration stays in force" in caplog.text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tls_server_config:\n  cert_file: a\n", "give key_file or key"),
        ("basic_auth_users:\n  u: plain\n", "basic_auth_users.u: not a bcrypt hash"),
        ("tls_server_confg: {}\n", "tls_server_confg: Extra inputs are not permitted"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Maybe\n",
         "tls_server_config.client_auth_type"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n"
         "  client_auth_type: RequireAnyClientCert\n", "no CA verified"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n"
         "  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
        ("tls_server_config:\n  cert_file: missing.pem\n  key_file: missing.key\n",
         "the certificate and key cannot be loaded"),
        ("http_server_config:\n  headers:\n    Set-Cookie: x\n", "cannot be set"),
        ("rate_limit:\n  interval: soon\n", "not a duration"),
        ("- a list\n", "(top)"),
    ],
)  # fmt: skip
def test_an_unusable_file_is_an_error_naming_it_and_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = _write(tmp_path / "web.yml", text)
    with pytest.raises(WebConfigError) as e:
        load(path)
    assert str(path) in str(e.value) and message in str(e.value), str(e.value)


def test_an_error_never_echoes_a_secret(tmp_path: Path) -> None:
    path = _write(tmp_path / "web.yml", "tls_server_config:\n  cert_file: a\n  key: S3CRET\n")
    with pytest.raises(WebConfigError) as e:
        load(path)
    assert "S3CRET" not in str(e.value)


def test_a_rate_limit(tmp_path: Path, serve: list[WebServer]) -> None:
    path = _write(tmp_path / "web.yml", "rate_limit:\n  interval: 1m\n  burst: 2\n")
    server = _start(serve, path)
    assert [_get(server)[0] for _ in range(3)] == [200, 200, 429]


def test_clients_that_leave_are_no_error(
    serve: list[WebServer], caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """A reset mid-request, a close mid-response, a stall past the deadline: each ends its
    connection quietly -- no traceback, no error line -- and the next scrape is answered."""
    server = _start(serve, None, body=b"x" * 8_000_000)
    port = server.bound_port
    with caplog.at_level(logging.DEBUG):
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            s.recv(100)  # the response began: leave in the middle of it
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /metr")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
        stalled = socket.create_connection(("127.0.0.1", port))
        stalled.sendall(b"GET /metrics HTTP/1.1\r\n")
        stalled.settimeout(5)
        assert stalled.recv(10) == b""  # closed by the server at its 2 s header deadline
        stalled.close()
        assert _get(server)[0] == 200
    text = caplog.text + "".join(capfd.readouterr())
    assert "Traceback" not in text and "Error" not in text, text
