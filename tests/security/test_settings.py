"""Security settings without a cluster: secrets from files, what prints, what Spark gets.

The lab end-to-end checks are in ``test_secured_lab.py``; these are the fast ones.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import re
import socket
import sys
import time
import types
from pathlib import Path

import pytest
from pydantic import ValidationError

from monitor import connection
from monitor.collector.config import CollectorConfig
from monitor.collector.security import REDACTED, KafkaConnectError, install_redaction, probe
from monitor.connection import KafkaConnection, OAuthTokenSource, TokenError, jwt_expiry
from monitor.dev.lab import security
from monitor.dev.lab.config import LabConfig, broker_properties
from streaming.config import StreamingConfig, load_config
from tests.security.idp import token_endpoint

SECRET = "Distinctive-Secret-7f3a9c"


def _shows_part_of(text: str, secret: str, width: int = 8) -> bool:
    """Whether any ``width``-character piece of ``secret`` is in ``text`` (pydantic's error
    messages truncate long inputs in the middle, leaking the ends)."""
    return any(secret[i : i + width] in text for i in range(len(secret) - width + 1))


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- the collector -----------------------------------------------------------------------------


def test_collector_password_from_file(tmp_path: Path) -> None:
    k = KafkaConnection(
        bootstrap_servers="k:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="monitor",
        sasl_password_file=_file(tmp_path, "pw", SECRET + "\n"),
    )
    assert k.client_kwargs()["sasl_plain_password"] == SECRET  # the newline is not in it
    assert SECRET not in repr(k) and SECRET not in k.model_dump_json()
    assert SECRET not in k.describe()


def test_collector_password_file_from_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(tmp_path, "pw", SECRET)
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__SASL_USERNAME", "monitor")
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__SASL_PASSWORD_FILE", str(path))
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__BOOTSTRAP_SERVERS", "k:9093")
    assert CollectorConfig().kafka.client_kwargs()["sasl_plain_password"] == SECRET


def test_collector_secret_errors_never_echo_the_secret(tmp_path: Path) -> None:
    cases: list[tuple[dict[str, object], str]] = [
        # missing username: the model-level check fails with the password in the input
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
             "sasl_password": SECRET},
            "needs sasl_username",
        ),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
             "sasl_username": "u", "sasl_password": SECRET,
             "sasl_password_file": _file(tmp_path, "pw", "x")},
            "not both",
        ),
        (
            {"security_protocol": "PLAINTEXT", "ssl_cafile": "/ca.pem",
             "ssl_key_password": SECRET},
            "security_protocol is PLAINTEXT",
        ),
        ({"sasl_password_file": tmp_path / "missing"}, "cannot read"),
        ({"ssl_key_password_file": _file(tmp_path, "empty", "\n")}, "is empty"),
    ]  # fmt: skip
    for kwargs, expected in cases:
        with pytest.raises(ValidationError) as err:
            CollectorConfig(kafka={"bootstrap_servers": "k:9093", **kwargs})
        assert expected in str(err.value)
        assert not _shows_part_of(str(err.value), SECRET)


def test_redaction_of_kafka_python_logs(caplog: pytest.LogCaptureFixture) -> None:
    k = KafkaConnection(
        bootstrap_servers="k:9093",
        security_protocol="SSL",
        ssl_cafile="/ca.pem",
        ssl_certfile="/client.pem",
        ssl_key_password=SECRET,  # type: ignore[arg-type]
    )
    install_redaction(k)
    caplog.set_level(logging.DEBUG)
    # The CLIs quieten the "kafka" logger (monitor lab/collect, run in-process by other
    # tests): open it here, caplog restores it.
    caplog.set_level(logging.DEBUG, logger="kafka")
    # What kafka-python's admin client logs at DEBUG (its whole configuration).
    logging.getLogger("kafka.admin.client").debug("configuration: %s", k.client_kwargs())
    try:
        raise RuntimeError(f"boom {SECRET}")
    except RuntimeError:
        logging.getLogger("kafka.net.connection").exception("failed")
    assert f"'ssl_password': '{REDACTED}'" in caplog.text
    assert SECRET not in caplog.text
    # Other loggers are left alone (the filter is on kafka-python's loggers only).
    logging.getLogger("tests.security").debug("own %s", "value")
    assert "own value" in caplog.text


def test_probe_names_an_unreachable_broker() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        k = KafkaConnection(bootstrap_servers=f"127.0.0.1:{port}")
        assert "cannot connect to 127.0.0.1" in (probe(k, timeout_s=2) or "")


# --- the Spark job: the same connection, rendered for the Java client ---------------------------


def _sasl(tmp_path: Path, **extra: object) -> StreamingConfig:
    return StreamingConfig(
        kafka=KafkaConnection(
            bootstrap_servers="k:9093",
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username="monitor",
            sasl_password_file=_file(tmp_path, "pw", SECRET + "\n"),
            ssl_cafile=str(_file(tmp_path, "ca.pem", "")),
        ),
        **extra,  # type: ignore[arg-type]
    )


def test_streaming_sasl_options(tmp_path: Path) -> None:
    cfg = _sasl(tmp_path, kafka_options={"kafka.client.dns.lookup": "use_all_dns_ips"})
    o = cfg.kafka_client_options()
    assert o["kafka.security.protocol"] == "SASL_SSL"
    assert o["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert o["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="monitor" password="{SECRET}";'
    )
    assert o["kafka.ssl.truststore.type"] == "PEM"
    assert o["kafka.ssl.truststore.location"] == str(tmp_path / "ca.pem")
    assert o["kafka.client.dns.lookup"] == "use_all_dns_ips"
    for text in (repr(cfg), str(cfg), cfg.model_dump_json(), str(cfg.kafka_options)):
        assert SECRET not in text
    assert cfg.secret_values() == [SECRET]


def test_one_connection_renders_both_clients(tmp_path: Path) -> None:
    """The collector's kafka-python arguments and the job's Java options come from the same
    settings: same servers, protocol, user and secret."""
    k = _sasl(tmp_path).kafka
    kw, java = k.client_kwargs(), k.java_options()
    assert ",".join(kw["bootstrap_servers"]) == java["kafka.bootstrap.servers"]  # type: ignore[arg-type]
    assert kw["security_protocol"] == java["kafka.security.protocol"] == "SASL_SSL"
    assert kw["sasl_mechanism"] == java["kafka.sasl.mechanism"]
    assert kw["sasl_plain_password"] == SECRET and SECRET in java["kafka.sasl.jaas.config"]
    assert kw["ssl_cafile"] == str(tmp_path / "ca.pem")


def test_streaming_jaas_quoting(tmp_path: Path) -> None:
    k = _sasl(tmp_path).kafka.model_copy(
        update={"sasl_password": __import__("pydantic").SecretStr('a"b\\c')}
    )
    jaas = k.java_options()["kafka.sasl.jaas.config"]
    assert jaas.endswith('password="a\\"b\\\\c";')


def test_streaming_mtls_options(tmp_path: Path) -> None:
    cfg = StreamingConfig(
        kafka=KafkaConnection(
            bootstrap_servers="k:9093",
            security_protocol="SSL",
            ssl_cafile="ca.pem",
            ssl_certfile="client.pem",
            ssl_key_password_file=_file(tmp_path, "kp", SECRET),
        )
    )
    o = cfg.kafka_client_options()
    assert o["kafka.ssl.keystore.type"] == "PEM"
    assert Path(o["kafka.ssl.keystore.location"]).is_absolute()  # executors share no cwd
    assert o["kafka.ssl.key.password"] == SECRET
    assert "kafka.sasl.jaas.config" not in o and "kafka.ssl.keystore.password" not in o


def test_java_stores_are_for_the_job_only(tmp_path: Path) -> None:
    """A PKCS12 trust store works for the job; the collector (kafka-python) refuses it with
    a message naming what to give instead."""
    k = KafkaConnection(
        bootstrap_servers="k:9093",
        security_protocol="SSL",
        ssl_truststore_location="trust.p12",
        ssl_truststore_password_file=_file(tmp_path, "tp", SECRET),
    )
    o = StreamingConfig(kafka=k).kafka_client_options()
    assert o["kafka.ssl.truststore.type"] == "PKCS12"
    assert o["kafka.ssl.truststore.password"] == SECRET
    with pytest.raises(ValidationError, match=r"collector \(kafka-python\) reads PEM files"):
        CollectorConfig(kafka=k)


def test_streaming_settings_from_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MONITOR_STREAMING_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("MONITOR_STREAMING_KAFKA__SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("MONITOR_STREAMING_KAFKA__SASL_USERNAME", "monitor")
    monkeypatch.setenv(
        "MONITOR_STREAMING_KAFKA__SASL_PASSWORD_FILE", str(_file(tmp_path, "pw", SECRET))
    )
    cfg = load_config(kafka={"bootstrap_servers": "h:1"})  # --bootstrap merges in
    assert SECRET in cfg.kafka_client_options()["kafka.sasl.jaas.config"]
    assert cfg.kafka.bootstrap_servers == "h:1"
    monkeypatch.setenv("MONITOR_STREAMING_KAFKA__SASL_USRNAME", "typo")
    with pytest.raises(ValueError, match="MONITOR_STREAMING_KAFKA__SASL_USRNAME"):
        load_config()


def test_streaming_errors_never_echo_the_secret(tmp_path: Path) -> None:
    cases: list[tuple[dict[str, object], str]] = [
        (
            {"kafka": {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                       "sasl_password": SECRET}},
            "needs sasl_username",
        ),
        (
            {"kafka": {"security_protocol": "SSL", "ssl_certfile": "k.pem"}},
            "needs ssl_key_password",
        ),
        (
            {"kafka": {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                       "sasl_username": "u", "sasl_password": SECRET},
             "kafka_options": {"kafka.sasl.jaas.config": f"x password={SECRET}"}},
            "kafka_options repeats",
        ),
        ({"kafka": {"ssl_cafile": "ca.pem", "bootstrap_servers": "h:1"}}, "PLAINTEXT"),
    ]  # fmt: skip
    for kwargs, expected in cases:
        with pytest.raises(ValidationError) as err:
            kafka = {"bootstrap_servers": "h:1", **kwargs["kafka"]}  # type: ignore[dict-item]
            StreamingConfig(**{**kwargs, "kafka": kafka})  # type: ignore[arg-type]
        assert expected in str(err.value)
        assert not _shows_part_of(str(err.value), SECRET)


def test_streaming_plaintext_unchanged() -> None:
    kafka = KafkaConnection(bootstrap_servers="127.0.0.1:19092")
    cfg = StreamingConfig(kafka=kafka, kafka_options={"kafka.client.dns.lookup": "use_all_dns_ips"})
    assert cfg.kafka_client_options() == {
        "kafka.bootstrap.servers": "127.0.0.1:19092",
        "kafka.client.dns.lookup": "use_all_dns_ips",
    }
    assert StreamingConfig(kafka=kafka).kafka_client_options() == {
        "kafka.bootstrap.servers": "127.0.0.1:19092"
    }


# --- the lab ---------------------------------------------------------------------------------


def test_default_lab_has_no_secured_listener(tmp_path: Path) -> None:
    config = LabConfig(dir=tmp_path)
    props = broker_properties(config, 1)
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert "SECURE" not in props["listeners"]
    assert not any(k.startswith(("listener.name.", "config.providers")) for k in props)
    assert config.ports(1) == [config.broker_port(1), config.controller_port(1), config.jmx_port(1)]
    with pytest.raises(ValueError, match="no secured listener"):
        _ = config.secure_bootstrap_servers


@pytest.mark.parametrize("mode", ["sasl_ssl", "mtls"])
def test_secured_lab_properties(tmp_path: Path, mode: str) -> None:
    config = LabConfig(dir=tmp_path, base_port=40092, security=mode)  # type: ignore[arg-type]
    props = broker_properties(config, 2)
    assert props["listeners"].endswith(",SECURE://127.0.0.1:40393")
    assert props["advertised.listeners"].endswith(",SECURE://127.0.0.1:40393")
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["listener.security.protocol.map"].endswith(f",SECURE:{security.protocol(mode)}")
    # The store password is a reference to a file, not the password.
    assert props["listener.name.secure.ssl.keystore.password"].startswith("${file:")
    assert (props.get("listener.name.secure.ssl.client.auth") == "required") == (mode == "mtls")
    assert config.secure_bootstrap_servers.split(",")[0] == "127.0.0.1:40392"


def test_lab_material(tmp_path: Path) -> None:
    files = security.ensure_material(tmp_path, "127.0.0.1", scram=True)
    for path in files.dir.iterdir():
        assert path.stat().st_mode & 0o077 == 0, path  # owner only
    assert files.dir.stat().st_mode & 0o077 == 0
    pem = files.client_pem.read_text()
    assert "BEGIN ENCRYPTED PRIVATE KEY" in pem and "BEGIN CERTIFICATE" in pem
    assert "BEGIN PRIVATE KEY" not in pem  # the key is encrypted
    assert not list(files.dir.glob("work*"))  # unencrypted keys are gone
    before = files.client_pem.read_text()
    security.ensure_material(tmp_path, "127.0.0.1", scram=True)
    assert files.client_pem.read_text() == before  # generated once


def test_scram_format_argument_is_salted() -> None:
    salt = b"0123456789abcdef"
    arg = security.scram_format_argument(SECRET, salt)
    assert SECRET not in arg
    m = re.fullmatch(
        r'SCRAM-SHA-512=\[name=monitor,salt="([^"]+)",saltedpassword="([^"]+)",iterations=4096\]',
        arg,
    )
    assert m is not None
    assert base64.b64decode(m.group(1)) == salt
    # RFC 5802 Hi() for SHA-512: PBKDF2 with one block, computed by hand.
    u = hmac.new(SECRET.encode(), salt + b"\x00\x00\x00\x01", hashlib.sha512).digest()
    acc = bytearray(u)
    for _ in range(4095):
        u = hmac.new(SECRET.encode(), u, hashlib.sha512).digest()
        acc = bytearray(a ^ b for a, b in zip(acc, u, strict=True))
    assert base64.b64decode(m.group(2)) == bytes(acc)


def test_lab_client_settings_name_files_not_secrets(tmp_path: Path) -> None:
    files = security.ensure_material(tmp_path, "127.0.0.1", scram=True)
    secrets = [files.read(p) for p in (files.scram_password, files.client_key_password)]
    for mode in ("sasl_ssl", "mtls"):
        settings = security.kafka_settings(tmp_path, mode, "127.0.0.1:1")
        assert not any(secret in str(settings) for secret in secrets)
        k = KafkaConnection(**settings)  # type: ignore[arg-type]
        cfg = StreamingConfig(kafka=k)
        assert CollectorConfig(kafka=k).kafka.secret_values() == cfg.secret_values()
        assert len(k.secret_values()) == 1 and k.secret_values()[0] in secrets


# --- SASL OAUTHBEARER: the settings, the collector's token provider, the job's options ---------


def _jwt(exp: float, **claims: object) -> str:
    """A JWT-shaped token with ``exp`` (the provider reads the claims, never checks the
    signature: the brokers do)."""

    def part(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part({'sub': 'monitor', 'exp': exp, **claims})}.c2ln"


def _oauth(**extra: object) -> KafkaConnection:
    return KafkaConnection(
        bootstrap_servers="k:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="OAUTHBEARER",
        **extra,
    )


class _Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {},
            "sasl_mechanism OAUTHBEARER needs exactly one of sasl_oauth_token_file, "
            "sasl_oauth_token_command and sasl_oauth_token_endpoint_url",
        ),
        (
            {"sasl_oauth_token_file": "/t", "sasl_oauth_token_command": ["get-token"]},
            "(given: sasl_oauth_token_file, sasl_oauth_token_command)",
        ),
        ({"sasl_oauth_token_command": []}, "sasl_oauth_token_command: give the program"),
        ({"sasl_oauth_token_command": [" "]}, "sasl_oauth_token_command: give the program"),
        (
            {"sasl_oauth_token_file": "/t", "sasl_username": "u"},
            "sasl_username: not used with sasl_mechanism OAUTHBEARER",
        ),
        (
            {"sasl_oauth_token_file": "/t", "sasl_oauth_extensions": {"auth": "x"}},
            "sasl_oauth_extensions: key 'auth' must be letters only",
        ),
        (
            {"sasl_oauth_token_file": "/t", "sasl_oauth_extensions": {"logical-cluster": "x"}},
            "key 'logical-cluster' must be letters only",
        ),
        (
            {"sasl_oauth_token_file": "/t", "sasl_oauth_extensions": {"a": "x\x01y"}},
            "the value of 'a' must be printable ASCII",
        ),
    ],
)
def test_oauth_settings_are_checked(kwargs: dict[str, object], expected: str) -> None:
    with pytest.raises(ValidationError) as err:
        _oauth(**kwargs)
    assert expected in str(err.value)


def test_oauth_settings_need_the_oauthbearer_mechanism() -> None:
    with pytest.raises(ValidationError, match="sasl_oauth_token_file: for sasl_mechanism "
                       "OAUTHBEARER only"):  # fmt: skip
        KafkaConnection(
            bootstrap_servers="k:9093", security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512", sasl_username="u", sasl_password="p",
            sasl_oauth_token_file="/t",
        )  # fmt: skip
    with pytest.raises(ValidationError, match="sasl_oauth_token_command: for sasl_mechanism"):
        KafkaConnection(bootstrap_servers="k:9093", sasl_oauth_token_command=["x"])


def test_oauth_settings_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__BOOTSTRAP_SERVERS", "k:9093")
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("MONITOR_COLLECTOR_KAFKA__SASL_MECHANISM", "OAUTHBEARER")
    monkeypatch.setenv(
        "MONITOR_COLLECTOR_KAFKA__SASL_OAUTH_TOKEN_COMMAND", '["/usr/bin/get-token", "--aud", "k"]'
    )
    monkeypatch.setenv(
        "MONITOR_COLLECTOR_KAFKA__SASL_OAUTH_EXTENSIONS", '{"logicalCluster": "lkc-1"}'
    )
    k = CollectorConfig().kafka
    assert k.sasl_oauth_token_command == ["/usr/bin/get-token", "--aud", "k"]
    assert k.sasl_oauth_extensions == {"logicalCluster": "lkc-1"}
    assert k.describe() == (
        "k:9093 over SASL_SSL (OAUTHBEARER with the token from command /usr/bin/get-token)"
    )


def test_token_file_is_read_again_when_rewritten_or_near_expiry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = _Clock()
    path = tmp_path / "token"
    first = _jwt(clock.now + 100)
    path.write_text(first + "\n")
    source = OAuthTokenSource(file=path, clock=clock)
    assert source.token() == first and source.fetches == 1
    clock.now += 50
    assert source.token() == first and source.fetches == 1  # cached: unchanged, not due
    # Rewritten (a new file renamed over it, as a sidecar does): read at once.
    second = _jwt(clock.now + 100)
    (tmp_path / "new").write_text(second)
    (tmp_path / "new").replace(path)
    assert source.token() == second and source.fetches == 2
    # Not rewritten: read again from 80 % of the token's life (here 80 s after the read).
    clock.now += 79
    assert source.token() == second and source.fetches == 2
    clock.now += 2
    with caplog.at_level(logging.WARNING, logger="monitor.connection"):
        assert source.token() == second and source.fetches == 3
    assert "the file has not been rewritten" in caplog.text
    assert second not in caplog.text
    # Expired and still not rewritten: an error naming the setting, the file and when.
    clock.now += 20
    with pytest.raises(TokenError) as err:
        source.token()
    assert str(err.value).startswith(f"sasl_oauth_token_file: the token in {path} expired at ")
    assert second not in str(err.value)


def test_token_file_errors_name_the_setting(tmp_path: Path) -> None:
    clock = _Clock()
    cases = {
        "missing": (None, "sasl_oauth_token_file: cannot read {path}: No such file or directory"),
        "empty": ("\n\n", "sasl_oauth_token_file: {path} is empty"),
        "json": (
            '{"access_token": "x"}',
            "sasl_oauth_token_file: the token in {path} is not a bearer token",
        ),
        "expired": (_jwt(clock.now - 1), "sasl_oauth_token_file: the token in {path} expired at"),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        with pytest.raises(TokenError) as err:
            OAuthTokenSource(file=path, clock=clock).token()
        message = str(err.value)
        assert message.startswith(expected.format(path=path)), message
        assert "\n" not in message


def test_a_failed_read_keeps_a_valid_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = _Clock()
    path = tmp_path / "token"
    token = _jwt(clock.now + 100)
    path.write_text(token)
    source = OAuthTokenSource(file=path, clock=clock)
    assert source.token() == token
    path.unlink()  # the sidecar is replacing it
    with caplog.at_level(logging.WARNING, logger="monitor.connection"):
        assert source.token() == token
    assert "cannot read" in caplog.text and "using the current token on (expires in 100 s)" in (
        caplog.text
    )
    clock.now += 101
    with pytest.raises(TokenError, match="sasl_oauth_token_file: cannot read"):
        source.token()


def test_an_opaque_token_is_read_again_after_the_refresh_interval(tmp_path: Path) -> None:
    clock = _Clock()
    path = tmp_path / "token"
    path.write_text("opaque-token-1")
    source = OAuthTokenSource(file=path, refresh_s=60, clock=clock)
    assert source.token() == "opaque-token-1"
    clock.now += 59
    assert source.token() == "opaque-token-1" and source.fetches == 1
    clock.now += 1
    assert source.token() == "opaque-token-1" and source.fetches == 2


def _token_script(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "get-token.py"
    script.write_text(body)
    return [sys.executable, str(script)]


def test_token_command_runs_again_before_expiry(tmp_path: Path) -> None:
    """Each run prints a new token (valid 100 s from the fake clock's start, then +1000 s
    a run); the command is run again at 80 % of its token's life."""
    clock = _Clock()
    runs = tmp_path / "runs"
    exp0 = clock.now + 100
    command = _token_script(
        tmp_path,
        "import base64, json, pathlib\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "n = int(runs.read_text()) + 1 if runs.exists() else 0\n"
        "runs.write_text(str(n))\n"
        "b = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b'=').decode()\n"
        f"print(b({{'alg': 'RS256'}}) + '.' + b({{'exp': {exp0} + 1000 * n, 'n': n}}) + '.c2ln')\n",
    )
    source = OAuthTokenSource(command=command, clock=clock)
    first = source.token()
    assert jwt_expiry(first) == exp0
    clock.now += 79
    assert source.token() == first and runs.read_text() == "0"
    clock.now += 2
    second = source.token()
    assert second != first and runs.read_text() == "1"


