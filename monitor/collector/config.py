"""The collector's configuration: one pydantic-settings model, environment overrides.

Every key can come from a TOML/JSON file (``--config``), the command line, or the
environment as ``MONITOR_COLLECTOR_<KEY>``
(nested: ``MONITOR_COLLECTOR_KAFKA__SASL_PLAIN_PASSWORD``).
Unknown keys are errors. Secrets are :class:`SecretStr`: they print as ``**********``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_EVENTS_TOPIC = "__replication_monitor_events"


class KafkaClientSettings(BaseModel):
    """Connection and security settings passed through to kafka-python clients."""

    model_config = ConfigDict(extra="forbid")

    bootstrap_servers: str = "127.0.0.1:9092"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: SecretStr | None = None
    request_timeout_ms: int = Field(default=5_000, ge=500)

    def client_kwargs(self) -> dict[str, object]:
        """Keyword arguments for KafkaAdminClient / KafkaProducer (secrets revealed here only)."""
        kw: dict[str, object] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
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
        env_prefix="MONITOR_COLLECTOR_", env_nested_delimiter="__", extra="forbid"
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
