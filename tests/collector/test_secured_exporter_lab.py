"""The real JMX exporter agent behind basic auth, read by the real collector (issue 51, point 2).

A one-broker lab whose exporter agent (the jar the project pins, 1.0.1) serves this
project's rules with ``httpServer.authentication.basic`` in its YAML. The collector,
started against the broker, reads the page with ``jmx_basic_auth`` (its password from a
file) -- the broker alive, its replicas' log ends sampled -- and with a wrong password or none
gets the agent's 401, said with the setting to check, in the round and in ``collect --check``.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from monitor.collector import check, jmx
from monitor.collector.collector import Collector, RoundResult
from monitor.collector.config import CollectorConfig
from monitor.contract.events import BrokerEvent
from monitor.dev.lab.admin import create_topic
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.jvm import exporter_yaml
from monitor.dev.lab.ports import reserve_base_port
from tests.collector.helpers import readings
from tests.security.helpers import ONE_BROKER

pytestmark = pytest.mark.lab

BASE_PORT = int(os.environ.get("MONITOR_TEST_SECURED_EXPORTER_LAB_PORT", "26092"))
USER = "replication-monitor"


@dataclass
class Guarded:
    lab: Lab
    password: str
    password_file: Path
    topic: str


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    tmp = tmp_path_factory.mktemp("guarded-exporter")
    password = f"agent-{uuid.uuid4().hex}"
    rules: dict[str, Any] = json.loads(exporter_yaml())  # JSON: a YAML document too
    rules["httpServer"] = {"authentication": {"basic": {"username": USER, "password": password}}}
    (tmp / "exporter.yaml").write_text(json.dumps(rules, indent=2) + "\n")
    password_file = tmp / "jmx-password"
    password_file.write_text(password + "\n")
    password_file.chmod(0o600)
    with reserve_base_port(BASE_PORT, brokers=1) as base:
        lab = Lab(
            LabConfig(dir=tmp / "lab", base_port=base, brokers=1, heap="256m",
                      extra_broker_config=ONE_BROKER, exporter_rules=tmp / "exporter.yaml"),
            progress=None,
        )  # fmt: skip
        try:
            lab.up()
            topic = f"guarded-{uuid.uuid4().hex[:6]}"
            create_topic(lab.bootstrap_servers, topic, partitions=2, replication_factor=1,
                         min_insync_replicas=1)  # fmt: skip
            yield Guarded(lab, password, password_file, topic)
        finally:
            lab.down()


def _config(g: Guarded, **scrape: Any) -> CollectorConfig:
    return CollectorConfig(
        cluster="guarded",
        kafka={"bootstrap_servers": g.lab.bootstrap_servers},
        jmx_urls=g.lab.jmx_urls,
        **scrape,
    )


def _round(config: CollectorConfig) -> RoundResult:
    collector = Collector(config)
    collector.start(produce=False)
    try:
        return collector.round()
    finally:
        collector.stop()


def _check_line(config: CollectorConfig) -> str:
    [(broker, url)] = config.jmx_urls.items()
    lines: list[str] = []
    check._check_endpoint(config, broker, url, lines.append, check._read_page(config, url, broker))
    return lines[0]


def test_the_collector_reads_the_agents_page_with_basic_auth(guarded: Guarded) -> None:
    config = _config(guarded, jmx_basic_auth={"username": USER,
                                              "password_file": guarded.password_file})  # fmt: skip
    res = _round(config)
    assert res.errors == []
    assert [e.alive for e in res.events if isinstance(e, BrokerEvent)] == [True]
    sampled = {(r.topic, r.partition) for r in readings(res.events) if r.log_end_offset is not None}
    assert {(guarded.topic, 0), (guarded.topic, 1)} <= sampled
    assert _check_line(config).startswith(f"exporter of broker 1 ({config.jmx_urls[1]}): ok --")


def test_a_wrong_password_or_none_is_the_agents_401_said_clearly(
    guarded: Guarded, tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-it\n")
    url = guarded.lab.jmx_urls[1]
    config = _config(guarded, jmx_basic_auth={"username": USER, "password_file": wrong})
    refused = (
        "HTTP 401 Unauthorized: the credentials were refused -- check jmx_basic_auth "
        f"(user '{USER}', the password in {wrong})"
    )
    res = _round(config)
    assert res.errors == [("jmx", f"broker 1: {refused}")]
    assert [e.alive for e in res.events if isinstance(e, BrokerEvent)] == [False]
    assert _check_line(config) == f"exporter of broker 1 ({url}): FAIL -- {refused}"
    assert _check_line(_config(guarded)) == (
        f"exporter of broker 1 ({url}): FAIL -- HTTP 401 Unauthorized: the exporter asks for "
        "credentials -- set jmx_basic_auth or jmx_authorization (docs/collector.md, "
        "'Scraping secured exporter pages')"
    )
    with pytest.raises(jmx.PageError):  # and the plain fetch of before: refused too
        jmx.fetch(url, 10.0)
    assert guarded.password not in repr(config) + str(res.errors)
