"""SASL PLAIN (and an OAUTHBEARER token) over SASL_PLAINTEXT is warned of at start (issue 51).

PLAIN sends the password itself, OAUTHBEARER a token anyone on the path can use until it
expires; SCRAM sends neither. The warning names the connection (never the secret) and is
said once in a process for each connection: when the collector starts its clients, when the
job's settings are read (the Java client's options are rendered there) -- whichever renders
it first.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from monitor import connection
from monitor.collector.collector import Collector
from monitor.collector.config import CollectorConfig
from monitor.collector.security import KafkaConnectError
from monitor.connection import KafkaConnection
from streaming.config import StreamingConfig

PASSWORD = "plain-pa55word"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that has warned of nothing yet."""
    monkeypatch.setattr(connection, "_WARNED_IN_CLEAR", set())
    for key in list(os.environ):
        if key.upper().startswith(("MONITOR_COLLECTOR_", "MONITOR_STREAMING_")):
            monkeypatch.delenv(key)


def _plain(servers: str = "127.0.0.1:1", **more: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": servers,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_username": "alice",
        "sasl_password": PASSWORD,
        **more,
    }


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "monitor.connection" and r.levelno == logging.WARNING
    ]


def test_plain_over_plaintext_is_warned_of_once_per_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    conn = KafkaConnection(**_plain())
    conn.client_kwargs()
    conn.client_kwargs()
    conn.java_options()
    KafkaConnection(**_plain()).client_kwargs()  # the same connection, another object
    assert _warnings(caplog) == [
        "kafka at 127.0.0.1:1 over SASL_PLAINTEXT (PLAIN as user 'alice'): SASL PLAIN over "
        "SASL_PLAINTEXT sends the password in clear; use SASL_SSL"
    ]
    KafkaConnection(**_plain("127.0.0.1:2")).java_options()  # another: its own warning
    assert len(_warnings(caplog)) == 2 and "127.0.0.1:2" in _warnings(caplog)[1]
    assert PASSWORD not in caplog.text


def test_an_oauth_token_over_plaintext_is_warned_of(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    (tmp_path / "token").write_text("opaque-token\n")
    KafkaConnection(
        bootstrap_servers="127.0.0.1:1",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_file=tmp_path / "token",
    ).client_kwargs()
    [warning] = _warnings(caplog)
    assert warning.endswith(
        "SASL OAUTHBEARER over SASL_PLAINTEXT sends the token (anyone on the path can use it "
        "until it expires) in clear; use SASL_SSL"
    )
    assert "opaque-token" not in caplog.text


@pytest.mark.parametrize(
    "settings",
    [
        _plain(security_protocol="SASL_SSL"),  # encrypted
        _plain(sasl_mechanism="SCRAM-SHA-512"),  # SCRAM sends no password
        {"bootstrap_servers": "127.0.0.1:1"},  # nothing to send
    ],
    ids=["plain-over-tls", "scram", "no-sasl"],
)
def test_nothing_sent_in_clear_is_no_warning(
    caplog: pytest.LogCaptureFixture, settings: dict[str, Any]
) -> None:
    conn = KafkaConnection(**settings)
    conn.client_kwargs()
    conn.java_options()
    assert _warnings(caplog) == []


def test_the_collector_warns_at_start(caplog: pytest.LogCaptureFixture) -> None:
    """Before it connects: the brokers here are absent (a closed port on 127.0.0.1)."""
    config = CollectorConfig(kafka=_plain(bootstrap_timeout_ms=500))
    collector = Collector(config)
    with pytest.raises(KafkaConnectError):
        collector.start(produce=False)
    assert [w.split(":")[0] for w in _warnings(caplog)] == ["kafka at 127.0.0.1"]
    assert "SASL PLAIN over SASL_PLAINTEXT sends the password in clear" in _warnings(caplog)[0]


def test_the_job_warns_when_its_settings_are_read(caplog: pytest.LogCaptureFixture) -> None:
    StreamingConfig(kafka=_plain("k1:9092,k2:9092"))
    assert _warnings(caplog) == [
        "kafka at k1:9092,k2:9092 over SASL_PLAINTEXT (PLAIN as user 'alice'): SASL PLAIN over "
        "SASL_PLAINTEXT sends the password in clear; use SASL_SSL"
    ]
