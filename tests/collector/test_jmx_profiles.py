# ruff: noqa: E501  (exporter pages are written as the exporter prints them)
"""The exporter profiles (``monitor.collector.jmx.PROFILES``): one round of one broker, as
each style of rules prints it, reads the same; the style is detected from the page.

The pages are written here from each style's rules (docs/collector.md names them); the lab
test ``test_jmx_profiles_lab.py`` reads the real agent running such rules."""

from __future__ import annotations

import functools
import http.server
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pydantic import ValidationError

from monitor.collector.check import _check_endpoint, _read_page
from monitor.collector.collector import Collector
from monitor.collector.config import CollectorConfig
from monitor.collector.jmx import PROFILES, detect, missing, parse

MONITOR = """\
# TYPE kafka_log_log_end_offset gauge
kafka_log_log_end_offset{partition="0",topic="orders"} 1.2345678E7
kafka_log_log_start_offset{partition="0",topic="orders"} 100.0
kafka_server_replica_fetcher_lag{client_id="ReplicaFetcherThread-0-1",partition="0",topic="orders"} 3.0
kafka_server_replica_manager_isrshrinkspersec_total 4.0
kafka_server_replica_manager_isrexpandspersec_total 5.0
kafka_server_replica_manager_underreplicatedpartitions 1.0
kafka_controller_activecontrollercount 1.0
kafka_controller_stats_uncleanleaderelectionspersec_total 2.0
process_start_time_seconds 1.693829439767E9
"""
STRIMZI = """\
# TYPE kafka_log_log_logendoffset gauge
kafka_log_log_logendoffset{partition="0",topic="orders"} 1.2345678E7
kafka_log_log_logstartoffset{partition="0",topic="orders"} 100.0
kafka_server_fetcherlagmetrics_consumerlag{clientId="ReplicaFetcherThread-0-1",partition="0",topic="orders"} 3.0
kafka_server_fetcherlagmetrics_consumerlag{clientId="ReplicaAlterLogDirsThread-0",partition="0",topic="orders"} 900.0
# TYPE kafka_server_replicamanager_isrshrinks_total counter
kafka_server_replicamanager_isrshrinks_total 4.0
kafka_server_replicamanager_isrexpands_total 5.0
kafka_server_replicamanager_underreplicatedpartitions 1.0
kafka_controller_kafkacontroller_activecontrollercount 1.0
kafka_controller_controllerstats_uncleanleaderelections_total 2.0
process_start_time_seconds 1.693829439767E9
"""
CONFLUENT = """\
kafka_log_log_logendoffset{partition="0",topic="orders"} 1.2345678E7
kafka_log_log_logendoffset{partition="0, is-future=true",topic="orders"} 5.0
kafka_log_log_logstartoffset{partition="0",topic="orders"} 100.0
kafka_server_fetcherlagmetrics_consumerlag{clientid="ReplicaFetcherThread-0-1",partition="0",topic="orders"} 3.0
# TYPE kafka_server_replicamanager_isrshrinkspersec untyped
kafka_server_replicamanager_isrshrinkspersec 4.0
kafka_server_replicamanager_isrexpandspersec 5.0
kafka_server_replicamanager_underreplicatedpartitions 1.0
kafka_controller_kafkacontroller_activecontrollercount 1.0
kafka_controller_controllerstats_uncleanleaderelectionspersec 2.0
process_start_time_seconds 1.693829439767E9
"""
PAGES = {"monitor": MONITOR, "strimzi": STRIMZI, "confluent": CONFLUENT}


K = {"bootstrap_servers": "127.0.0.1:9092"}


@pytest.mark.parametrize("profile", sorted(PAGES))
def test_every_profile_reads_the_same_round(profile: str) -> None:
    """The same broker round in each style: the same readings -- the alter-log-dirs
    fetcher's lag and a future log's LEO are no follower's and no replica's."""
    page = PAGES[profile]
    assert detect(page) == profile
    assert missing(page, PROFILES[profile]) == []
    s = parse(page, PROFILES[profile])
    assert s.leo == {("orders", 0): 12_345_678}
    assert s.log_start == {("orders", 0): 100}
    assert s.fetch_lag == {("orders", 0): 3}
    assert s.counters == {
        "isr_shrinks_total": 4,
        "isr_expands_total": 5,
        "under_replicated_partitions": 1,
        "active_controller": 1,
        "unclean_elections_total": 2,
    }
    assert s.started_at == 1_693_829_439_767