def test_token_command_errors_name_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "TOKEN_COMMAND_TIMEOUT_S", 1.0)
    printed = "printed-token-" + SECRET
    cases: list[tuple[list[str], str]] = [
        ([str(tmp_path / "nothing")], f"sasl_oauth_token_command: cannot run {tmp_path}/nothing: "),
        (
            _token_script(
                tmp_path,
                f"import sys; print({printed!r}); sys.exit('no credentials for audience kafka')",
            ),
            f"sasl_oauth_token_command: {sys.executable} exited with 1: no credentials for "
            "audience kafka",
        ),
        (["true"], "sasl_oauth_token_command: true printed no token"),
        (
            ["echo", "two", "words"],
            "sasl_oauth_token_command: the token echo printed is not a bearer token",
        ),
        (["sleep", "5"], "sasl_oauth_token_command: sleep did not finish within 1 s"),
    ]
    for command, expected in cases:
        with pytest.raises(TokenError) as err:
            OAuthTokenSource(command=command).token()
        message = str(err.value)
        assert message.startswith(expected), message
        assert "\n" not in message and SECRET not in message


def test_a_failed_command_keeps_a_valid_token_and_retries_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = _Clock()
    fail = tmp_path / "fail"
    token = _jwt(clock.now + 100)
    command = _token_script(
        tmp_path,
        f"import pathlib, sys\nif pathlib.Path({str(fail)!r}).exists(): sys.exit('idp down')\n"
        f"print({token!r})\n",
    )
    source = OAuthTokenSource(command=command, clock=clock)
    assert source.token() == token
    fail.touch()
    clock.now += 81
    with caplog.at_level(logging.WARNING, logger="monitor.connection"):
        assert source.token() == token
    assert "exited with 1: idp down; using the current token on (expires in 19 s)" in caplog.text
    assert source.fetches == 2
    clock.now += connection.TOKEN_RETRY_S - 1
    assert source.token() == token and source.fetches == 2  # not run again before the retry
    clock.now += 1
    assert source.token() == token and source.fetches == 3
    clock.now += 20
    with pytest.raises(TokenError, match="idp down"):
        source.token()


