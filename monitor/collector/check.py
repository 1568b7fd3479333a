"""``monitor collect --check``: will this configuration work, before it runs?

Checks, and prints one line each: the configuration (already validated when this runs),
the connection to Kafka (the brokers it lists, the version it speaks), and each exporter
endpoint -- reachable, the profile its page is read with (detected or set) and which of the
metrics the collector reads it lacks. Brokers without an endpoint are named, and the
findings a configuration cannot give: with no endpoint at all the collector reads the Admin
API only, which is no failure (a managed cluster may give no JMX), but the findings judged
on replicas' log ends are then unavailable (:data:`NEEDS_REPLICA_SAMPLES`). Exit 0 when
every check passed, 2 otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from monitor.collector import jmx
from monitor.collector.collector import Collector, fetch_page
from monitor.collector.config import BLIND_SPOT, CollectorConfig
from monitor.collector.security import KafkaConnectError, explain_connect_failure
from monitor.collector.versions import broker_version
from monitor.contract.topics import Role
from monitor.model import NEEDS_REPLICA_SAMPLES
from monitor.preflight.report import Report
from monitor.preflight.topics import Need, check_topics, check_watched_access
from monitor.preflight.web import check_web_config

#: What each metric of a broker's page feeds, for the lines naming what a page lacks.
USED_FOR = {
    "log_end_offset": "its replicas' log ends (for follower lag, HW stalls, truncation)",
    "log_start_offset": "its replicas' log starts",
    "fetcher_lag": "its fetchers' own lag in offsets",
    "isr_shrinks": "its ISR shrink counter",
    "isr_expands": "its ISR expand counter",
    "under_replicated": "its under-replicated partition count",
    "active_controller": "whether it is the active controller",
    "unclean_elections": "the controller's unclean-election counter",
    "process_start": "its JVM's start (a restart between two scrapes, for the counters)",
}


def admin_only_notice() -> str:
    """The line said when the collector has no exporter endpoint.

    >>> admin_only_notice()  # doctest: +ELLIPSIS
    'no JMX exporter endpoint: Admin API only -- unavailable: follower_lag, hw_lag, ...'
    """
    return "no JMX exporter endpoint: Admin API only -- unavailable: " + ", ".join(
        str(k) for k in sorted(NEEDS_REPLICA_SAMPLES)
    )


def check(
    config: CollectorConfig,
    say: Callable[[str], None] = print,
    *,
    create_topics: bool = False,
    command: str = "monitor collect --check",
) -> int:
    """Every check, a line each, then ``result:``; 0 when all passed, 2 otherwise.
    ``create_topics``: create the events topic where it is missing; ``command``: this
    check's command line, for the line that says to add ``--create-topics``."""
    report = Report(say)
    checks(config, report, create_topics=create_topics, command=command)
    return report.result()


def checks(
    config: CollectorConfig,
    report: Report,
    *,
    create_topics: bool,
    command: str,
    events: bool = True,
) -> None:
    """The collector's checks, into ``report`` (``monitor run --check`` adds the job's;
    ``events=False``: not where the events go, which ``monitor run`` starts itself)."""
    say = report.say
    shard = "" if config.shard_spec().whole else f", shard {config.shard}"
    say(
        f"configuration: ok (cluster {config.cluster}, {len(config.jmx_urls)} exporter "
        f"endpoint(s), jmx_profile {config.jmx_profile}{shard})"
    )
    brokers: set[int] | None = None
    collector = Collector(config)
    try:
        collector.start(produce=False)
    except KafkaConnectError as e:
        report.fail("kafka", str(e))
    else:
        admin: Any = collector._admin
        try:
            cluster = admin.describe_cluster()
            brokers = {int(b["broker_id"]) for b in cluster.get("brokers", [])}
            version = broker_version(admin)
            spoken = ".".join(map(str, version)) if version else "unknown"
            report.ok("kafka", f"brokers {sorted(brokers)}, protocol version {spoken}")
            check_watched_access(admin, report, config.kafka)
        except Exception as e:  # a cluster that connects but cannot be described
            report.fail("kafka", f"describing the cluster: {e!r}")
        finally:
            collector.stop()
    if events:
        _check_events(config, report, create_topics=create_topics, command=command)
    if config.metrics_port is not None:
        check_web_config(report, "collector /metrics", config.web_config_file, config.metrics_host)
    if not config.jmx_urls:
        say(f"exporters: {admin_only_notice()}")
        for kind, needs in sorted(NEEDS_REPLICA_SAMPLES.items()):
            say(f"    {kind} needs {needs}")
    # Every page at once, as a round reads them (each timed: the render time is the
    # exporter's, and what the page deadline must allow).
    urls = sorted(config.jmx_urls.items())
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(urls)))) as pool:
        pages = list(pool.map(lambda item: _read_page(config, item[1], item[0]), urls))
    for (broker, url), page in zip(urls, pages, strict=True):
        report.problems += _check_endpoint(config, broker, url, say, page)
    if brokers is not None:
        unknown = sorted(set(config.jmx_urls) - brokers)
        if unknown:
            report.fail(
                "exporters",
                f"brokers {unknown} have endpoints but are not in the cluster",
                "correct jmx_urls (broker id = URL)",
            )
        uncovered = sorted(brokers - set(config.jmx_urls))
        if uncovered and config.jmx_urls:  # (with none at all, Admin API only says it)
            say(
                f"exporters: brokers {uncovered} have no endpoint: their replicas' logs are not "
                "read (metadata, ISR, HW and elections still are; "
                f"{', '.join(sorted(NEEDS_REPLICA_SAMPLES))} not judged on them)"
            )


