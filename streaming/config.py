"""Configuration of the streaming job: one validated model, defaults, ``MONITOR_STREAMING_*`` env.

Precedence (highest first): explicit arguments (the CLI's flags), environment variables
``MONITOR_STREAMING_<FIELD>`` (``MONITOR_STREAMING_MODEL__STALE_AFTER_MS`` for the model's
thresholds), then the defaults below. Unknown keys are errors, in arguments and in the
environment alike: a typo'd setting must not be silently ignored.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from monitor.collector.config import secrets_from_files
from monitor.model import ModelConfig

ENV_PREFIX = "MONITOR_STREAMING_"

# Kafka's legal topic names (the same rule the event contract applies to ``topic``).
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
# A URI scheme (hdfs://, s3a://, file:/...) means "pass through to Hadoop untouched".
_URI_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


_D = ModelConfig()


class ModelSettings(BaseModel):
    """The model's thresholds (``monitor.model.ModelConfig``), all in milliseconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    follower_lag_ms: int = Field(_D.follower_lag_ms, ge=1)
    follower_lag_offsets: int | None = Field(_D.follower_lag_offsets, ge=1)
    hw_lag_ms: int = Field(_D.hw_lag_ms, ge=1)
    stale_after_ms: int = Field(_D.stale_after_ms, ge=1)
    flapping_elections: int = Field(_D.flapping_elections, ge=1)
    flapping_window_ms: int = Field(_D.flapping_window_ms, ge=1)
    default_min_insync_replicas: int = Field(_D.default_min_insync_replicas, ge=1)
    clock_skew_ms: int = Field(_D.clock_skew_ms, ge=0)
    leo_history: int = Field(_D.leo_history, ge=2)
    epoch_truncation: bool = _D.epoch_truncation
    lineage_limit: int = Field(_D.lineage_limit, ge=1)

    def to_model_config(self) -> ModelConfig:
        return ModelConfig(**self.model_dump())

    @classmethod
    def from_model_config(cls, config: ModelConfig) -> ModelSettings:
        return cls(**{name: getattr(config, name) for name in cls.model_fields})