def test_collector_kwargs_for_oauthbearer(tmp_path: Path) -> None:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    token = _jwt(time.time() + 3600)
    path = _file(tmp_path, "token", token)
    k = _oauth(
        sasl_oauth_token_file=path,
        ssl_cafile="/ca.pem",
        sasl_oauth_extensions={"logicalCluster": "lkc-1", "identityPoolId": "pool-2"},
    )
    kw = k.client_kwargs()
    provider = kw["sasl_oauth_token_provider"]
    assert isinstance(provider, AbstractTokenProvider)  # what kafka-python checks
    assert kw["sasl_mechanism"] == "OAUTHBEARER"
    assert "sasl_plain_username" not in kw and "sasl_plain_password" not in kw
    assert provider.token() == token
    assert provider.extensions() == {"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}
    assert token not in repr(provider) and token not in str(kw)  # kafka-python logs kw
    # kafka-python's own OAUTHBEARER message from it.
    from kafka.net.sasl.oauth import SaslMechanismOAuth

    message = SaslMechanismOAuth(sasl_oauth_token_provider=provider).auth_bytes()
    assert (
        message
        == (
            f"n,,\x01auth=Bearer {token}\x01logicalCluster=lkc-1\x01identityPoolId=pool-2\x01\x01"
        ).encode()
    )


def test_collector_start_names_a_token_that_cannot_be_had(tmp_path: Path) -> None:
    """The first token is got before any client is made: a missing file is one line from
    ``Collector.start`` (the KafkaConnectError ``monitor collect`` prints), naming the
    setting, without waiting for the bootstrap timeout."""
    from monitor.collector import Collector

    k = _oauth(sasl_oauth_token_file=tmp_path / "missing", ssl_cafile="/ca.pem")
    collector = Collector(CollectorConfig(cluster="x", kafka=k, events_topic="e"))
    with pytest.raises(KafkaConnectError) as err:
        collector.start(produce=False)
    assert str(err.value) == (
        f"cannot use Kafka at k:9093 over SASL_SSL (OAUTHBEARER with the token from file "
        f"{tmp_path}/missing): sasl_oauth_token_file: cannot read {tmp_path}/missing: No such "
        "file or directory"
    )


def test_issued_tokens_are_redacted_from_kafka_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token = _jwt(time.time() + 3600, jti=SECRET)
    k = _oauth(sasl_oauth_token_file=_file(tmp_path, "token", token), ssl_cafile="/ca.pem")
    install_redaction(k)
    k.client_kwargs()["sasl_oauth_token_provider"].token()  # type: ignore[attr-defined]
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="kafka")
    # What kafka-python logs at DEBUG for each request, the SASL one with the token.
    logging.getLogger("kafka.net.connection").debug(
        "Request 2: %s", f"SaslAuthenticateRequest(auth_bytes=b'n,,\\x01auth=Bearer {token}')"
    )
    assert f"auth=Bearer {REDACTED}" in caplog.text
    assert token not in caplog.text


