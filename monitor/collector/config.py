"""The collector's configuration: one pydantic-settings model (docs/configuration.md).

Every key can come from a settings file (``--config`` or ``MONITOR_COLLECTOR_CONFIG``: TOML,
YAML or JSON), the environment as ``MONITOR_COLLECTOR_<KEY>`` (nested:
``MONITOR_COLLECTOR_KAFKA__SASL_PASSWORD_FILE``) or a flag; flags beat the environment, which
beats the file (:mod:`monitor.settings`). Unknown keys are errors, in the file and in the
environment. The Kafka connection (``kafka``, ``events_kafka``) is
:class:`monitor.connection.KafkaConnection`, the same settings the Spark job takes: secrets
are :class:`SecretStr` or files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from monitor import settings
from monitor.collector.jmx import MAX_PAGE_BYTES, PROFILES, JmxNames
from monitor.collector.shards import Shard
from monitor.collector.versions import UncleanCounter
from monitor.connection import KafkaConnection
from monitor.contract.events import EVENTS_TOPIC


class CollectorConfig(settings.LayeredSettings):
    """What to read, how often, and where to publish."""

    model_config = SettingsConfigDict(
        env_prefix="MONITOR_COLLECTOR_",
        env_nested_delimiter="__",
        extra="forbid",
        hide_input_in_errors=True,
    )

    cluster: str = Field(default="default", min_length=1, description="cluster label on events")
    #: The watched cluster (required: ``--bootstrap``).
    kafka: KafkaConnection
    #: Each broker's JMX exporter endpoint, by broker id.
    jmx_urls: dict[int, str] = Field(default_factory=dict)
    events_topic: str = EVENTS_TOPIC
    #: The codec of the producer's batches on the events topic (kafka-python: zstd needs
    #: the zstandard package, a base dependency; lz4 the lz4 package). Consecutive rounds
    #: repeat most of each record: docs/benchmarks.md has the bytes per round by codec.
    events_compression: Literal["zstd", "gzip", "lz4", "snappy", "none"] = "zstd"
    #: Where the events go: a cluster of the monitor's own (``--events-bootstrap``). Required
    #: to publish, unless ``events_on_watched_cluster``.
    events_kafka: KafkaConnection | None = None
    #: Publish the events on the watched cluster itself, when no ``events_kafka`` is given.
    #: Off by default: a monitor whose telemetry rides on the cluster it watches goes blind
    #: during the very outage it must report (the collector warns when it is on).
    events_on_watched_cluster: bool = False
    interval_s: float = Field(default=5.0, gt=0)
    #: Topic configs change rarely: read them every N rounds.
    config_every_rounds: int = Field(default=6, ge=1)
    #: The deadline of one exporter page: connecting, asking and reading all of it (not a
    #: timeout per read: an exporter sending a byte at a time is cut here). Unset (the
    #: default): it follows the interval and the broker's own pages -- ``interval_s``, or
    #: three times the slowest of the broker's last pages where that is longer, at most
    #: ``jmx_timeout_max_s`` (:func:`page_deadline`): a page that is merely slow (broad
    #: exporter rules on a broker of thousands of partitions) is read, not failed.
    jmx_timeout_s: float | None = Field(default=None, gt=0)
    #: With ``jmx_timeout_s`` unset, the longest a page may take (and a broker's first page,
    #: before its pages have been timed). A third of the model's default lag thresholds
    #: (Kafka's ``replica.lag.time.max.ms``, 30 s): the samples of a round carry its start,
    #: so a round read over this long must still show a caught-up follower as caught up.
    jmx_timeout_max_s: float = Field(default=10.0, gt=0)
    #: The largest exporter page read; a larger one fails that broker's scrape.
    jmx_max_bytes: int = Field(default=MAX_PAGE_BYTES, ge=1024)
    #: The deadline of a round's exporter pages, from the round's start: a broker whose
    #: page is not in by then is a failed scrape this round (``alive: false``, as one that
    #: timed out), its late page thrown away. Unset (the default): each page has its own
    #: deadline and no other. At least ``jmx_timeout_s``, so each page gets its own time.
    round_timeout_s: float | None = Field(default=None, gt=0)
    #: Whose exporter rules name the metrics (monitor.collector.jmx.PROFILES): "auto" detects
    #: it from each broker's first page.
    jmx_profile: Literal["auto", "monitor", "strimzi", "confluent"] = "auto"
    #: Metric names that differ from the profile's, by field of JmxNames (e.g.
    #: ``{log_end_offset = "my_log_end_offset"}``).
    jmx_names: dict[str, str] = Field(default_factory=dict)
    #: Regular expression of topics to leave out (the monitor's own topics by default).
    exclude_topics: str = r"^__replication_monitor_"
    include_internal: bool = True
    #: Forward the controller's unclean-election counter (a witness of unclean elections):
    #: "auto" where the brokers' version counts correctly (4.1+), "on" (ZooKeeper clusters
    #: count correctly too), "off". See monitor.collector.versions.
    unclean_counter: UncleanCounter = "auto"
    #: What a partition's round is on the events topic: "partition" -- one record, the
    #: partition event carrying its replicas' samples (``replica_samples``: a round record);
    #: "replica" -- the partition event and one replica event per replica, as before round
    #: records (a job older than them reads only the partition event of a round record).
    round_records: Literal["partition", "replica"] = "partition"
    #: This collector's part of the cluster when N collectors share it: "i/N", the i-th
    #: (0-based) of N. It sends the partition (and replica) events of the topics whose
    #: CRC-32 modulo N is i, and every topic's and broker's events (monitor.collector.shards;
    #: docs/collector.md, "Several collectors on one cluster"). "0/1": the whole cluster.
    shard: str = "0/1"
    #: The collector's own health metrics endpoint (None: not served).
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    #: The Prometheus exporter-toolkit web configuration of that endpoint: TLS (and mutual
    #: TLS), basic-auth users with bcrypt hashes (docs/deploy.md, "Securing /metrics";
    #: monitor.exporter.webconfig). Reloaded when the file changes. None: plain HTTP.
    web_config_file: Path | None = None

    @field_validator("jmx_urls")
    @classmethod
    def _urls(cls, v: dict[int, str]) -> dict[int, str]:
        for broker, url in v.items():
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"jmx_urls[{broker}]: {url!r} is not an http(s) URL")
        return v

    @field_validator("events_compression")
    @classmethod
    def _codec(cls, v: str) -> str:
        from kafka import codec

        have = {"gzip": codec.has_gzip, "snappy": codec.has_snappy, "lz4": codec.has_lz4,
                "zstd": codec.has_zstd}  # fmt: skip
        if v in have and not have[v]():
            package = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}.get(v, v)
            raise ValueError(
                f"{v} needs the {package} package, not installed here: install it, or use "
                "zstd (installed with the monitor)"
            )
        return v

    @field_validator("jmx_names")
    @classmethod
    def _names(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(v) - set(JmxNames.model_fields))
        if unknown:
            raise ValueError(
                f"jmx_names: no such metric {', '.join(unknown)} "
                f"(known: {', '.join(JmxNames.model_fields)})"
            )
        return v

    @field_validator("shard")
    @classmethod
    def _shard(cls, v: str) -> str:
        return str(Shard.parse(v))  # a ValueError names what is wrong

    def events_connection(self) -> KafkaConnection:
        """Where the events are published: ``events_kafka``, or the watched cluster when
        ``events_on_watched_cluster`` says so; a :class:`ValueError` naming the setting
        otherwise (:data:`NO_EVENTS_CLUSTER`)."""
        if self.events_kafka is not None:
            return self.events_kafka
        if self.events_on_watched_cluster:
            return self.kafka
        raise ValueError(NO_EVENTS_CLUSTER)

    def shard_spec(self) -> Shard:
        """The shard this collector sends (:class:`Shard`)."""
        return Shard.parse(self.shard)

    def jmx_names_for(self, profile: str) -> JmxNames:
        """The metric names to read a page of ``profile`` with (``jmx_names`` applied)."""
        return PROFILES[profile].model_copy(update=self.jmx_names)

    def page_deadline(self, recent: Sequence[float]) -> float:
        """The deadline of a broker's next page, given how long its last pages took
        (``recent``, seconds; empty before the first): ``jmx_timeout_s`` where set, else
        :func:`page_deadline` -- under ``round_timeout_s`` either way, where that is set."""
        if self.jmx_timeout_s is not None:
            deadline = self.jmx_timeout_s
        else:
            deadline = page_deadline(recent, self.interval_s, self.jmx_timeout_max_s)
        if self.round_timeout_s is not None:
            deadline = min(deadline, self.round_timeout_s)
        return deadline

    @model_validator(mode="after")
    def _deadlines(self) -> CollectorConfig:
        if (
            self.round_timeout_s is not None
            and self.jmx_timeout_s is not None
            and self.round_timeout_s < self.jmx_timeout_s
        ):
            # Every page slower than the round's deadline would be cut, whatever
            # jmx_timeout_s says: raising one without the other is a mistake to name.
            raise ValueError(
                f"round_timeout_s ({self.round_timeout_s:g}) is shorter than jmx_timeout_s "
                f"({self.jmx_timeout_s:g}): a page gets the round's deadline at most; raise "
                "round_timeout_s too"
            )
        return self

    @model_validator(mode="after")
    def _pem_only(self) -> CollectorConfig:
        for name, conn in (("kafka", self.kafka), ("events_kafka", self.events_kafka)):
            if conn is not None and conn.java_only():
                raise ValueError(
                    f"{name}: {', '.join(conn.java_only())} is for the Spark job; the "
                    "collector (kafka-python) reads PEM files: give ssl_cafile / ssl_certfile"
                )
        return self


#: How many of a broker's last pages its next page's deadline follows.
PAGES_TIMED = 5


def page_deadline(recent: Sequence[float], interval_s: float, longest_s: float) -> float:
    """The deadline of a broker's next exporter page when none is set: the collection
    interval, or three times the slowest of the broker's last pages (``recent``) where that
    is longer -- a page's render time varies with the broker's load and GC -- and never
    more than ``longest_s``, which is also the deadline of a first page (nothing timed
    yet). Only pages read count: a broker that stops answering keeps the deadline its
    pages had, so one hung exporter does not slow every later round down.

    >>> page_deadline([0.05, 0.04], interval_s=5, longest_s=10)  # fast rules: the interval
    5
    >>> page_deadline([2.9, 2.1], interval_s=5, longest_s=10)  # broad rules: the page's
    8.7
    >>> page_deadline([6.0], interval_s=5, longest_s=10), page_deadline([], 5, 10)
    (10, 10)
    """
    if not recent:
        return longest_s
    return min(longest_s, max(interval_s, round(3 * max(recent), 3)))


#: How to give each setting that has no default, for the line that says it is missing.
REQUIRED = {
    "kafka.bootstrap_servers": "the watched cluster's bootstrap servers (--bootstrap "
    "HOST:PORT, MONITOR_COLLECTOR_KAFKA__BOOTSTRAP_SERVERS, or kafka.bootstrap_servers in "
    "the --config file)",
}

#: Publishing without ``events_kafka`` (and without ``events_on_watched_cluster``).
NO_EVENTS_CLUSTER = (
    "events_kafka is required to publish: the cluster of the monitor's own topics "
    "(--events-bootstrap HOST:PORT, MONITOR_COLLECTOR_EVENTS_KAFKA__BOOTSTRAP_SERVERS, or "
    "events_kafka.bootstrap_servers in the --config file); to publish on the watched cluster "
    "itself, say so: events_on_watched_cluster = true (--events-on-watched-cluster)"
)

#: Said when the events go to the watched cluster.
BLIND_SPOT = (
    "events_on_watched_cluster: the events go to the watched cluster itself -- when it fails, "
    "the monitor's own telemetry fails with it (an election there can delay or lose the "
    "rounds that show it); give the monitor a cluster of its own (events_kafka) in production"
)


def unknown_env_keys(environ: dict[str, str] | None = None) -> list[str]:
    """``MONITOR_COLLECTOR_*`` variables that name no setting (pydantic-settings ignores them).

    >>> unknown_env_keys({"MONITOR_COLLECTOR_INTERVL_S": "1", "MONITOR_COLLECTOR_CLUSTER": "c"})
    ['MONITOR_COLLECTOR_INTERVL_S']
    """
    return settings.unknown_settings_env(CollectorConfig, environ=environ)


def load_config(
    path: Path | None = None,
    args: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
) -> CollectorConfig:
    """Flags (``args``) > ``MONITOR_COLLECTOR_*`` > the file (``path``, else the one
    ``MONITOR_COLLECTOR_CONFIG`` names) > ``defaults`` > the model's defaults."""
    return settings.load(CollectorConfig, "collector", path, args, defaults=defaults)
