# ruff: noqa: E501  (exporter pages are written as the exporter prints them)
"""The exporter profiles (``monitor.collector.jmx.PROFILES``): one round of one broker, as
each style of rules prints it, reads the same; the style is detected from the page.

The pages are written here from each style's rules (docs/collector.md names them); the lab
test ``test_jmx_profiles_lab.py`` reads the real agent running such rules."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

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
    cfg = CollectorConfig(jmx_profile="strimzi", jmx_names={"log_end_offset": "my_leo"})
    names = cfg.jmx_names_for("strimzi")
    assert names.log_end_offset == "my_leo"
    assert names.isr_shrinks == PROFILES["strimzi"].isr_shrinks
    s = parse('my_leo{partition="1",topic="t"} 7.0\n', names)
    assert s.leo == {("t", 1): 7}


def test_an_unknown_metric_name_is_a_configuration_error() -> None:
    with pytest.raises(ValidationError, match="jmx_names: no such metric log_end"):
        CollectorConfig(jmx_names={"log_end": "x"})
    with pytest.raises(ValidationError, match="jmx_profile"):
        CollectorConfig(jmx_profile="jolokia")  # type: ignore[arg-type]


def test_the_collector_detects_each_brokers_profile_and_keeps_it() -> None:
    c = Collector(CollectorConfig())
    assert c._profile(1, STRIMZI) == "strimzi"
    assert c._profile(2, CONFLUENT) == "confluent"
    assert c._profile(1, "") == "strimzi"  # kept: an empty page does not undo it
    assert c._profile(3, "jvm_threads_current 40.0\n") is None
    sample = c.health.registry.get_sample_value
    assert sample("kafka_replication_collector_jmx_profile", {"broker": "1", "profile": "strimzi"})
    fixed = Collector(CollectorConfig(jmx_profile="confluent"))
    assert fixed._profile(1, STRIMZI) == "confluent"