class StreamingConfig(BaseSettings):
    """Everything the job needs; see ``docs/streaming.md`` for what each setting does."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        case_sensitive=False,
        # A validation error must not echo the input: it may hold a password.
        hide_input_in_errors=True,
    )

    # -- Kafka -------------------------------------------------------------------------------
    bootstrap: str = Field("127.0.0.1:19092", min_length=1, description="Kafka bootstrap servers")
    events_topic: str = "__replication_monitor_events"
    findings_topic: str = "__replication_monitor_findings"
    deadletter_topic: str = "__replication_monitor_deadletter"
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_offsets_per_trigger: int | None = Field(
        None, ge=1, description="cap on records read per micro-batch (None: everything available)"
    )
    kafka_options: dict[str, str] = Field(
        default_factory=dict,
        description="extra options for the Kafka source and sinks (kafka.<client setting>); "
        "not for secrets: use the kafka_* settings below, which Spark's logs never show",
    )

    # -- Kafka security (docs/reliability.md#security) ---------------------------------------
    # Every secret is a SecretStr (prints as **********) or comes from a file (``*_file``: its
    # first line); the JAAS line with the password is built only in kafka_client_options().
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] | None = (
        Field(None, description="kafka.security.protocol (None: the client's PLAINTEXT)")
    )
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_sasl_password_file: Path | None = Field(
        None, description="file whose first line is the SASL password"
    )
    kafka_ssl_truststore_location: str | None = Field(
        None, description="CA certificates the brokers are checked against (PEM by default)"
    )
    kafka_ssl_truststore_type: Literal["PEM", "PKCS12", "JKS"] = "PEM"
    kafka_ssl_truststore_password: SecretStr | None = None
    kafka_ssl_truststore_password_file: Path | None = None
    kafka_ssl_keystore_location: str | None = Field(
        None,
        description="client certificate + private key for mutual TLS (PEM: certificate "
        "chain and PKCS#8 key in one file)",
    )
    kafka_ssl_keystore_type: Literal["PEM", "PKCS12", "JKS"] = "PEM"
    kafka_ssl_keystore_password: SecretStr | None = Field(
        None, description="PKCS12/JKS key stores only (a PEM key store has a key password)"
    )
    kafka_ssl_keystore_password_file: Path | None = None
    kafka_ssl_key_password: SecretStr | None = Field(
        None, description="password of the private key (required for a PEM key store)"
    )
    kafka_ssl_key_password_file: Path | None = None

    # -- Spark -------------------------------------------------------------------------------
    master: str | None = Field(
        "local[2]", description="Spark master; None keeps what spark-submit configured"
    )
    app_name: str = "kafka-replication-monitor"
    checkpoint: str = Field(
        ".cache/streaming/checkpoint",
        description="checkpoint location: a local folder, or any Hadoop URI (hdfs://, s3a://)",
    )
    store: str = Field(
        ".cache/streaming/store", description="Parquet state store (local folder or Hadoop URI)"
    )
    shuffle_partitions: int = Field(2, ge=1, le=10_000)
    spark_conf: dict[str, str] = Field(default_factory=dict, description="extra Spark settings")
    jars: list[str] | None = Field(
        None,
        description="jars for spark.jars; None resolves spark-sql-kafka with monitor.jars, "
        "[] adds none (use --packages / a cluster that already has them)",
    )

    # -- the stateful operator ---------------------------------------------------------------
    buckets: int = Field(16, ge=1, le=65_536, description="state keys: hash buckets of partitions")
    trigger_seconds: float = Field(
        5.0, ge=0, description="micro-batch interval (0: as fast as possible)"
    )
    tick_ms: int = Field(5_000, ge=100, description="processing-time interval of the model's tick")
    catchup_slack_ms: int = Field(
        10_000,
        ge=0,
        description="while a bucket receives events, its tick clock is at most this far past "
        "the newest observed_at it applied (a backlog replay does not look like silence)",
    )
    once: bool = Field(False, description="process what is available, then stop (availableNow)")

    # -- the state store ---------------------------------------------------------------------
    compact_every_batches: int = Field(
        100, ge=0, description="fold old store batches into the snapshot every N batches (0: off)"
    )
    store_history_s: float = Field(
        3600.0, ge=0, description="keep this much per-batch history for explain (seconds)"
    )

    # -- the Prometheus exporter (in the driver) --------------------------------------------
    metrics_port: int | None = Field(
        None, ge=0, le=65_535, description="serve /metrics on this port (None: no exporter)"
    )
    metrics_host: str = Field(
        "127.0.0.1", min_length=1, description="bind address of /metrics (0.0.0.0: every one)"
    )
    per_partition: Literal["findings", "all", "none"] = Field(
        "findings",
        description="per-partition series: partitions with an open finding, all, or none",
    )
    model: ModelSettings = Field(default_factory=ModelSettings)

    @field_validator("events_topic", "findings_topic", "deadletter_topic")
    @classmethod
    def _topic_name(cls, value: str) -> str:
        if not _TOPIC_RE.match(value) or value in (".", ".."):
            raise ValueError(f"not a legal Kafka topic name: {value!r}")
        return value

    @field_validator("checkpoint", "store")
    @classmethod
    def _location(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="before")
    @classmethod
    def _secret_files(cls, data: Any) -> Any:
        return secrets_from_files(data, {name: f"{name}_file" for name in _SECRET_FIELDS})

    @model_validator(mode="after")
    def _security(self) -> StreamingConfig:
        protocol = self.kafka_security_protocol or "PLAINTEXT"
        if protocol.startswith("SASL_"):
            if self.kafka_sasl_mechanism is None:
                raise ValueError(f"kafka_security_protocol {protocol} needs kafka_sasl_mechanism")
            if not self.kafka_sasl_username or self.kafka_sasl_password is None:
                raise ValueError(
                    f"{self.kafka_sasl_mechanism} needs kafka_sasl_username and "
                    "kafka_sasl_password (or kafka_sasl_password_file)"
                )
        if not protocol.endswith("SSL") and (
            self.kafka_ssl_truststore_location or self.kafka_ssl_keystore_location
        ):
            raise ValueError(f"kafka_ssl_* files are set but kafka_security_protocol is {protocol}")
        if self.kafka_ssl_keystore_type == "PEM":
            if self.kafka_ssl_keystore_password is not None:
                raise ValueError(
                    "a PEM key store has no store password: give kafka_ssl_key_password"
                )
            if self.kafka_ssl_keystore_location and self.kafka_ssl_key_password is None:
                raise ValueError(
                    "a PEM key store needs kafka_ssl_key_password (its key must be encrypted)"
                )
        ours = set(self._security_options())
        clash = sorted(ours & set(self.kafka_options))
        if clash:
            raise ValueError(
                f"kafka_options repeats {clash}: set them with the kafka_* settings only"
            )
        return self

    def _security_options(self) -> dict[str, str]:
        """The Kafka client options the kafka_* security settings stand for (secrets in)."""
        o: dict[str, str] = {}
        if self.kafka_security_protocol:
            o["kafka.security.protocol"] = self.kafka_security_protocol
        if self.kafka_sasl_mechanism and (self.kafka_security_protocol or "").startswith("SASL_"):
            o["kafka.sasl.mechanism"] = self.kafka_sasl_mechanism
            module = (
                "org.apache.kafka.common.security.plain.PlainLoginModule"
                if self.kafka_sasl_mechanism == "PLAIN"
                else "org.apache.kafka.common.security.scram.ScramLoginModule"
            )
            user = _jaas_quote(self.kafka_sasl_username or "")
            password = _jaas_quote(
                self.kafka_sasl_password.get_secret_value() if self.kafka_sasl_password else ""
            )
            o["kafka.sasl.jaas.config"] = f"{module} required username={user} password={password};"
        stores = (
            ("truststore", self.kafka_ssl_truststore_location, self.kafka_ssl_truststore_type,
             self.kafka_ssl_truststore_password),
            ("keystore", self.kafka_ssl_keystore_location, self.kafka_ssl_keystore_type,
             self.kafka_ssl_keystore_password),
        )  # fmt: skip
        for store, location, kind, password_ in stores:
            if location:
                o[f"kafka.ssl.{store}.location"] = str(Path(location).expanduser().resolve())
                o[f"kafka.ssl.{store}.type"] = kind
                if password_ is not None:
                    o[f"kafka.ssl.{store}.password"] = password_.get_secret_value()
        if self.kafka_ssl_key_password is not None:
            o["kafka.ssl.key.password"] = self.kafka_ssl_key_password.get_secret_value()
        return o

    def kafka_client_options(self) -> dict[str, str]:
        """Every option for the Kafka source and sinks: the security settings as Kafka
        client options (secrets revealed here only: pass straight to Spark, never log),
        then ``kafka_options``."""
        return {**self._security_options(), **self.kafka_options}

    def secret_values(self) -> list[str]:
        """The revealed secrets (for tests and log redaction)."""
        values = (getattr(self, name) for name in _SECRET_FIELDS)
        return [v.get_secret_value() for v in values if v is not None and v.get_secret_value()]

    @model_validator(mode="after")
    def _distinct_topics(self) -> StreamingConfig:
        topics = [self.events_topic, self.findings_topic, self.deadletter_topic]
        if len(set(topics)) != 3:
            raise ValueError(f"events, findings and dead-letter topics must differ: {topics}")
        return self

    def resolve_location(self, location: str) -> str:
        """A URI passes through; a plain path becomes absolute (executors share no cwd)."""
        if _URI_RE.match(location) and not re.match(r"^[a-zA-Z]:\\", location):
            return location
        return str(Path(location).expanduser().resolve())

    @property
    def checkpoint_location(self) -> str:
        return self.resolve_location(self.checkpoint)

    @property
    def store_location(self) -> str:
        return self.resolve_location(self.store)


_SECRET_FIELDS = (
    "kafka_sasl_password",
    "kafka_ssl_truststore_password",
    "kafka_ssl_keystore_password",
    "kafka_ssl_key_password",
)


def _jaas_quote(value: str) -> str:
    """A JAAS option value: double-quoted, with backslashes and quotes escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unknown_env_keys(environ: dict[str, str] | None = None) -> list[str]:
    """``MONITOR_STREAMING_*`` variables that name no setting (pydantic-settings ignores them)."""
    env = os.environ if environ is None else environ
    fields = {name.upper() for name in StreamingConfig.model_fields}
    nested = {name.upper() for name in ModelSettings.model_fields}
    bad = []
    for key in env:
        if not key.upper().startswith(ENV_PREFIX):
            continue
        rest = key.upper()[len(ENV_PREFIX) :]
        head, _, tail = rest.partition("__")
        if head not in fields or (tail and (head != "MODEL" or tail not in nested)):
            bad.append(key)
    return sorted(bad)


def load_config(**overrides: Any) -> StreamingConfig:
    """Defaults < environment < ``overrides`` (None values in overrides are ignored)."""
    bad = unknown_env_keys()
    if bad:
        raise ValueError(f"unknown streaming settings in the environment: {', '.join(bad)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    return StreamingConfig(**given)
