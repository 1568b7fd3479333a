"""The collection loop: read the cluster, build validated events, publish them.

Lifecycle (as Burrow's modules): ``Collector(config)`` validates and never connects;
:meth:`start` connects; :meth:`round` reads once; :meth:`publish` produces;
:meth:`run` loops until told to stop; :meth:`stop` closes in reverse order.

No one value and no one broker costs a round: a sample that cannot be read is left out of
its broker's scrape (:func:`jmx.parse`), an event that breaks the contract is left out of
the round (:func:`build.checked`), both counted by reason; a page not in by its deadline
(:meth:`CollectorConfig.page_deadline`: by default the interval, or longer for a broker
whose pages are slow) is that broker's failed scrape this round.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import itertools
import logging
import operator
import queue
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from functools import partial
from math import inf
from typing import Any, TypeVar

from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaError
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from monitor import __version__
from monitor.collector import build, jmx
from monitor.collector.admin import (
    PartitionMetadata,
    Reads,
    TopicDurability,
    read_brokers,
    read_epoch_starts,
    read_high_watermarks,
    read_metadata,
    read_reassignments,
    read_topic_configs,
)
from monitor.collector.config import BLIND_SPOT, PAGES_TIMED, CollectorConfig
from monitor.collector.security import explain_connect_failure, install_redaction
from monitor.collector.versions import broker_version, trust_unclean_counter
from monitor.contract.events import AnyEvent, BrokerEvent, dumps
from monitor.web import WebServer

log = logging.getLogger("monitor.collector")


def moves_around(
    before: dict[tuple[str, int], tuple[list[int], list[int]]] | None,
    after: dict[tuple[str, int], tuple[list[int], list[int]]] | None,
) -> dict[tuple[str, int], tuple[list[int], list[int]]] | None:
    """The moves that ran at the metadata read, from the reads just before and just after
    it: a move in either (the later's view where both have it). A move that ended between
    the reads is said to run one round longer; one that started between them is seen. Unknown
    (None) when the later read failed.

    >>> moves_around({("t", 0): ([3], [2])}, {})
    {('t', 0): ([3], [2])}
    >>> moves_around(None, {("t", 1): ([4], [])})
    {('t', 1): ([4], [])}
    """
    if after is None:
        return None
    return {**(before or {}), **after}


_REPLICAS = operator.attrgetter("replicas")
_TOPIC = operator.attrgetter("topic")
_OBSERVED_AT = operator.attrgetter("observed_at")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class RoundResult:
    events: list[AnyEvent] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    duration_s: float = 0.0
    elr_known: bool = False
    #: Exporter samples left out, by (broker, reason: :data:`jmx.DROP_REASONS`).
    samples_dropped: collections.Counter[tuple[int, str]] = field(
        default_factory=collections.Counter
    )
    #: Events left out for breaking the contract, by (kind, field): :data:`build.Dropped`.
    events_dropped: build.Dropped = field(default_factory=collections.Counter)
    #: How long each broker's page took to read, for the pages read this round (seconds).
    page_seconds: dict[int, float] = field(default_factory=dict)


#: A broker's exporter is read at most one part in this many of the time: the next round
#: starts no sooner than this many times its slowest page after the last round started
#: (only pages read count: a hung exporter does not slow the others' rounds down).
EXPORTER_DUTY = 2.0


def next_round_at(due: float, started: float, now: float, interval: float, page_s: float) -> float:
    """When the next round starts (monotonic seconds): on the interval's grid (``due``:
    when this one was due), but no sooner than :data:`EXPORTER_DUTY` times its slowest page
    read (``page_s``) after this round ``started``, and at once -- not in a burst -- once
    late.

    >>> next_round_at(100, 100, 100.2, 5, 0.1)  # fast pages: the grid
    105
    >>> next_round_at(100, 100, 103.5, 5, 3.4)  # 3.4 s pages: 6.8 s after its start
    106.8
    >>> next_round_at(100, 100, 111.0, 5, 0.2)  # a round of 11 s (a hung page): at once
    111.0
    """
    return max(due + interval, started + EXPORTER_DUTY * page_s, now)


#: A round waits this much past its pages' deadlines for their threads to hand them over.
_PAGE_SLACK_S = 0.25

_T = TypeVar("_T")


def _stamped(finished: dict[int, float], broker: int, read: Callable[[], _T]) -> _T:
    """``read()``, with the time it ended (returned or raised) in ``finished[broker]``."""
    try:
        return read()
    finally:
        finished[broker] = time.monotonic()


def fetch_page(url: str, timeout_s: float, max_bytes: int, access: jmx.PageAccess | None) -> str:
    """:func:`jmx.fetch` of a page, its ``access`` passed only when it has one (tests and
    benchmarks stand in for ``jmx.fetch`` with a function of three arguments)."""
    if access is None:
        return jmx.fetch(url, timeout_s, max_bytes)
    return jmx.fetch(url, timeout_s, max_bytes, access)


class PageReaders:
    """The threads that read exporter pages: daemon threads, so that a page still being
    read (until its deadline) never holds the process's exit. (A ThreadPoolExecutor's
    workers are joined at exit: a collector told to stop waited for a hung exporter.)"""

    def __init__(self, threads: int) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue()
        )
        self._threads = [
            threading.Thread(target=self._work, name=f"page-reader-{i}", daemon=True)
            for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        fut: Future[Any] = Future()
        self._jobs.put((fut, call))
        return fut

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fut, call = job
            if not fut.set_running_or_notify_cancel():
                continue  # cancelled while it waited: its round is over
            try:
                fut.set_result(call())
            except BaseException as e:  # handed to the round, which reports it
                fut.set_exception(e)

    def shutdown(self, wait: bool = False) -> None:
        """Each thread ends after its current page (waited for only with ``wait``)."""
        for _ in self._threads:
            self._jobs.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


#: A broker's JVM younger than this may not have registered its Kafka MBeans yet (and some
#: exporter configurations delay their first page by up to two minutes).
_STARTING_MS = 120_000


def health_server(config: CollectorConfig, registry: CollectorRegistry) -> WebServer:
    """The collector's ``/metrics`` (its health registry) where its settings say, guarded by
    their web configuration file; :meth:`~monitor.web.WebServer.start` it."""
    port = config.metrics_port if config.metrics_port is not None else 0
    return WebServer(
        partial(generate_latest, registry),
        config.metrics_host,
        port,
        config.web_config_file,
        name="collector /metrics",
    )


class _Health:
    """The collector's own metrics (``kafka_replication_collector_*``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ns = "kafka_replication_collector"
        self.rounds = Counter(
            f"{ns}_rounds", "Collection rounds completed.", registry=self.registry
        )
        self.duration = Gauge(
            f"{ns}_round_duration_seconds", "Wall time of the last round.", registry=self.registry
        )
        self.last = Gauge(
            f"{ns}_last_round_timestamp_seconds",
            "Unix time the last round finished.",
            registry=self.registry,
        )
        self.errors = Counter(
            f"{ns}_errors", "Errors by source.", ["source"], registry=self.registry
        )
        self.produced = Counter(
            f"{ns}_events_produced", "Events produced, by kind.", ["kind"], registry=self.registry
        )
        self.samples_dropped = Counter(
            f"{ns}_samples_dropped",
            "Exporter samples left out (never clamped): not a number, not finite, negative, "
            "beyond 2^63, or ConsumerLag's -1 (unknown), by broker and reason.",
            ["broker", "reason"],
            registry=self.registry,
        )
        self.events_dropped = Counter(
            f"{ns}_events_dropped",
            "Events left out of a round for breaking the contract, by kind and the field.",
            ["kind", "reason"],
            registry=self.registry,
        )
        self.broker_up = Gauge(
            f"{ns}_broker_up",
            "1 if the broker's JMX exporter answered in the last round.",
            ["broker"],
            registry=self.registry,
        )
        Gauge(
            f"{ns}_build_info",
            "1, labelled with the monitor's version.",
            ["version"],
            registry=self.registry,
        ).labels(__version__).set(1)
        self.page_seconds = Gauge(
            f"{ns}_page_seconds",
            "How long the broker's last exporter page took to read (connect to last byte).",
            ["broker"],
            registry=self.registry,
        )
        self.page_deadline = Gauge(
            f"{ns}_page_deadline_seconds",
            "The deadline the broker's page had in the last round.",
            ["broker"],
            registry=self.registry,
        )
        self.jmx_profile = Gauge(
            f"{ns}_jmx_profile",
            "1 for the exporter profile whose metric names a broker's page is read with.",
            ["broker", "profile"],
            registry=self.registry,
        )


