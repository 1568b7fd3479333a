"""The collector's configuration: one pydantic-settings model, environment overrides.

Every key can come from a TOML/JSON file (``--config``), the command line, or the
environment as ``MONITOR_COLLECTOR_<KEY>``
(nested: ``MONITOR_COLLECTOR_KAFKA__SASL_PLAIN_PASSWORD``).
Unknown keys are errors. Secrets are :class:`SecretStr`: they print as ``**********``;
each can also come from a file (``sasl_plain_password_file``, ``ssl_password_file``: the
first line, e.g. a mounted Kubernetes/Docker secret), which keeps it out of the
environment and the config file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_EVENTS_TOPIC = "__replication_monitor_events"


def read_secret_file(path: Path | str, what: str) -> SecretStr:
    """The first line of a secret file (a trailing newline is not part of the secret).

    Errors name the file and the setting, never the content.
    """
    try:
        text = Path(path).expanduser().read_text()
    except OSError as e:
        raise ValueError(f"{what}: cannot read {path}: {e.strerror or e}") from None
    value = text.splitlines()[0] if text.strip() else ""
    if not value:
        raise ValueError(f"{what}: {path} is empty")
    return SecretStr(value)


def secrets_from_files(data: Any, pairs: dict[str, str]) -> Any:
    """``pairs``: secret field -> its ``*_file`` field. Fills the secret from the file;
    giving both is an error (which one would win is not obvious)."""
    if not isinstance(data, dict):
        return data
    for field, file_field in pairs.items():
        path = data.get(file_field)
        if path is None:
            continue
        if data.get(field) is not None:
            raise ValueError(f"give {field} or {file_field}, not both")
        data = {**data, field: read_secret_file(path, file_field)}
    return data


class KafkaClientSettings(BaseModel):
    """Connection and security settings passed through to kafka-python clients."""

    # hide_input_in_errors: a validation error must not echo the input (it holds secrets).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    bootstrap_servers: str = "127.0.0.1:9092"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: SecretStr | None = None
    #: File holding the SASL password (first line); instead of ``sasl_plain_password``.
    sasl_plain_password_file: Path | None = None
    #: PEM CA bundle the brokers' certificates are checked against.
    ssl_cafile: str | None = None
    #: PEM client certificate (chain) for mutual TLS; may also hold the private key.
    ssl_certfile: str | None = None
    #: PEM private key, when not in ``ssl_certfile``.
    ssl_keyfile: str | None = None
    #: Password of an encrypted private key.
    ssl_password: SecretStr | None = None
    #: File holding the key password (first line); instead of ``ssl_password``.
    ssl_password_file: Path | None = None
    request_timeout_ms: int = Field(default=5_000, ge=500)
    #: How long starting the clients waits for a first broker connection (including TLS
    #: and SASL): wrong credentials fail the start after this long.
    bootstrap_timeout_ms: int = Field(default=30_000, ge=500)

    @model_validator(mode="before")
    @classmethod
    def _secret_files(cls, data: Any) -> Any:
        return secrets_from_files(
            data,
            {
                "sasl_plain_password": "sasl_plain_password_file",
                "ssl_password": "ssl_password_file",
            },
        )

    @model_validator(mode="after")
    def _consistent(self) -> KafkaClientSettings:
        sasl = self.security_protocol.startswith("SASL_")
        if sasl and self.sasl_mechanism is None:
            raise ValueError(f"security_protocol {self.security_protocol} needs sasl_mechanism")
        if (
            sasl
            and self.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
            and (not self.sasl_plain_username or self.sasl_plain_password is None)
        ):
            raise ValueError(
                f"sasl_mechanism {self.sasl_mechanism} needs sasl_plain_username and "
                "sasl_plain_password (or sasl_plain_password_file)"
            )
        if not self.security_protocol.endswith("SSL") and (self.ssl_certfile or self.ssl_cafile):
            raise ValueError(
                f"ssl_* files are set but security_protocol is {self.security_protocol} "
                "(SSL or SASL_SSL uses them)"
            )
        return self

    def secret_values(self) -> list[str]:
        """The revealed secrets (for log redaction)."""
        return [
            s.get_secret_value()
            for s in (self.sasl_plain_password, self.ssl_password)
            if s is not None and s.get_secret_value()
        ]

    def describe(self) -> str:
        """Where and how this client connects, for messages (no secrets)."""
        text = f"{self.bootstrap_servers} over {self.security_protocol}"
        if self.security_protocol.startswith("SASL_"):
            text += f" ({self.sasl_mechanism} as user {self.sasl_plain_username!r})"
        if self.ssl_certfile:
            text += f" with client certificate {self.ssl_certfile}"
        return text

    def client_kwargs(self) -> dict[str, object]:
        """Keyword arguments for KafkaAdminClient / KafkaProducer (secrets revealed here only)."""
        kw: dict[str, object] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
            "bootstrap_timeout_ms": self.bootstrap_timeout_ms,
        }
        optional = {
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_plain_username": self.sasl_plain_username,
            "sasl_plain_password": (
                self.sasl_plain_password.get_secret_value() if self.sasl_plain_password else None
            ),
            "ssl_cafile": self.ssl_cafile,
            "ssl_certfile": self.ssl_certfile,
            "ssl_keyfile": self.ssl_keyfile,
            "ssl_password": self.ssl_password.get_secret_value() if self.ssl_password else None,
        }
        kw.update({k: v for k, v in optional.items() if v is not None})
        return kw


class CollectorConfig(BaseSettings):
    """What to read, how often, and where to publish."""

    model_config = SettingsConfigDict(
        env_prefix="MONITOR_COLLECTOR_",
        env_nested_delimiter="__",
        extra="forbid",
        hide_input_in_errors=True,
    )

    cluster: str = Field(default="default", min_length=1, description="cluster label on events")
    kafka: KafkaClientSettings = Field(default_factory=KafkaClientSettings)
    #: Each broker's JMX exporter endpoint, by broker id.
    jmx_urls: dict[int, str] = Field(default_factory=dict)
    events_topic: str = DEFAULT_EVENTS_TOPIC
    #: Where the events go (defaults to the monitored cluster itself).
    events_kafka: KafkaClientSettings | None = None
    interval_s: float = Field(default=5.0, gt=0)
    #: Topic configs change rarely: read them every N rounds.
    config_every_rounds: int = Field(default=6, ge=1)
    jmx_timeout_s: float = Field(default=3.0, gt=0)
    #: Regular expression of topics to leave out (the monitor's own topics by default).
    exclude_topics: str = r"^__replication_monitor_"
    include_internal: bool = True
    #: The collector's own health metrics endpoint (None: not served).
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = Field(default=None, ge=0, le=65535)

    @field_validator("jmx_urls")
    @classmethod
    def _urls(cls, v: dict[int, str]) -> dict[int, str]:
        for broker, url in v.items():
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"jmx_urls[{broker}]: {url!r} is not an http(s) URL")
        return v