def test_job_options_for_oauthbearer(tmp_path: Path) -> None:
    path = _file(tmp_path, "token", _jwt(time.time() + 3600))
    k = _oauth(
        sasl_oauth_token_file=path,
        ssl_cafile=str(_file(tmp_path, "ca.pem", "")),
        sasl_oauth_extensions={"logicalCluster": "lkc-1"},
    )
    o = StreamingConfig(kafka=k).kafka_client_options()
    oauth = "org.apache.kafka.common.security.oauthbearer"
    assert {key: v for key, v in o.items() if "sasl" in key} == {
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.jaas.config": (
            f'{oauth}.OAuthBearerLoginModule required extension_logicalCluster="lkc-1";'
        ),
        "kafka.sasl.login.callback.handler.class": f"{oauth}.OAuthBearerLoginCallbackHandler",
        "kafka.sasl.oauthbearer.token.endpoint.url": f"file://{path}",
    }
    # kafka-clients 4 reads no OAuth URL the JVM does not allow: this one, exactly.
    assert k.java_system_properties() == {
        "org.apache.kafka.sasl.oauthbearer.allowed.urls": f"file://{path}"
    }
    assert _oauth(sasl_oauth_token_command=["x"]).java_system_properties() == {}


def test_job_refuses_what_its_java_client_cannot_do(tmp_path: Path) -> None:
    cases: list[tuple[dict[str, object], str]] = [
        (
            {"sasl_oauth_token_command": ["get-token"]},
            "sasl_oauth_token_command: the Spark job's Java client cannot run a command; give "
            "it sasl_oauth_token_file (a file a sidecar keeps fresh) or the identity "
            "provider's sasl_oauth_token_endpoint_url, sasl_oauth_client_id and "
            "sasl_oauth_client_secret_file instead",
        ),
        (
            {"sasl_oauth_token_file": tmp_path / "missing"},
            f"sasl_oauth_token_file: cannot read {tmp_path}/missing",
        ),
        (
            {"sasl_oauth_token_file": _file(tmp_path, "a token", "t")},
            "sasl_oauth_token_file: the Java client cannot read",
        ),
    ]
    for kafka, expected in cases:
        with pytest.raises(ValidationError) as err:
            StreamingConfig(kafka=_oauth(**kafka))
        assert expected in str(err.value)