def test_a_page_read_with_another_profiles_names_reads_nothing() -> None:
    """Why the profile matters: Strimzi's page read with this project's names is empty."""
    s = parse(STRIMZI, PROFILES["monitor"])
    assert (s.leo, s.counters) == ({}, {})
    assert "log_end_offset" in missing(STRIMZI, PROFILES["monitor"])


def test_names_set_by_the_user_override_the_profile() -> None:
    cfg = CollectorConfig(
        kafka={"bootstrap_servers": "127.0.0.1:9092"},
        jmx_profile="strimzi",
        jmx_names={"log_end_offset": "my_leo"},
    )
    names = cfg.jmx_names_for("strimzi")
    assert names.log_end_offset == "my_leo"
    assert names.isr_shrinks == PROFILES["strimzi"].isr_shrinks
    s = parse('my_leo{partition="1",topic="t"} 7.0\n', names)
    assert s.leo == {("t", 1): 7}


def test_an_unknown_metric_name_is_a_configuration_error() -> None:
    with pytest.raises(ValidationError, match="jmx_names: no such metric log_end"):
        CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}, jmx_names={"log_end": "x"})
    with pytest.raises(ValidationError, match="jmx_profile"):
        CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}, jmx_profile="jolokia")  # type: ignore[arg-type]


def test_the_collector_detects_each_brokers_profile_and_keeps_it() -> None:
    c = Collector(CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}))
    assert c._profile(1, STRIMZI) == "strimzi"
    assert c._profile(2, CONFLUENT) == "confluent"
    assert c._profile(1, "") == "strimzi"  # kept: an empty page does not undo it
    assert c._profile(3, "jvm_threads_current 40.0\n") is None
    sample = c.health.registry.get_sample_value
    assert sample("kafka_replication_collector_jmx_profile", {"broker": "1", "profile": "strimzi"})
    fixed = Collector(
        CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}, jmx_profile="confluent")
    )
    assert fixed._profile(1, STRIMZI) == "confluent"


@contextmanager
def _served(tmp_path: Path, page: str) -> Iterator[str]:
    """``page`` served at a local /metrics URL."""
    (tmp_path / "metrics").write_text(page)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def test_a_profile_set_that_the_page_does_not_speak_fails_the_check(tmp_path: Path) -> None:
    """``collect --check``'s endpoint line, without Kafka."""
    with _served(tmp_path, STRIMZI) as url:
        lines: list[str] = []
        cfg = CollectorConfig(kafka=K, jmx_profile="monitor", jmx_urls={1: url})
        assert _check_endpoint(cfg, 1, url, lines.append, _read_page(cfg, url)) == 1
        assert lines == [
            f"exporter of broker 1 ({url}): FAIL -- none of profile monitor's metrics on its page"
        ]
        lines.clear()
        cfg = CollectorConfig(kafka=K, jmx_urls={1: url})
        assert _check_endpoint(cfg, 1, url, lines.append, _read_page(cfg, url)) == 0
        (line,) = lines
        # The render time against the deadline the collector gives the page: the interval.
        assert re.fullmatch(
            rf"exporter of broker 1 \({re.escape(url)}\): ok -- profile strimzi \(detected\), "
            r"page read in \d+\.\d\d s \(its deadline 5 s, interval_s 5\)",
            line,
        ), line


@pytest.mark.parametrize(("age_s", "error"), [(5, False), (600, True)])
def test_a_page_without_kafka_metrics_still_says_when_the_broker_started(
    tmp_path: Path, age_s: int, error: bool
) -> None:
    """Found by CI: a restarted broker's first pages carry the JVM's process metrics but no
    Kafka MBean yet; read as nothing, the broker looked restarted with no start time. Its
    start is read whatever the profile; only a broker up for minutes with no Kafka metric
    is an error (a page the collector cannot read)."""
    now_ms = 1_700_000_000_000
    page = f"process_start_time_seconds {(now_ms / 1000 - age_s):.3f}\n"
    with _served(tmp_path, page) as url:
        c = Collector(
            CollectorConfig(kafka={"bootstrap_servers": "127.0.0.1:9092"}, jmx_urls={1: url}),
            clock=lambda: now_ms,
        )
        _, _, scrape, why = c._scrape(1, url, now_ms, 5.0)
    assert scrape is not None and scrape.started_at == now_ms - age_s * 1000
    assert bool(why) is error, why