def _check_events(
    config: CollectorConfig, report: Report, *, create_topics: bool, command: str
) -> None:
    """Where the events go: the cluster reachable, the events topic there with its
    settings, and the collector allowed to write it."""
    try:
        target = config.events_connection()
    except ValueError as e:
        report.fail("events cluster", str(e))
        return
    if target is config.kafka:
        report.say(f"events cluster: the watched cluster itself -- {BLIND_SPOT}")
    admin: Any = None
    try:
        admin = KafkaAdminClient(client_id="replication-monitor-check", **target.client_kwargs())
    except KafkaError as e:
        report.fail("events cluster", str(explain_connect_failure(target, e)))
        return
    try:
        if target is not config.kafka:
            listed = admin.describe_cluster().get("brokers", [])
            report.ok("events cluster", f"{target.bootstrap_servers}, {len(listed)} broker(s)")
        need = Need(Role.EVENTS, config.events_topic, ("WRITE",), "the collector")
        check_topics(admin, report, target, [need], create=create_topics, command=command)
    except KafkaError as e:
        report.fail("events cluster", f"describing it: {e!r}")
    finally:
        admin.close()


def _read_page(
    config: CollectorConfig, url: str, broker: int | None = None
) -> tuple[str, float] | BaseException:
    """The page and how long it took to read, within the longest deadline a page may
    have (:meth:`CollectorConfig.page_deadline` of a first page), reached as the collector
    reaches ``broker``'s (:meth:`CollectorConfig.page_access`), or what failed."""
    began = time.monotonic()
    access = None if broker is None else config.page_access(broker)
    try:
        page = fetch_page(url, config.page_deadline(()), config.jmx_max_bytes, access)
    except Exception as e:
        return e
    return page, time.monotonic() - began


def _too_slow(config: CollectorConfig) -> str:
    """What to do about a page slower than the longest deadline it may have."""
    if config.jmx_timeout_s is not None:
        return (
            f"the page deadline is jmx_timeout_s ({config.jmx_timeout_s:g} s): unset it to let "
            "it follow the interval and the pages"
        )
    return (
        "narrow the exporter's rules to the MBeans the collector reads (includeObjectNames: "
        "docs/collector.md, 'Exporter pages as brokers serve them'), or raise "
        f"jmx_timeout_max_s ({config.jmx_timeout_max_s:g} s) with interval_s and the model's "
        "lag thresholds (at least three rounds each)"
    )


def _check_endpoint(
    config: CollectorConfig,
    broker: int,
    url: str,
    say: Callable[[str], None],
    read: tuple[str, float] | BaseException,
) -> int:
    where = f"exporter of broker {broker} ({url})"
    if isinstance(read, TimeoutError):
        say(f"{where}: FAIL -- {read}: {_too_slow(config)}")
        return 1
    if isinstance(read, jmx.PageError):  # says what to check (a 401: which credentials)
        say(f"{where}: FAIL -- {read}")
        return 1
    if isinstance(read, BaseException):
        say(f"{where}: FAIL -- {read!r}")
        return 1
    page, took = read
    profile = jmx.profile_for(page, config.jmx_profile)
    if profile is None:
        say(
            f"{where}: FAIL -- no metric of a known exporter profile on its page "
            "(set jmx_profile or jmx_names: docs/collector.md)"
        )
        return 1
    how = "detected" if config.jmx_profile == "auto" else "set"
    names = config.jmx_names_for(profile)
    lacks = jmx.missing(page, names)
    if set(lacks) >= set(type(names).model_fields) - {"process_start"}:
        say(f"{where}: FAIL -- none of profile {profile}'s metrics on its page")
        return 1
    deadline = config.page_deadline([took])
    say(
        f"{where}: ok -- profile {profile} ({how}), page read in {took:.2f} s "
        f"(its deadline {deadline:g} s, interval_s {config.interval_s:g})"
    )
    if took > config.interval_s:
        say(
            f"    slow: the page takes longer than interval_s: rounds will run back to back, "
            f"about every {took:.0f} s; to collect every {config.interval_s:g} s, "
            "narrow the exporter's rules (includeObjectNames: docs/collector.md)"
        )
    for field in lacks:
        say(f"    lacks {field}: {USED_FOR[field]} not read")
    return 0