class Collector:
    def __init__(self, config: CollectorConfig, clock: Callable[[], int] = now_ms) -> None:
        self.config = config
        self._clock = clock
        self._exclude = (
            re.compile(config.exclude_topics) if config.exclude_topics else re.compile(r"(?!)")
        )
        self._admin: KafkaAdminClient | None = None
        self._producer: KafkaProducer | None = None
        self._pool: PageReaders | None = None
        self._rounds = 0
        self._configs: dict[str, TopicDurability] = {}
        #: (topic, partition) -> the leader epoch whose start offset was last read.
        self._epoch_asked: dict[tuple[str, int], int] = {}
        #: The topics of the last successful metadata read (None until there is one).
        self._known_topics: set[str] | None = None
        #: The topics (and their ids) of the last complete metadata read: one missing from
        #: the next complete read was deleted (None until there is one).
        self._listed: dict[str, str | None] | None = None
        self.health = _Health()
        self._metrics_server: WebServer | None = None
        self._stop = threading.Event()
        #: Partitions in a reassignment at the last successful read.
        self._moving: set[tuple[str, int]] = set()
        #: Whether broker events carry the unclean-election counter (decided at start).
        self.unclean_counter = False
        #: The exporter profile detected on each broker's page (``jmx_profile = "auto"``).
        self._profiles: dict[int, str] = {}
        #: The partitions this collector sends, when several share the cluster.
        self.shard = config.shard_spec()
        #: How long each broker's last pages took to read (seconds): their next deadline.
        self._page_times: dict[int, collections.deque[float]] = {}
        #: When a round last said that rounds run over the interval (monotonic seconds).
        self._slow_said = -float("inf")
        #: How each broker's page is reached, where not plainly (TLS settings, credentials:
        #: paths and names, the secrets read from their files at each page).
        self._access = {
            b: access for b in config.jmx_urls if (access := config.page_access(b)) is not None
        }

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, produce: bool = True) -> None:
        """Connect. Raises :class:`KafkaConnectError` naming what failed (never a secret),
        and -- before connecting -- :class:`ValueError` when ``produce`` has nowhere to
        publish (:meth:`CollectorConfig.events_connection`)."""
        cfg = self.config
        target = cfg.events_connection() if produce else None
        if target is cfg.kafka:
            log.warning(BLIND_SPOT)
        install_redaction(cfg.kafka, cfg.events_kafka)
        try:
            self._admin = KafkaAdminClient(
                client_id="replication-monitor-collector", **cfg.kafka.client_kwargs()
            )
        except KafkaError as e:
            raise explain_connect_failure(cfg.kafka, e) from None
        version = broker_version(self._admin)
        self.unclean_counter, why = trust_unclean_counter(cfg.unclean_counter, version)
        log.info(
            "the controller's unclean-election counter is %s: %s",
            "used" if self.unclean_counter else "not used", why,
        )  # fmt: skip
        if target is not None:
            try:
                self._producer = KafkaProducer(
                    client_id="replication-monitor-collector",
                    acks="all",
                    # publish() flushes at each round's end: a long linger delays nothing
                    # and fills the batches (bench.compression_bench at 10k partitions:
                    # zstd 0.151 of the bytes at linger 20 ms and 16 kB batches, 0.070 so).
                    linger_ms=1000,
                    batch_size=256 * 1024,
                    retries=5,
                    max_in_flight_requests_per_connection=1,  # keep each key's events in order
                    compression_type=(
                        None if cfg.events_compression == "none" else cfg.events_compression
                    ),
                    **target.client_kwargs(),
                )
            except KafkaError as e:
                self._admin.close()
                raise explain_connect_failure(target, e) from None
        self._pool = PageReaders(max(1, min(16, len(self.config.jmx_urls))))
        if not self.shard.whole:
            log.info(
                "shard %s: sending the partitions of the topics whose CRC-32 modulo %d is %d, "
                "and every topic's and broker's events",
                self.shard, self.shard.count, self.shard.index,
            )  # fmt: skip
        if self.config.metrics_port is not None:
            self._metrics_server = health_server(self.config, self.health.registry)
            self._metrics_server.start()

    def request_stop(self) -> None:
        """Ask :meth:`run` to end (from a signal handler): a round being waited on ends
        at once, unpublished; :meth:`stop` then closes the clients."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._metrics_server is not None:
            self._metrics_server.stop()
            self._metrics_server = None
        if self._pool is not None:
            self._pool.shutdown()
        if self._producer is not None:
            self._producer.flush(timeout=10)
            self._producer.close(timeout=10)
        if self._admin is not None:
            self._admin.close()

    # -- one round -------------------------------------------------------------------------

    def _scrape(
        self, broker: int, url: str, t: int, deadline_s: float
    ) -> tuple[int, int, jmx.BrokerScrape | None, str]:
        began = time.monotonic()
        try:
            page = fetch_page(url, deadline_s, self.config.jmx_max_bytes, self._access.get(broker))
        except jmx.PageError as e:  # says what to check (a 401: which credentials)
            return broker, t, None, f"broker {broker}: {e}"
        except Exception as e:  # a paused or dead broker: reported as alive=false
            return broker, t, None, f"broker {broker}: {e!r}"
        took = time.monotonic() - began
        # Only pages read set the next deadlines (config.page_deadline): a broker that stops
        # answering keeps the deadline its pages had.
        times = self._page_times.setdefault(broker, collections.deque(maxlen=PAGES_TIMED))
        times.append(took)
        self.health.page_seconds.labels(str(broker)).set(took)
        profile = self._profile(broker, page)
        if profile is None:
            # Nothing of Kafka's on the page: read what is common to every profile (the
            # JVM's start: found by CI, a restarted broker's first pages otherwise read as
            # a restart nobody can place). A broker that started in the last two minutes is
            # still registering its MBeans; past that, the page is not one we can read.
            scrape = jmx.parse(page, self.config.jmx_names_for("monitor"))
            if scrape.started_at is not None and t - scrape.started_at < _STARTING_MS:
                return broker, t, scrape, ""
            why = (
                f"broker {broker}: no metric of a known exporter profile on {url} "
                "(set jmx_profile or jmx_names: docs/collector.md)"
            )
            return broker, t, scrape, why
        scrape = jmx.parse(page, self.config.jmx_names_for(profile))
        if not scrape.has_log_ends() and not scrape.counters and self.config.jmx_profile == "auto":
            # Its rules may have changed: detect again next round. (A page that came in
            # after its round's deadline may be read while the next round reads the same
            # broker: either may forget the profile first.)
            self._profiles.pop(broker, None)
            with contextlib.suppress(KeyError):
                self.health.jmx_profile.remove(str(broker), profile)
        return broker, t, scrape, ""

    def _scraped(
        self,
        broker: int,
        fut: Future[tuple[int, int, jmx.BrokerScrape | None, str]],
        in_time: bool,
        deadline_s: float,
    ) -> tuple[jmx.BrokerScrape | None, str]:
        """A broker's scrape as the round takes it: ``(None, why)`` for a page not in by
        its deadline (``in_time`` false: thrown away whenever it comes, since its samples
        carry this round's stamp) or a read that failed in any way."""
        if not in_time:
            fut.cancel()  # not started yet (more brokers than threads): it never will
            if self.config.round_timeout_s is not None:
                why = f"round_timeout_s {self.config.round_timeout_s:g} s"
            else:
                why = f"its page's deadline, {deadline_s:g} s"
            return None, f"broker {broker}: no page by the round's deadline ({why})"
        try:
            _, _, scrape, err = fut.result()
        except Exception as e:  # a page read wrong costs its broker's round, not the round
            log.exception("broker %s: reading its page failed", broker)
            return None, f"broker {broker}: {e!r}"
        return scrape, err

    def _profile(self, broker: int, page: str) -> str | None:
        """The profile to read ``broker``'s page with: the configured one, or the one
        detected on its page (once, then kept)."""
        profile = self._profiles.get(broker)
        if profile is None:
            profile = jmx.profile_for(page, self.config.jmx_profile)
            if profile is None:
                return None
            log.info("broker %s: read with exporter profile %s", broker, profile)
            self._profiles[broker] = profile
            self.health.jmx_profile.labels(str(broker), profile).set(1)
        return profile

    def _unscraped_brokers(
        self,
        reads: Reads,
        partitions: list[PartitionMetadata],
        t_meta: int,
        dropped: build.Dropped,
    ) -> list[AnyEvent]:
        """Broker events for the brokers without an exporter endpoint (all of them in
        Admin-API-only collection): alive as the cluster metadata lists them. The brokers
        are those listed and those holding a replica of ``partitions`` (the whole
        cluster's); none when the list could not be read (nothing is known of them this
        round)."""
        if reads.brokers is None:
            return []
        assigned = set(itertools.chain.from_iterable(map(_REPLICAS, partitions)))
        unscraped = (reads.brokers | assigned) - set(self.config.jmx_urls)
        listed = reads.brokers

        def one(b: int) -> BrokerEvent:
            return build.broker_event(self.config.cluster, b, t_meta, None, alive=b in listed)

        return build.kept("broker", one, sorted(unscraped), dropped)

    def _reassignments(self, reads: Reads) -> dict[tuple[str, int], tuple[list[int], list[int]]]:
        """The running reassignments, and ``([], [])`` once for each that ended since the
        last successful read (a failed read says nothing: the model keeps what it knew)."""
        if reads.reassignments is None:
            return {}
        ended = self._moving - reads.reassignments.keys()
        self._moving = set(reads.reassignments)
        return {**{k: ([], []) for k in ended}, **reads.reassignments}

    def _deleted(
        self,
        reads: Reads,
        partitions: list[PartitionMetadata],
        t_meta: int,
        dropped: build.Dropped,
    ) -> list[AnyEvent]:
        """``topic_deleted`` for each topic the last complete metadata read listed and this
        one (complete too) does not (``partitions``: the whole cluster's, for the ids)."""
        assert reads.listed is not None
        ids = {p.topic: p.topic_id for p in partitions}
        before, self._listed = self._listed, {t: ids.get(t) for t in reads.listed}
        if before is None:
            return []
        gone = {t: tid for t, tid in before.items() if t not in reads.listed}
        return list(build.topic_deleted_events(self.config.cluster, t_meta, gone, dropped))

    def round(self) -> RoundResult:
        """Read everything once and return the validated events (nothing is produced).

        The exporter pages are read in threads while the Admin API is asked; the round
        takes the pages that are in by ``round_timeout_s`` after its start (the Admin
        requests have their own timeout, ``kafka.request_timeout_ms``).

        The cyclic garbage collector is paused meanwhile: a round allocates millions of
        objects (a page's strings, a sample and an event per replica), and the collections
        they set off walked them all again and again -- half the CPU of building the events
        at 100k replicas a page (``bench.collector_bench --synthetic``). Nothing a round
        makes holds a cycle; the collector runs again after it."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._round()
        finally:
            if collecting:
                gc.enable()

    def _round(self) -> RoundResult:
        assert self._admin is not None and self._pool is not None, "call start() first"
        started = time.monotonic()
        cfg = self.config
        res = RoundResult()
        dropped = res.events_dropped
        # Every JMX sample of a round carries the round's start: each value was read after
        # it and before the next round's (a page that comes after the round's deadline is
        # thrown away, never taken by a later round). Per-request
        # stamps taken before each request would order a slow broker's fresher answer
        # before a fast one's older answer -- a follower "ahead" of its leader.
        t_jmx = self._clock()
        urls = sorted(cfg.jmx_urls.items())
        deadlines = {b: cfg.page_deadline(self._page_times.get(b, ())) for b, _ in urls}
        finished: dict[int, float] = {}  # broker -> when its page read ended (monotonic)
        scrapes = [
            self._pool.submit(
                partial(_stamped, finished, b, partial(self._scrape, b, u, t_jmx, deadlines[b]))
            )
            for b, u in urls
        ]
        reads = Reads()
        # The running moves are read on both sides of the metadata (found by the soak: a
        # move that ended between the metadata read and a single later read left the old and
        # new replicas listed with no move -- under_replicated, and an RF one too high).
        before = Reads()
        read_reassignments(self._admin, before)
        t_meta = self._clock()
        read_brokers(self._admin, reads)
        res.elr_known = read_metadata(self._admin, self._exclude, cfg.include_internal, reads)
        # Several collectors on one cluster (``shard``): this one reads the HWs and epoch
        # records of its own partitions and sends their events; the whole cluster's
        # metadata (``every``) makes the topic events and names the brokers, which every
        # collector sends (monitor.collector.shards).
        every = reads.partitions
        if not self.shard.whole:
            reads.partitions = self.shard.partitions(every)
        if every:
            read_high_watermarks(self._admin, reads)
            # Each epoch's start offset once (first round: every partition).
            asked = self._epoch_asked.get
            wanted = {}  # (topic, partition) -> its epoch, not yet asked
            for p in reads.partitions:
                key = (p.topic, p.partition)
                if asked(key) != p.leader_epoch:
                    wanted[key] = p.leader_epoch
            read_epoch_starts(self._admin, reads, wanted.keys())
            if before.reassignments is not None:
                read_reassignments(self._admin, reads)
                reads.reassignments = moves_around(before.reassignments, reads.reassignments)
            else:
                # The controller did not answer a moment ago; asking again would wait as long
                # again (a paused controller: each read timed out, and the round outlasted the
                # model's stale_after_ms -- the CI short soak). Moves unknown this round.
                reads.errors.extend(before.errors)
            for key in reads.epoch_starts.keys() & wanted.keys():
                self._epoch_asked[key] = wanted[key]
        topics = sorted(set(map(_TOPIC, every)))
        if topics and (self._rounds % cfg.config_every_rounds == 0 or not self._configs):
            self._configs.update(read_topic_configs(self._admin, topics, reads))
        res.errors.extend(reads.errors)

        # A round whose metadata read failed filters the JMX replicas by the last topics it
        # knew: without a filter, broker-internal logs (KRaft's __cluster_metadata) would
        # appear as partitions for one round and open conditions that never resolve.
        if reads.metadata_complete():
            assert reads.listed is not None
            self._known_topics = set(reads.listed)
            res.events.extend(self._deleted(reads, every, t_meta, dropped))
        elif topics:
            self._known_topics = set(topics)
        keep = self._known_topics
        if not self.shard.whole:
            # Only this shard's samples, as replica events too (none before the first
            # metadata read: whose they are is not known yet).
            keep = self.shard.topics(keep) if keep is not None else set()
        # Round records: each partition of the metadata gets its replicas' samples of the
        # round, in broker order; a sample of a partition it does not list (a metadata read
        # that failed, in part or in all) is sent as a replica event, as in "replica" mode.
        rounds = (
            build.round_keys(reads.partitions, keep, self._exclude)
            if cfg.round_records == "partition"
            else None
        )
        # Each page until its own deadline (a round's pages are read at once, so the round
        # waits for its slowest), and not past a round_timeout_s that is set.
        until = started + max(deadlines.values(), default=0.0) + _PAGE_SLACK_S
        if cfg.round_timeout_s is not None:
            until = min(until, started + cfg.round_timeout_s)
        self._wait_pages(scrapes, until)
        # A page is in time by when its read ended, not by when the round looks: the Admin
        # requests above may end past ``until`` (a paused broker's, timed out) -- found by
        # CI, every page of such a round was thrown away, the healthy brokers' included, and
        # each of them reported silent.
        for broker, fut in zip(sorted(cfg.jmx_urls), scrapes, strict=True):
            in_time = finished.get(broker, inf) <= until
            scrape, err = self._scraped(broker, fut, in_time, deadlines[broker])
            self.health.broker_up.labels(str(broker)).set(1 if scrape else 0)
            self.health.page_deadline.labels(str(broker)).set(deadlines[broker])
            if scrape is not None:
                res.page_seconds[broker] = self._page_times[broker][-1]
            if err:
                res.errors.append(("jmx", err))
            ev = build.checked(
                "broker",
                partial(
                    build.broker_event, cfg.cluster, broker, t_jmx, scrape, self.unclean_counter
                ),
                dropped,
            )
            if ev is not None:
                res.events.append(ev)
            if scrape is not None:
                for reason, n in scrape.dropped.items():
                    res.samples_dropped[broker, reason] += n
                if rounds is None:
                    res.events.extend(
                        build.replica_events(
                            cfg.cluster, broker, t_jmx, scrape, keep, dropped, self._exclude
                        )
                    )
                else:
                    res.events.extend(
                        build.sort_samples(
                            cfg.cluster, broker, t_jmx, scrape, keep, rounds, dropped,
                            self._exclude,
                        )
                    )  # fmt: skip
        res.events.extend(self._unscraped_brokers(reads, every, t_meta, dropped))
        res.events.extend(
            build.round_records(
                cfg.cluster,
                t_meta,
                reads.partitions,
                reads.high_watermarks,
                reads.epoch_starts,
                self._reassignments(reads),
                rounds,
                dropped,
            )
        )
        if self._rounds % cfg.config_every_rounds == 0:
            listed = set(topics)
            configs = {t: c for t, c in self._configs.items() if t in listed}
            res.events.extend(
                build.topic_config_events(
                    cfg.cluster, t_meta, configs, every, reads.reassignments, dropped
                )
            )
        res.events.sort(key=_OBSERVED_AT)
        self._rounds += 1
        res.duration_s = time.monotonic() - started
        for source, _msg in res.errors:
            self.health.errors.labels(source).inc()
        self._count_drops(res)
        self.health.rounds.inc()
        self.health.duration.set(res.duration_s)
        self.health.last.set(time.time())
        return res

    def _wait_pages(self, scrapes: list[Future[Any]], until: float) -> None:
        """Until every page is in, ``until`` (monotonic) passes, or a stop is asked for."""
        pending = set(scrapes)
        while pending and not self._stop.is_set():
            left = until - time.monotonic()
            if left <= 0:
                break
            _, pending = wait(pending, timeout=min(left, 0.2), return_when=FIRST_COMPLETED)

    def _say_if_slow(self, res: RoundResult) -> None:
        """A round longer than ``interval_s`` (pages slower than the interval): the next
        round starts at once, so rounds run back to back at the pace of the slowest page
        -- said once a minute, with the page that set it."""
        interval = self.config.interval_s
        now = time.monotonic()
        if res.duration_s <= interval or now - self._slow_said < 60:
            return
        self._slow_said = now
        slowest = max(res.page_seconds.items(), key=operator.itemgetter(1), default=None)
        which = (
            f"; the slowest page: broker {slowest[0]}'s, {slowest[1]:.1f} s (broad exporter "
            "rules: docs/collector.md, 'Exporter pages as brokers serve them')"
            if slowest is not None and slowest[1] > 0.5 * res.duration_s
            else ""
        )
        log.warning(
            "a round took %.1f s, over interval_s %g: rounds run back to back%s",
            res.duration_s, interval, which,
        )  # fmt: skip

    def _count_drops(self, res: RoundResult) -> None:
        """The round's left-out samples and events into the metrics, and a log line for
        each kind of them -- but ConsumerLag's -1, which only says a fetcher has not
        fetched yet."""
        for (broker, reason), n in sorted(res.samples_dropped.items()):
            self.health.samples_dropped.labels(str(broker), reason).inc(n)
            if reason != "unknown_lag":
                log.info("broker %s: %d sample(s) left out: %s", broker, n, reason)
        for (kind, reason), n in sorted(res.events_dropped.items()):
            self.health.events_dropped.labels(kind, reason).inc(n)
            log.warning("%d %s event(s) left out: %s breaks the contract", n, kind, reason)

    def publish(self, events: list[AnyEvent]) -> int:
        """Produce to the events topic (acks=all), keyed by partition (:func:`build.event_key`)."""
        assert self._producer is not None, "started without a producer"
        failed: list[BaseException] = []
        for ev in events:
            fut = self._producer.send(
                self.config.events_topic, key=build.event_key(ev), value=dumps(ev).encode()
            )
            fut.add_errback(failed.append)
            self.health.produced.labels(ev.kind).inc()
        self._producer.flush(timeout=30)
        if failed:
            self.health.errors.labels("produce").inc(len(failed))
            log.warning("%d events failed to publish: %r", len(failed), failed[0])
        return len(events) - len(failed)

    def run(
        self, rounds: int | None = None, on_round: Callable[[RoundResult], None] | None = None
    ) -> None:
        """Collect every ``interval_s`` until :meth:`stop` (or ``rounds`` rounds).

        Paced by the exporters too (:data:`EXPORTER_DUTY`): the next round starts no sooner
        than twice its slowest page after the last one started, so a broker whose page takes
        seconds to render is not scraped back to back -- each scrape costs that broker's CPU,
        and on a busy host the rounds only got slower. A round that ends late starts the
        next at once, never a burst of rounds to catch up."""
        done = 0
        next_at = time.monotonic()
        while not self._stop.is_set() and (rounds is None or done < rounds):
            started = time.monotonic()
            res = RoundResult()
            try:
                res = self.round()
                if self._stop.is_set():
                    break  # asked to stop while its pages were read: not published
                self._say_if_slow(res)
                if self._producer is not None:
                    self.publish(res.events)
                if on_round is not None:
                    on_round(res)
                for source, msg in res.errors[:5]:
                    log.info("round %d: %s error: %s", done, source, msg)
            except Exception:  # never die of one bad round: the next one may work
                self.health.errors.labels("round").inc()
                log.exception("collection round failed")
            done += 1
            busiest = max(res.page_seconds.values(), default=0.0)
            now = time.monotonic()
            next_at = next_round_at(next_at, started, now, self.config.interval_s, busiest)
            self._stop.wait(max(0.0, next_at - now))
