"""Exporter pages behind TLS, mutual TLS, basic auth or a bearer token (issue 51, part 2).

Real servers on 127.0.0.1 (the standard library's HTTP server, wrapped in TLS) serve a
small exposition page with certificates made here with the ``openssl`` CLI: a CA, the
exporter's certificate (for 127.0.0.1; another for a name only), a client certificate, and
a second CA whose certificates nobody trusts. The collector reads them as it does in a
round: :meth:`CollectorConfig.page_access` and :func:`jmx.fetch`, the round itself
(``offline_collector``: the Admin reads stubbed) and ``monitor collect --check``'s line for
an endpoint. Settings are Prometheus's ``scrape_config`` keys (``jmx_tls_config``,
``jmx_basic_auth``, ``jmx_authorization``), validated: files that exist, one kind of
credentials, no password or token over plain HTTP to another host unless allowed.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from monitor import settings
from monitor.collector import check, jmx
from monitor.collector.collector import RoundResult
from monitor.collector.config import CollectorConfig
from monitor.contract.events import BrokerEvent
from tests.collector.helpers import offline_collector

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")

#: The exporter's page: the counters of a broker without replicas, the JVM's start.
PAGE = """\
# TYPE kafka_server_replica_manager_isrshrinkspersec_total counter
kafka_server_replica_manager_isrshrinkspersec_total 4.0
kafka_server_replica_manager_isrexpandspersec_total 2.0
kafka_server_replica_manager_underreplicatedpartitions 0.0
kafka_controller_activecontrollercount 1.0
process_start_time_seconds 1.7E9
"""
PASSWORD = "pa55-w0rd:with colon"
TOKEN = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJtb25pdG9yIn0.c2ln"


# -- certificates ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    dir: Path

    def __getattr__(self, name: str) -> Path:  # pki.ca -> ca.pem, pki.client_key -> client.key
        stem, _, kind = name.rpartition("_")
        if kind == "key":
            return self.dir / f"{stem}.key"
        return self.dir / f"{name}.pem"


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["openssl", *args], cwd=cwd, check=True, capture_output=True, stdin=subprocess.DEVNULL
    )


_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _ca(d: Path, name: str) -> None:
    _openssl(d, "req", "-x509", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.pem",
             "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip


def _leaf(d: Path, name: str, ca: str, *, san: str | None, usage: str) -> None:
    _openssl(d, "req", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", f"/CN={name}")  # fmt: skip
    ext = d / f"{name}.ext"
    lines = [f"extendedKeyUsage={usage}", "subjectKeyIdentifier=hash",
             "authorityKeyIdentifier=keyid", "keyUsage=critical,digitalSignature"]  # fmt: skip
    ext.write_text("\n".join([*lines, *([f"subjectAltName={san}"] if san else [])]) + "\n")
    _openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
             "-CAkey", f"{ca}.key", "-CAcreateserial", "-days", "2", "-out", f"{name}.pem",
             "-extfile", ext.name)  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    _ca(d, "ca")
    _ca(d, "other_ca")
    _leaf(d, "server", "ca", san="IP:127.0.0.1,DNS:localhost", usage="serverAuth")
    _leaf(d, "named", "ca", san="DNS:exporter.test", usage="serverAuth")
    _leaf(d, "client", "ca", san=None, usage="clientAuth")
    _leaf(d, "stranger", "other_ca", san=None, usage="clientAuth")
    return Pki(d)


# -- the exporter ------------------------------------------------------------------------------


@dataclass
class Exporter:
    url: str
    #: The Authorization header of each request (None: none sent).
    seen: list[str | None]


@contextmanager
def exporter(
    pki: Pki | None,
    *,
    cert: str = "server",
    client_ca: Path | None = None,
    wants: Callable[[], str] | None = None,
) -> Iterator[Exporter]:
    """A page server on 127.0.0.1: HTTPS with ``cert`` (``pki`` None: plain HTTP); with
    ``client_ca`` it requires a client certificate signed by it (mutual TLS); with ``wants``
    it answers 401 unless the request's Authorization header is ``wants()``."""
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            auth = self.headers.get("Authorization")
            seen.append(auth)
            if wants is not None and auth != wants():
                body = b"Unauthorized\n"
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="/metrics"')
            else:
                body = PAGE.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if pki is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki.dir / f"{cert}.pem", pki.dir / f"{cert}.key")
        if client_ca is not None:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(client_ca)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "http" if pki is None else "https"
    try:
        yield Exporter(f"{scheme}://127.0.0.1:{server.server_address[1]}/metrics", seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _config(url: str, **scrape: Any) -> CollectorConfig:
    return CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:1"}, jmx_urls={1: url}, **scrape)


def _fetch(config: CollectorConfig, broker: int = 1) -> str:
    return jmx.fetch(config.jmx_urls[broker], 5.0, access=config.page_access(broker))


def _check_line(config: CollectorConfig, broker: int = 1) -> str:
    """``monitor collect --check``'s line for the broker's exporter."""
    lines: list[str] = []
    url = config.jmx_urls[broker]
    check._check_endpoint(config, broker, url, lines.append, check._read_page(config, url, broker))
    return lines[0]


def _round(monkeypatch: pytest.MonkeyPatch, config: CollectorConfig) -> RoundResult:
    """One collector round reading the real pages of ``config``'s brokers."""
    scrape = {k: getattr(config, k) for k in config.model_fields_set if k.startswith("jmx_")}
    c = offline_collector(monkeypatch, brokers=len(config.jmx_urls), **scrape)
    try:
        res: RoundResult = c.round()
    finally:
        c._pool.shutdown()
    return res


def _alive(res: RoundResult) -> dict[int, bool]:
    return {e.broker: e.alive for e in res.events if isinstance(e, BrokerEvent)}


def _secret(tmp_path: Path, name: str, value: str) -> Path:
    path = tmp_path / name
    path.write_text(value + "\n")
    path.chmod(0o600)
    return path


# -- TLS -----------------------------------------------------------------------------------


def test_an_https_page_is_read_with_the_ca_file_and_refused_without(pki: Pki) -> None:
    with exporter(pki) as page:
        assert _fetch(_config(page.url, jmx_tls_config={"ca_file": pki.ca})) == PAGE
        # Without it: the system's CAs do not know the exporter's, said with the setting.
        with pytest.raises(jmx.PageError) as e:
            _fetch(_config(page.url))
        assert str(e.value).startswith("TLS: the exporter's certificate is not trusted (")
        assert str(e.value).endswith(
            "set jmx_tls_config.ca_file to the CA that signed the exporter's certificate"
        )
        # Another CA: the one given is named.
        with pytest.raises(jmx.PageError, match=r"is jmx_tls_config\.ca_file \(.*other_ca\.pem\)"):
            _fetch(_config(page.url, jmx_tls_config={"ca_file": pki.other_ca}))


def test_a_round_and_the_check_read_the_page_as_configured(
    pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    with exporter(pki) as page:
        good = _config(page.url, jmx_tls_config={"ca_file": pki.ca})
        res = _round(monkeypatch, good)
        assert res.errors == [] and _alive(res) == {1: True}
        assert _check_line(good).startswith(f"exporter of broker 1 ({page.url}): ok -- profile")
        bare = _config(page.url)
        res = _round(monkeypatch, bare)
        assert _alive(res) == {1: False}
        [(source, why)] = res.errors
        assert source == "jmx" and why.startswith("broker 1: TLS: the exporter's certificate")
        assert _check_line(bare).startswith(
            f"exporter of broker 1 ({page.url}): FAIL -- TLS: the exporter's certificate is "
            "not trusted"
        )


def test_server_name_checks_the_certificate_for_another_name(pki: Pki) -> None:
    with exporter(pki, cert="named") as page:  # a certificate for exporter.test only
        with pytest.raises(jmx.PageError, match=r"set jmx_tls_config\.server_name"):
            _fetch(_config(page.url, jmx_tls_config={"ca_file": pki.ca}))
        tls = {"ca_file": pki.ca, "server_name": "exporter.test"}
        assert _fetch(_config(page.url, jmx_tls_config=tls)) == PAGE
        skip = {"insecure_skip_verify": True}  # no check at all: read, whatever the CA
        assert _fetch(_config(page.url, jmx_tls_config=skip)) == PAGE


def test_mutual_tls_needs_the_client_certificate(pki: Pki) -> None:
    with exporter(pki, client_ca=pki.ca) as page:
        mtls = {"ca_file": pki.ca, "cert_file": pki.client, "key_file": pki.client_key}
        assert _fetch(_config(page.url, jmx_tls_config=mtls)) == PAGE
        with pytest.raises(jmx.PageError) as e:
            _fetch(_config(page.url, jmx_tls_config={"ca_file": pki.ca}))
        # Python's server answers with an alert (certificate required) or closes the
        # connection, as the timing goes: either way the settings to give are named.
        assert str(e.value).startswith("TLS refused: ")
        assert str(e.value).endswith(
            "requires a client certificate, set jmx_tls_config.cert_file and key_file"
            if "EOF" in str(e.value)
            else "requires a client certificate: set jmx_tls_config.cert_file and key_file"
        )
        # A certificate of a CA the exporter does not trust: refused, the certificate named.
        stranger = {**mtls, "cert_file": pki.stranger, "key_file": pki.stranger_key}
        with pytest.raises(jmx.PageError, match=r"TLS refused: .*stranger\.pem"):
            _fetch(_config(page.url, jmx_tls_config=stranger))


def test_a_renewed_client_certificate_is_used_without_a_restart(pki: Pki, tmp_path: Path) -> None:
    """cert-manager rewrites the files in place: the next page's handshake uses them."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(pki.stranger, cert)
    shutil.copy(pki.stranger_key, key)
    config = _config(
        "https://127.0.0.1:1/metrics",
        jmx_tls_config={"ca_file": pki.ca, "cert_file": cert, "key_file": key},
    )
    access = config.page_access(1)
    assert access is not None
    with exporter(pki, client_ca=pki.ca) as page:
        with pytest.raises(jmx.PageError, match="TLS refused"):
            jmx.fetch(page.url, 5.0, access=access)
        shutil.copy(pki.client, cert)
        shutil.copy(pki.client_key, key)
        assert jmx.fetch(page.url, 5.0, access=access) == PAGE


# -- credentials ---------------------------------------------------------------------------


def test_basic_auth_right_and_wrong(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    right = _secret(tmp_path, "right", PASSWORD)
    wrong = _secret(tmp_path, "wrong", "not-the-password")
    tls = {"ca_file": pki.ca}
    with exporter(pki, wants=lambda: _basic("monitor", PASSWORD)) as page:
        good = _config(page.url, jmx_tls_config=tls,
                       jmx_basic_auth={"username": "monitor", "password_file": right})  # fmt: skip
        assert _fetch(good) == PAGE
        assert page.seen == [_basic("monitor", PASSWORD)]
        res = _round(monkeypatch, good)
        assert res.errors == [] and _alive(res) == {1: True}

        bad = _config(page.url, jmx_tls_config=tls,
                      jmx_basic_auth={"username": "monitor", "password_file": wrong})  # fmt: skip
        refused = (
            "HTTP 401 Unauthorized: the credentials were refused -- check jmx_basic_auth "
            f"(user 'monitor', the password in {wrong})"
        )
        res = _round(monkeypatch, bad)
        assert res.errors == [("jmx", f"broker 1: {refused}")] and _alive(res) == {1: False}
        assert _check_line(bad) == f"exporter of broker 1 ({page.url}): FAIL -- {refused}"

        # No credentials at all: the page asks for them, and the line says which to set.
        assert _check_line(_config(page.url, jmx_tls_config=tls)) == (
            f"exporter of broker 1 ({page.url}): FAIL -- HTTP 401 Unauthorized: the exporter "
            "asks for credentials -- set jmx_basic_auth or jmx_authorization (docs/collector.md, "
            "'Scraping secured exporter pages')"
        )
    # The password is in no message, no log record, no repr.
    said = [caplog.text, repr(good), repr(good.page_access(1)), str(good.model_dump())]
    assert not [s for s in said if PASSWORD in s or "not-the-password" in s]


def test_a_rewritten_password_file_is_read_again(pki: Pki, tmp_path: Path) -> None:
    """A rotated secret (a Kubernetes secret's files are replaced): no restart needed."""
    current = {"password": "first"}
    password = _secret(tmp_path, "password", "first")
    with exporter(pki, wants=lambda: _basic("monitor", current["password"])) as page:
        basic = {"username": "monitor", "password_file": password}
        config = _config(page.url, jmx_tls_config={"ca_file": pki.ca}, jmx_basic_auth=basic)
        access = config.page_access(1)
        assert jmx.fetch(page.url, 5.0, access=access) == PAGE
        current["password"] = "second"
        with pytest.raises(jmx.PageError, match="HTTP 401"):
            jmx.fetch(page.url, 5.0, access=access)
        password.write_text("second-and-longer\n")  # another size: seen as rewritten
        current["password"] = "second-and-longer"
        assert jmx.fetch(page.url, 5.0, access=access) == PAGE
        password.unlink()  # gone: the setting and the path are named, nothing is sent
        sent = len(page.seen)
        with pytest.raises(jmx.PageError) as e:
            jmx.fetch(page.url, 5.0, access=access)
        assert str(e.value).startswith(f"jmx_basic_auth.password_file: cannot read {password}")
        assert len(page.seen) == sent


def test_a_bearer_token_from_its_file(pki: Pki, tmp_path: Path) -> None:
    token = _secret(tmp_path, "token", TOKEN)
    with exporter(pki, wants=lambda: f"Bearer {TOKEN}") as page:
        config = _config(page.url, jmx_tls_config={"ca_file": pki.ca},
                         jmx_authorization={"credentials_file": token})  # fmt: skip
        assert _fetch(config) == PAGE and page.seen == [f"Bearer {TOKEN}"]
        other = _secret(tmp_path, "other", "an-old-token")
        refused = _config(page.url, jmx_tls_config={"ca_file": pki.ca},
                          jmx_authorization={"credentials_file": other})  # fmt: skip
        assert _check_line(refused) == (
            f"exporter of broker 1 ({page.url}): FAIL -- HTTP 401 Unauthorized: the credentials "
            f"were refused -- check jmx_authorization (Bearer credentials in {other})"
        )
        # A token of two words would be a header of another shape: refused, never echoed.
        other.write_text("two words\n")
        with pytest.raises(jmx.PageError) as e:
            _fetch(refused)
        assert "a token is one word" in str(e.value) and "two words" not in str(e.value)


def test_one_broker_reached_otherwise(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``jmx_scrape_per_broker``: a key given replaces the collector-wide one for it."""
    shared = _secret(tmp_path, "shared", PASSWORD)
    own = _secret(tmp_path, "own", TOKEN)
    with (
        exporter(pki, wants=lambda: _basic("monitor", PASSWORD)) as one,
        exporter(None, wants=lambda: f"Bearer {TOKEN}") as two,  # plain HTTP on loopback
        exporter(pki, cert="named") as three,  # no credentials; another certificate name
    ):
        config = CollectorConfig(
            kafka={"bootstrap_servers": "127.0.0.1:1"},
            jmx_urls={1: one.url, 2: two.url, 3: three.url},
            jmx_tls_config={"ca_file": pki.ca},
            jmx_basic_auth={"username": "monitor", "password_file": shared},
            jmx_scrape_per_broker={
                2: {"tls_config": None, "authorization": {"credentials_file": own}},
                3: {"tls_config": {"ca_file": pki.ca, "server_name": "exporter.test"},
                    "basic_auth": None},
            },
        )  # fmt: skip
        assert [_fetch(config, b) for b in (1, 2, 3)] == [PAGE] * 3
        assert (one.seen, two.seen, three.seen) == (
            [_basic("monitor", PASSWORD)], [f"Bearer {TOKEN}"], [None]
        )  # fmt: skip
        res = _round(monkeypatch, config)
        assert res.errors == [] and _alive(res) == {1: True, 2: True, 3: True}
    # Broker 2 without TLS and, here, without its token: reached plainly.
    plain = {2: {"tls_config": None, "authorization": None}}
    again = {**config.model_dump(exclude_unset=True), "jmx_scrape_per_broker": plain}
    assert CollectorConfig(**again).page_access(2) is None


# -- validation ----------------------------------------------------------------------------


def _refused(**scrape: Any) -> str:
    kwargs = {"jmx_urls": {1: "https://k1:7071/metrics"}, **scrape}
    with pytest.raises(ValidationError) as e:
        CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:1"}, **kwargs)
    return settings.describe_error(e.value)


def test_credentials_over_plain_http_are_refused_unless_allowed(tmp_path: Path) -> None:
    password = _secret(tmp_path, "password", PASSWORD)
    token = _secret(tmp_path, "token", TOKEN)
    basic = {"username": "monitor", "password_file": password}
    http = {1: "http://k1:7071/metrics"}
    assert _refused(jmx_urls=http, jmx_basic_auth=basic) == (
        "Value error, jmx_urls[1] is http://k1:7071/metrics, plain HTTP to another host: "
        "jmx_basic_auth's password would cross the network in clear -- use https:// "
        "(jmx_tls_config), or set jmx_allow_insecure_credentials = true to send it anyway"
    )
    assert "jmx_authorization's token would cross the network in clear" in _refused(
        jmx_urls=http, jmx_authorization={"credentials_file": token}
    )
    per_broker = {1: {"authorization": {"credentials_file": token}}}
    assert "jmx_scrape_per_broker[1].authorization's token" in _refused(
        jmx_urls=http, jmx_scrape_per_broker=per_broker
    )
    kafka = {"bootstrap_servers": "127.0.0.1:1"}
    # Allowed when said so (for all, or for the one broker), and on loopback.
    CollectorConfig(kafka=kafka, jmx_urls=http, jmx_basic_auth=basic,
                    jmx_allow_insecure_credentials=True)  # fmt: skip
    allowed = {1: {**per_broker[1], "allow_insecure_credentials": True}}
    CollectorConfig(kafka=kafka, jmx_urls=http, jmx_scrape_per_broker=allowed)
    for local in ("http://127.0.0.1:7071/metrics", "http://localhost:7071/", "http://[::1]:1/"):
        CollectorConfig(kafka=kafka, jmx_urls={1: local}, jmx_basic_auth=basic)
    # TLS settings on a plain HTTP page are a mistake to name.
    assert "jmx_urls[1] is http://k1:7071/metrics, plain HTTP, but jmx_tls_config is set" in (
        _refused(jmx_urls=http, jmx_tls_config={"insecure_skip_verify": True})
    )


def test_a_missing_file_names_the_setting_and_the_path(tmp_path: Path) -> None:
    absent = tmp_path / "absent.pem"
    assert _refused(jmx_tls_config={"ca_file": absent}) == (
        f"jmx_tls_config.ca_file: Value error, {absent} does not exist"
    )
    assert _refused(jmx_basic_auth={"username": "u", "password_file": absent}) == (
        f"jmx_basic_auth.password_file: Value error, {absent} does not exist"
    )
    per_broker = {1: {"authorization": {"credentials_file": absent}}}
    assert _refused(jmx_scrape_per_broker=per_broker) == (
        f"jmx_scrape_per_broker.1.authorization.credentials_file: Value error, {absent} does "
        "not exist"
    )
    empty = _secret(tmp_path, "empty", "")
    assert _refused(jmx_authorization={"credentials_file": empty}).endswith(f"{empty} is empty")
    garbage = _secret(tmp_path, "garbage.pem", "not a certificate")
    assert _refused(jmx_tls_config={"ca_file": garbage}).startswith(
        f"jmx_tls_config: Value error, jmx_tls_config: cannot load ca_file {garbage} as PEM"
    )


def test_settings_that_contradict_each_other_are_refused(pki: Pki, tmp_path: Path) -> None:
    password = _secret(tmp_path, "password", PASSWORD)
    token = _secret(tmp_path, "token", TOKEN)
    basic = {"username": "monitor", "password_file": password}
    bearer = {"credentials_file": token}
    assert _refused(jmx_basic_auth=basic, jmx_authorization=bearer) == (
        "Value error, give jmx_basic_auth or jmx_authorization, not both"
    )
    assert _refused(jmx_scrape_per_broker={1: {"basic_auth": basic, "authorization": bearer}}) == (
        "jmx_scrape_per_broker.1: Value error, give basic_auth or authorization, not both"
    )
    assert _refused(jmx_scrape_per_broker={7: {"basic_auth": basic}}) == (
        "Value error, jmx_scrape_per_broker: broker(s) [7] have no jmx_urls entry"
    )
    assert _refused(jmx_tls_config={"key_file": pki.client_key}).endswith(
        "key_file needs cert_file (the certificate of that key)"
    )
    assert _refused(jmx_authorization={"type": "Basic", "credentials_file": token}).endswith(
        'type "Basic": use basic_auth (username and password_file)'
    )
    assert "no ':'" in _refused(jmx_basic_auth={**basic, "username": "a:b"})
    # An encrypted key: refused at once (OpenSSL must never prompt for its password).
    encrypted = tmp_path / "encrypted.key"
    _openssl(tmp_path, "pkey", "-in", str(pki.client_key), "-aes256", "-passout", "pass:x",
             "-out", encrypted.name)  # fmt: skip
    tls = {"cert_file": pki.client, "key_file": encrypted}
    assert _refused(jmx_tls_config=tls).endswith(
        "jmx_tls_config.key_file: the key is encrypted: give an unencrypted PEM key"
    )


def test_the_settings_come_from_the_environment_too(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    password = _secret(tmp_path, "password", PASSWORD)
    monkeypatch.setenv("MONITOR_COLLECTOR_JMX_TLS_CONFIG__CA_FILE", str(pki.ca))
    monkeypatch.setenv("MONITOR_COLLECTOR_JMX_BASIC_AUTH__USERNAME", "monitor")
    monkeypatch.setenv("MONITOR_COLLECTOR_JMX_BASIC_AUTH__PASSWORD_FILE", str(password))
    monkeypatch.setenv("MONITOR_COLLECTOR_JMX_SCRAPE_PER_BROKER", '{"2": {"basic_auth": null}}')
    config = CollectorConfig(
        kafka={"bootstrap_servers": "127.0.0.1:1"},
        jmx_urls={1: "https://k1:7071/metrics", 2: "https://k2:7071/metrics"},
    )
    assert settings.unknown_settings_env(CollectorConfig, environ=dict(os.environ)) == []
    one, two = config.page_access(1), config.page_access(2)
    assert one is not None and one.ca_file == pki.ca
    assert one.credentials() == f"user 'monitor', the password in {password}"
    assert two is not None and two.ca_file == pki.ca and two.credentials() is None