# --- AWS MSK IAM ---------------------------------------------------------------------------------


def _msk(**extra: object) -> KafkaConnection:
    return KafkaConnection(
        bootstrap_servers="b-1.msk.example:9098",
        security_protocol="SASL_SSL",
        sasl_mechanism="AWS_MSK_IAM",
        **extra,
    )


def test_msk_iam_settings() -> None:
    with pytest.raises(ValidationError, match="AWS_MSK_IAM needs security_protocol SASL_SSL"):
        KafkaConnection(
            bootstrap_servers="b:9098", security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="AWS_MSK_IAM",
        )  # fmt: skip
    with pytest.raises(ValidationError, match="sasl_username: not used with sasl_mechanism "
                       "AWS_MSK_IAM"):  # fmt: skip
        _msk(sasl_username="u")
    assert _msk().describe() == (
        "b-1.msk.example:9098 over SASL_SSL (AWS_MSK_IAM with the AWS default credentials)"
    )


def test_msk_iam_job_options() -> None:
    o = StreamingConfig(kafka=_msk()).kafka_client_options()
    assert o == {
        "kafka.bootstrap.servers": "b-1.msk.example:9098",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "AWS_MSK_IAM",
        "kafka.sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
        "kafka.sasl.client.callback.handler.class": (
            "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
        ),
    }


