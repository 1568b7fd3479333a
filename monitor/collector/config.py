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

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from monitor import settings
from monitor.collector.jmx import MAX_PAGE_BYTES, PROFILES, JmxNames, PageAccess
from monitor.collector.shards import Shard
from monitor.collector.versions import UncleanCounter
from monitor.connection import KafkaConnection, exposed_in_clear
from monitor.contract.events import EVENTS_TOPIC


def _existing_file(path: Path | None) -> Path | None:
    """A file setting's path, which must name a readable file (the error names both)."""
    if path is None:
        return None
    path = path.expanduser()
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    if not path.is_file():
        raise ValueError(f"{path} is not a file")
    try:
        with path.open("rb"):
            pass
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    return path


def _secret_file(path: Path) -> Path:
    """A secret's file: readable and not empty (its first line is the secret; read again at
    each page, never kept here)."""
    checked = _existing_file(path)
    assert checked is not None
    if not checked.read_text(errors="replace").strip():
        raise ValueError(f"{checked} is empty")
    return checked


class JmxTlsConfig(BaseModel):
    """TLS to the exporter pages (``https://``): Prometheus's ``tls_config``, its keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: PEM CA bundle the exporter's certificate is checked against (unset: the system's).
    ca_file: Path | None = None
    #: PEM client certificate for mutual TLS (may hold its key too), and its key.
    cert_file: Path | None = None
    key_file: Path | None = None
    #: The name the exporter's certificate must hold (and the SNI sent), when it is not the
    #: URL's host (a page reached by IP address, a certificate for the broker's own name).
    server_name: str | None = Field(default=None, min_length=1)
    #: Do not check the exporter's certificate at all (a test bench; never in production).
    insecure_skip_verify: bool = False

    _files = field_validator("ca_file", "cert_file", "key_file")(_existing_file)

    @model_validator(mode="after")
    def _loads(self) -> JmxTlsConfig:
        if self.key_file is not None and self.cert_file is None:
            raise ValueError("key_file needs cert_file (the certificate of that key)")
        problem = PageAccess(
            ca_file=self.ca_file, cert_file=self.cert_file, key_file=self.key_file
        ).tls_problem()
        if problem:
            raise ValueError(problem)
        return self


class JmxBasicAuth(BaseModel):
    """HTTP basic auth to the exporter pages: Prometheus's ``basic_auth``, the password from
    a file only (re-read when it changes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    username: str = Field(min_length=1)
    #: The file whose first line is the password.
    password_file: Path

    _file = field_validator("password_file")(_secret_file)

    @field_validator("username")
    @classmethod
    def _user(cls, v: str) -> str:
        if ":" in v or not v.isprintable():
            raise ValueError("a basic-auth username has no ':' and no control character")
        return v


class JmxAuthorization(BaseModel):
    """An ``Authorization: <type> <credentials>`` header to the exporter pages (a bearer
    token): Prometheus's ``authorization``, the credentials from a file only (re-read when
    it changes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str = Field(default="Bearer", pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
    #: The file whose first line is the token.
    credentials_file: Path

    _file = field_validator("credentials_file")(_secret_file)

    @field_validator("type")
    @classmethod
    def _not_basic(cls, v: str) -> str:
        if v.lower() == "basic":
            raise ValueError('type "Basic": use basic_auth (username and password_file)')
        return v


class JmxScrape(BaseModel):
    """One broker's exporter page reached otherwise than the others
    (``jmx_scrape_per_broker``): each key given replaces the collector-wide one --
    ``tls_config`` for ``jmx_tls_config``; ``basic_auth`` or ``authorization`` (either, or
    both set to null: none) for ``jmx_basic_auth`` and ``jmx_authorization`` together;
    ``allow_insecure_credentials`` for ``jmx_allow_insecure_credentials``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tls_config: JmxTlsConfig | None = None
    basic_auth: JmxBasicAuth | None = None
    authorization: JmxAuthorization | None = None
    allow_insecure_credentials: bool = False

    @model_validator(mode="after")
    def _one_auth(self) -> JmxScrape:
        if self.basic_auth is not None and self.authorization is not None:
            raise ValueError("give basic_auth or authorization, not both")
        return self


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
    #: How the exporter pages are reached, for every broker (``jmx_scrape_per_broker``
    #: overrides them for one): TLS material for ``https://`` pages, and basic auth or an
    #: ``Authorization`` header (a bearer token), as Prometheus's ``scrape_config`` names
    #: them (docs/collector.md, "Scraping secured exporter pages"). Secrets from files
    #: only, read again when the file changes; never logged.
    jmx_tls_config: JmxTlsConfig | None = None
    jmx_basic_auth: JmxBasicAuth | None = None
    jmx_authorization: JmxAuthorization | None = None
    #: Send a password or token to a plain ``http://`` page of another host (refused
    #: otherwise: anyone on the path could read it; loopback is allowed).
    jmx_allow_insecure_credentials: bool = False
    #: By broker id: that broker's page reached otherwise (:class:`JmxScrape`).
    jmx_scrape_per_broker: dict[int, JmxScrape] = Field(default_factory=dict)

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

    def _scrape_of(
        self, broker: int
    ) -> tuple[
        tuple[str, JmxTlsConfig | None], tuple[str, JmxBasicAuth | JmxAuthorization | None], bool
    ]:
        """A broker's TLS settings and credentials in force, each with the setting it
        comes from, and whether credentials may go over plain HTTP."""
        tls: tuple[str, JmxTlsConfig | None] = ("jmx_tls_config", self.jmx_tls_config)
        if self.jmx_basic_auth is not None:
            auth: tuple[str, JmxBasicAuth | JmxAuthorization | None] = (
                "jmx_basic_auth",
                self.jmx_basic_auth,
            )
        else:
            auth = ("jmx_authorization", self.jmx_authorization)
        insecure = self.jmx_allow_insecure_credentials
        own = self.jmx_scrape_per_broker.get(broker)
        if own is not None:
            given, where = own.model_fields_set, f"jmx_scrape_per_broker[{broker}]"
            if "tls_config" in given:
                tls = (f"{where}.tls_config", own.tls_config)
            if own.basic_auth is not None:
                auth = (f"{where}.basic_auth", own.basic_auth)
            elif {"basic_auth", "authorization"} & given:
                auth = (f"{where}.authorization", own.authorization)
            if "allow_insecure_credentials" in given:
                insecure = own.allow_insecure_credentials
        return tls, auth, insecure

    def page_access(self, broker: int) -> PageAccess | None:
        """How ``broker``'s exporter page is reached (:class:`jmx.PageAccess`: paths and
        names, no secret), None when plainly (no TLS settings, no credentials)."""
        (tls_where, tls), (auth_where, auth), _ = self._scrape_of(broker)
        if tls is None and auth is None:
            return None
        tls = tls or JmxTlsConfig()
        return PageAccess(
            ca_file=tls.ca_file,
            cert_file=tls.cert_file,
            key_file=tls.key_file,
            server_name=tls.server_name,
            insecure_skip_verify=tls.insecure_skip_verify,
            username=auth.username if isinstance(auth, JmxBasicAuth) else None,
            password_file=auth.password_file if isinstance(auth, JmxBasicAuth) else None,
            auth_type=auth.type if isinstance(auth, JmxAuthorization) else "Bearer",
            credentials_file=auth.credentials_file if isinstance(auth, JmxAuthorization) else None,
            tls_setting=tls_where,
            auth_setting=auth_where,
        )

    @model_validator(mode="after")
    def _jmx_access(self) -> CollectorConfig:
        if self.jmx_basic_auth is not None and self.jmx_authorization is not None:
            raise ValueError("give jmx_basic_auth or jmx_authorization, not both")
        stray = sorted(set(self.jmx_scrape_per_broker) - set(self.jmx_urls))
        if stray:
            raise ValueError(f"jmx_scrape_per_broker: broker(s) {stray} have no jmx_urls entry")
        for broker, url in sorted(self.jmx_urls.items()):
            (tls_where, tls), (auth_where, auth), insecure = self._scrape_of(broker)
            if not url.startswith("http://"):
                continue
            if tls is not None:
                raise ValueError(
                    f"jmx_urls[{broker}] is {url}, plain HTTP, but {tls_where} is set: use "
                    f"https:// (or give jmx_scrape_per_broker[{broker}] tls_config = null)"
                )
            if auth is not None and exposed_in_clear(url) and not insecure:
                what = "password" if isinstance(auth, JmxBasicAuth) else "token"
                raise ValueError(
                    f"jmx_urls[{broker}] is {url}, plain HTTP to another host: {auth_where}'s "
                    f"{what} would cross the network in clear -- use https:// (jmx_tls_config), "
                    "or set jmx_allow_insecure_credentials = true to send it anyway"
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
