"""Configuration of the streaming job: one validated model (docs/configuration.md).

Precedence (highest first, :mod:`monitor.settings`): explicit arguments (the CLI's flags),
environment variables ``MONITOR_STREAMING_<FIELD>`` (``MONITOR_STREAMING_MODEL__STALE_AFTER_MS``
for the model's thresholds, ``MONITOR_STREAMING_KAFKA__SASL_PASSWORD_FILE`` for the
connection), the settings file (``--config`` or ``MONITOR_STREAMING_CONFIG``: TOML, YAML or
JSON), then the defaults below. Unknown keys are errors, in arguments, the file and the
environment alike: a typo'd setting must not be silently ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from monitor import settings
from monitor.connection import KafkaConnection
from monitor.contract.events import DEADLETTER_TOPIC, EVENTS_TOPIC, FINDINGS_TOPIC
from monitor.model import ModelConfig

ENV_PREFIX = "MONITOR_STREAMING_"
#: ``MONITOR_STREAMING_*`` variables that are no setting yet no mistake (besides ``CONFIG``,
#: the settings file): the file of per-bucket handler times (streaming.operator).
OTHER_ENV = ("PROFILE",)

# Kafka's legal topic names (the same rule the event contract applies to ``topic``).
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
# A URI scheme (hdfs://, s3a://, file:/...) means "pass through to Hadoop untouched".
_URI_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


class StreamingConfig(settings.LayeredSettings):
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

    # -- Kafka (the monitor's own cluster: events in, findings and dead letters out) ---------
    kafka: KafkaConnection = Field(
        description="how to reach the cluster of the monitor's topics (docs/reliability.md"
        "#security): the collector's settings, rendered for the Java client; required",
    )
    events_topic: str = EVENTS_TOPIC
    findings_topic: str = FINDINGS_TOPIC
    deadletter_topic: str = DEADLETTER_TOPIC
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_offsets_per_trigger: int | None = Field(
        1_000_000,
        ge=1,
        description="cap on records read per micro-batch, so a backlog (after an outage) is "
        "read in bounded batches (None: everything available)",
    )
    max_record_bytes: int = Field(
        256 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="a record longer than this is dead-lettered before it is parsed: the "
        "dead letter carries its size and SHA-256, the bytes are kept in <store>/deadletters/",
    )
    kafka_options: dict[str, str] = Field(
        default_factory=dict,
        description="extra options for the Kafka source and sinks (kafka.<client setting>); "
        "not for secrets: use the kafka settings, which Spark's logs never show",
    )

    # -- Spark -------------------------------------------------------------------------------
    master: str | None = Field(
        "local[2]", description="Spark master; None keeps what spark-submit configured"
    )
    app_name: str = "kafka-replication-monitor"
    checkpoint: str = Field(
        default_factory=lambda: str(settings.state_dir() / "checkpoint"),
        description="checkpoint location: a local folder, or any Hadoop URI (hdfs://, s3a://); "
        "default: checkpoint/ in the state folder (monitor.settings.state_dir)",
    )
    store: str = Field(
        default_factory=lambda: str(settings.state_dir() / "store"),
        description="Parquet state store (local folder or Hadoop URI); default: store/ in the "
        "state folder",
    )
    shuffle_partitions: int = Field(2, ge=1, le=10_000)
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        description="extra Spark settings (the job's security settings are applied after "
        "them: streaming.session.SECURITY_CONF)",
    )
    spark_authenticate: bool = Field(
        True,
        description="spark.authenticate with a secret generated per run (local and standalone "
        "masters; on Kubernetes Spark makes its own: docs/deploy.md)",
    )
    spark_encrypt: bool = Field(
        False,
        description="also encrypt Spark's RPC and block transfers and its local shuffle "
        "files (spark.network.crypto.enabled, spark.io.encryption.enabled)",
    )
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
    state_refresh_ms: int = Field(
        120_000,
        ge=0,
        description="a partition's state row is written when its leadership, ISR, replicas, "
        "lineage or open conditions changed, and its offsets, lags and stamps at least this "
        "often (staggered over partitions; 0: every batch that touches it)",
    )
    replay_batches: int = Field(
        4,
        ge=0,
        le=64,
        description="a batch that changed most of a bucket is stored as its input while the "
        "bucket's Python worker keeps it, at most this many after a snapshot: a restart "
        "applies up to this many batches again (0: every such batch stores the snapshot)",
    )
    once: bool = Field(False, description="process what is available, then stop (availableNow)")
    wait_for_topics_s: float = Field(
        0.0,
        ge=0,
        le=3600,
        description="wait up to this long for the events topic before starting the query "
        "(its Spark starts meanwhile: monitor run makes the topics while the job starts); "
        "0: start at once",
    )

    # -- the state store ---------------------------------------------------------------------
    compact_every_batches: int = Field(
        100, ge=0, description="fold old store batches into the snapshot every N batches (0: off)"
    )
    store_history_s: float = Field(
        3600.0, ge=0, description="keep this much per-batch history for explain (seconds)"
    )
    findings_retention_s: float = Field(
        30 * 86_400.0,
        gt=0,
        description="keep stored findings this long after their detection (seconds); a "
        "condition still open is kept until it resolves",
    )

    # -- the Prometheus exporter (in the driver) --------------------------------------------
    metrics_port: int | None = Field(
        None, ge=0, le=65_535, description="serve /metrics on this port (None: no exporter)"
    )
    metrics_host: str = Field(
        "127.0.0.1", min_length=1, description="bind address of /metrics (0.0.0.0: every one)"
    )
    web_config_file: Path | None = Field(
        None,
        description="Prometheus exporter-toolkit web configuration of /metrics: TLS, mutual "
        "TLS, basic-auth users (bcrypt); reloaded when it changes (None: plain HTTP)",
    )
    metrics_max_partitions: int = Field(
        10_000,
        ge=0,
        description="per-partition series for at most this many partitions (most severe, "
        "then sticky, then oldest); the rest counted per topic in partitions_capped (0: none)",
    )
    per_partition: Literal["findings", "all", "none"] = Field(
        "findings",
        description="per-partition series: partitions with an open finding, all, or none",
    )
    #: The model's thresholds: :class:`~monitor.model.ModelConfig` itself, validated once
    #: here, before Spark or the metrics port start (``MONITOR_STREAMING_MODEL__<NAME>``).
    model: ModelConfig = Field(default_factory=ModelConfig)

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

    @model_validator(mode="after")
    def _kafka_options(self) -> StreamingConfig:
        self.kafka.java_options()  # a setting the Java client cannot take fails here
        clash = sorted(set(self.kafka.java_options()) & set(self.kafka_options))
        if clash:
            raise ValueError(f"kafka_options repeats {clash}: set them in kafka only")
        return self

    def kafka_client_options(self) -> dict[str, str]:
        """Every option for the Kafka source and sinks: the connection's (secrets revealed
        here only: pass straight to Spark, never log), then ``kafka_options``."""
        return {**self.kafka.java_options(), **self.kafka_options}

    def secret_values(self) -> list[str]:
        """The revealed secrets (for tests and log redaction)."""
        return self.kafka.secret_values()

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


#: How to give each setting that has no default, for the line that says it is missing.
REQUIRED = {
    "kafka.bootstrap_servers": "the bootstrap servers of the monitor's own cluster, where "
    "the events are read (--bootstrap HOST:PORT, MONITOR_STREAMING_KAFKA__BOOTSTRAP_SERVERS, "
    "or kafka.bootstrap_servers in the --config file)",
}


def unknown_env_keys(environ: dict[str, str] | None = None) -> list[str]:
    """``MONITOR_STREAMING_*`` variables that name no setting (pydantic-settings ignores them)."""
    return settings.unknown_settings_env(StreamingConfig, OTHER_ENV, environ)


def load_config(path: Path | None = None, /, **flags: Any) -> StreamingConfig:
    """``flags`` > ``MONITOR_STREAMING_*`` > the file (``path``, else the one
    ``MONITOR_STREAMING_CONFIG`` names) > defaults. A flag given as None is a value (None)."""
    return settings.load(StreamingConfig, "streaming", path, flags, allowed_env=OTHER_ENV)