def test_msk_iam_collector_needs_botocore(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka.errors import KafkaConfigurationError

    monkeypatch.setitem(sys.modules, "botocore", None)  # not installed
    with pytest.raises(KafkaConfigurationError) as err:
        _msk().client_kwargs()
    assert err.value.args[0] == (
        "sasl_mechanism AWS_MSK_IAM needs botocore for the collector: install the package's "
        "msk extra (pip install '.[msk]') or botocore"
    )
    monkeypatch.setitem(sys.modules, "botocore", types.ModuleType("botocore"))  # installed
    kw = _msk().client_kwargs()
    assert kw["sasl_mechanism"] == "AWS_MSK_IAM" and kw["security_protocol"] == "SASL_SSL"
    assert not {"sasl_plain_username", "sasl_plain_password", "sasl_oauth_token_provider"} & set(kw)


# --- OAUTHBEARER from an identity provider's token endpoint (client credentials) ---------------


#: A client id and secret with characters that HTTP Basic's ``id:secret`` needs encoded.
CLIENT_ID = "monitor:client 1"
CLIENT_SECRET = SECRET + "%41+&:"


def _endpoint_settings(url: str, tmp_path: Path, **extra: object) -> KafkaConnection:
    return _oauth(
        sasl_oauth_token_endpoint_url=url,
        sasl_oauth_client_id=CLIENT_ID,
        sasl_oauth_client_secret_file=_file(tmp_path, "client-secret", CLIENT_SECRET + "\n"),
        **extra,
    )


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"sasl_oauth_token_endpoint_url": "https://idp/token"},
            "sasl_oauth_token_endpoint_url needs sasl_oauth_client_id and "
            "sasl_oauth_client_secret (or sasl_oauth_client_secret_file)",
        ),
        (
            {"sasl_oauth_token_endpoint_url": "idp/token"},
            "sasl_oauth_token_endpoint_url: give an https:// (or http://) URL",
        ),
        (
            {"sasl_oauth_token_file": "/t", "sasl_oauth_client_id": "c"},
            "sasl_oauth_client_id, sasl_oauth_client_secret: for sasl_oauth_token_endpoint_url "
            "only",
        ),
        (
            {"sasl_oauth_token_file": "/t", "sasl_oauth_token_endpoint_url": "https://idp/t"},
            "(given: sasl_oauth_token_file, sasl_oauth_token_endpoint_url)",
        ),
    ],
)
def test_token_endpoint_settings_are_checked(kwargs: dict[str, object], expected: str) -> None:
    with pytest.raises(ValidationError) as err:
        _oauth(sasl_oauth_client_secret=SECRET, **kwargs)
    assert expected in str(err.value)
    assert not _shows_part_of(str(err.value), SECRET)


