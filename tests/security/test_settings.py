"""Security settings without a cluster: secrets from files, what prints, what Spark gets.

The lab end-to-end checks are in ``test_secured_lab.py``; these are the fast ones.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from monitor.collector.config import CollectorConfig
from monitor.collector.security import REDACTED, install_redaction, probe
from monitor.connection import KafkaConnection
from monitor.dev.lab import security
from monitor.dev.lab.config import LabConfig, broker_properties
from streaming.config import StreamingConfig, load_config

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