def test_token_endpoint_gives_tokens_to_the_collector(tmp_path: Path) -> None:
    clock = _Clock()
    with token_endpoint(
        lambda lifetime: _jwt(clock.now + lifetime), CLIENT_ID, CLIENT_SECRET, lifetime_s=100
    ) as idp:
        k = _endpoint_settings(idp.url, tmp_path, sasl_oauth_scope="kafka")
        assert CLIENT_SECRET in k.secret_values()  # redacted from kafka-python's logs
        assert SECRET not in repr(k) and SECRET not in k.describe()
        assert k.describe() == (
            f"k:9093 over SASL_SSL (OAUTHBEARER with a token from {idp.url} for client "
            f"{CLIENT_ID!r})"
        )
        source = k.token_source()
        source._clock = clock  # the fake clock the minted tokens' exp follow
        first = source.token()
        assert idp.issued == [first] and idp.scopes == ["kafka"]
        clock.now += 79
        assert source.token() == first and len(idp.issued) == 1
        clock.now += 2  # 80 % of the token's 100 s: asked again
        second = source.token()
        assert second != first and idp.issued == [first, second]


def test_token_endpoint_errors_name_the_setting(tmp_path: Path) -> None:
    with token_endpoint(lambda lifetime: "t", "someone else", "x") as idp:
        with pytest.raises(TokenError) as err:
            _endpoint_settings(idp.url, tmp_path).token_source().token()
        assert str(err.value) == (
            f"sasl_oauth_token_endpoint_url: {idp.url} answered 401: invalid_client: client unknown"
        )
        assert idp.refused == ["client"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/token"  # bound, not listening
        with pytest.raises(TokenError) as err:
            _endpoint_settings(url, tmp_path).token_source().token()
        assert str(err.value).startswith(
            f"sasl_oauth_token_endpoint_url: {url}: cannot ask it for a token: "
        )
        assert SECRET not in str(err.value)


def test_an_opaque_token_from_the_endpoint_lives_its_expires_in(tmp_path: Path) -> None:
    clock = _Clock()
    with token_endpoint(lambda _: "opaque-" + str(clock.now), CLIENT_ID, CLIENT_SECRET, 50) as idp:
        source = _endpoint_settings(idp.url, tmp_path).token_source()
        source._clock = clock
        first = source.token()
        clock.now += 41  # past 80 % of expires_in (50 s), not the 300 s refresh interval
        assert source.token() != first and len(idp.issued) == 2


def test_job_options_for_the_token_endpoint(tmp_path: Path) -> None:
    url = "https://idp.example/oauth2/token"
    k = _endpoint_settings(
        url, tmp_path, sasl_oauth_scope="kafka", sasl_oauth_extensions={"logicalCluster": "lkc-1"}
    )
    cfg = StreamingConfig(kafka=k)
    o = cfg.kafka_client_options()
    oauth = "org.apache.kafka.common.security.oauthbearer"
    assert o["kafka.sasl.jaas.config"] == (
        f'{oauth}.OAuthBearerLoginModule required clientId="{CLIENT_ID}" '
        f'clientSecret="{CLIENT_SECRET}" scope="kafka" extension_logicalCluster="lkc-1";'
    )
    assert (
        o["kafka.sasl.login.callback.handler.class"] == f"{oauth}.OAuthBearerLoginCallbackHandler"
    )
    assert o["kafka.sasl.oauthbearer.token.endpoint.url"] == url
    # Both clients form-encode the id and secret (RFC 6749 2.3.1); kafka-clients only if told.
    assert o["kafka.sasl.oauthbearer.header.urlencode"] == "true"
    assert k.java_system_properties() == {"org.apache.kafka.sasl.oauthbearer.allowed.urls": url}
    for text in (repr(cfg), str(cfg), cfg.model_dump_json()):
        assert SECRET not in text


# --- the lab's oauthbearer mode ------------------------------------------------------------------


def test_oauthbearer_lab_properties(tmp_path: Path) -> None:
    config = LabConfig(
        dir=tmp_path, base_port=40092, security="oauthbearer",
        kafka_version=security.OAUTH_KAFKA_VERSION,
    )  # fmt: skip
    props = broker_properties(config, 1)
    assert props["listener.security.protocol.map"].endswith(",SECURE:SASL_SSL")
    p = "listener.name.secure."
    oauth = "org.apache.kafka.common.security.oauthbearer"
    assert props[f"{p}sasl.enabled.mechanisms"] == "OAUTHBEARER"
    assert {
        k.removeprefix(p + "oauthbearer."): v
        for k, v in props.items()
        if k.startswith(p + "oauthbearer.")
    } == {
        "sasl.jaas.config": f"{oauth}.OAuthBearerLoginModule required;",
        # Kafka's JWT validator (signatures against the JWKS), not the unsecured one.
        "sasl.server.callback.handler.class": f"{oauth}.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": f"file://{tmp_path}/security/jwks.json",
        "sasl.oauthbearer.expected.issuer": security.OAUTH_ISSUER,
        "sasl.oauthbearer.clock.skew.seconds": "0",
        "connections.max.reauth.ms": str(security.OAUTH_MAX_REAUTH_MS),
    }
    assert props[f"{p}ssl.keystore.password"].startswith("${file:")


def test_oauthbearer_lab_runs_kafka_3_9(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as err:
        LabConfig(dir=tmp_path, security="oauthbearer")  # the default Kafka, 4.x
    assert "security oauthbearer runs Kafka 3.9 brokers (kafka_version='3.9.2')" in str(err.value)
    assert "org.apache.kafka.sasl.oauthbearer.allowed.urls" in str(err.value)


def _b64d(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def test_lab_tokens_are_signed_with_the_jwks_key(tmp_path: Path) -> None:
    files = security.ensure_material(tmp_path, "127.0.0.1", scram=False)
    assert files.oauth_signing_key.stat().st_mode & 0o077 == 0
    jwks = json.loads(files.jwks.read_text())["keys"]
    assert [(k["kty"], k["alg"], k["kid"]) for k in jwks] == [
        ("RSA", "RS256", security.OAUTH_KEY_ID)
    ]
    token = security.sign_token(files, lifetime_s=600, now=1_800_000_000)
    head, body, sig = token.split(".")
    assert json.loads(_b64d(head)) == {"alg": "RS256", "typ": "JWT", "kid": security.OAUTH_KEY_ID}
    claims = json.loads(_b64d(body))
    assert (claims["sub"], claims["iss"], claims["iat"], claims["exp"]) == (
        "monitor",
        security.OAUTH_ISSUER,
        1_800_000_000,
        1_800_000_600,
    )
    assert jwt_expiry(token) == security.token_expiry(token) == 1_800_000_600
    # The signature checks out with the JWKS's public key (n, e), by hand: RSASSA-PKCS1-v1_5.
    n = int.from_bytes(_b64d(jwks[0]["n"]), "big")
    e = int.from_bytes(_b64d(jwks[0]["e"]), "big")
    em = pow(int.from_bytes(_b64d(sig), "big"), e, n).to_bytes((n.bit_length() + 7) // 8, "big")
    digest = hashlib.sha256(f"{head}.{body}".encode()).digest()
    assert em.endswith(bytes.fromhex("3031300d060960864801650304020105000420") + digest)
    assert em.startswith(b"\x00\x01\xff")
    # Another lab's key does not verify it.
    other = security.ensure_material(tmp_path / "other", "127.0.0.1", scram=False)
    n2 = int.from_bytes(_b64d(json.loads(other.jwks.read_text())["keys"][0]["n"]), "big")
    assert not pow(int.from_bytes(_b64d(sig), "big"), e, n2).to_bytes(256, "big").endswith(digest)


def test_lab_token_file_is_written_when_missing_or_half_expired(tmp_path: Path) -> None:
    files = security.ensure_material(tmp_path, "127.0.0.1", scram=False)
    path = security.ensure_token(tmp_path)
    assert path == files.oauth_token and path.stat().st_mode & 0o077 == 0
    token = files.read(path)
    assert security.ensure_token(tmp_path) == path and files.read(path) == token  # kept
    security.write_token(files, security.sign_token(files, lifetime_s=60))  # near its end
    security.ensure_token(tmp_path)
    exp = security.token_expiry(files.read(path))
    assert exp is not None and exp - time.time() > security.OAUTH_TOKEN_LIFETIME_S - 60
    settings = security.kafka_settings(tmp_path, "oauthbearer", "127.0.0.1:1")
    assert settings["sasl_oauth_token_file"] == str(path)
    assert files.read(path) not in str(settings)  # the file, never the token
    k = KafkaConnection(**settings)  # type: ignore[arg-type]
    assert k.security_protocol == "SASL_SSL" and k.sasl_mechanism == "OAUTHBEARER"
