"""deploy/alertmanager/alertmanager.yml's inhibition rules, proven on the real Alertmanager.

Starts Debian's ``prometheus-alertmanager`` on a free 127.0.0.1 port with our config (its
webhook URLs pointed at a port that is held but never accepts, so no notification can
reach anybody's test receiver on 9099), posts alerts shaped like those the rules produce
through the v2 API, and reads back which ones Alertmanager reports as inhibited.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor.assets.rules import alert_name
from tests.promtools import AM_CONFIG

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(120)]

MON = {"job": "kafka-replication-monitor", "instance": "127.0.0.1:9478"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=5) as resp:
        raw = resp.read()
    return json.loads(raw) if raw.strip() else None


@pytest.fixture(scope="module")
def alertmanager(alertmanager_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("alertmanager")
    # A bound socket that never listens: connections to it are refused, and nobody else
    # can take the port while we hold it.
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink_port = sink.getsockname()[1]
    config = tmp / "alertmanager.yml"
    config.write_text(
        AM_CONFIG.read_text().replace("http://127.0.0.1:9099", f"http://127.0.0.1:{sink_port}")
    )
    log = (tmp / "alertmanager.log").open("w")
    port = _free_port()
    proc = subprocess.Popen(
        [
            alertmanager_bin,
            f"--config.file={config}",
            f"--storage.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",  # no HA gossip port
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"alertmanager exited {proc.returncode}:\n{Path(log.name).read_text()}",
                    pytrace=False,
                )
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=1).close()
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    pytest.fail(f"alertmanager not ready:\n{Path(log.name).read_text()}")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        sink.close()


def _alert(kind: str, severity: str, uid: str, **labels: str) -> dict[str, Any]:
    """An alert as the rules make it: named after its kind, with the kind as a label."""
    now = dt.datetime.now(dt.UTC)
    return {
        "labels": {
            "alertname": alert_name(kind),
            "kind": kind,
            "severity": severity,
            "uid": uid,
            **labels,
        },
        "annotations": {"summary": f"test {uid}"},
        "startsAt": now.isoformat(),
        "endsAt": (now + dt.timedelta(hours=1)).isoformat(),
    }


def _inhibited(url: str, alerts: list[dict[str, Any]], expected: dict[str, bool]) -> None:
    """Post ``alerts`` and wait until Alertmanager reports ``expected`` (uid -> inhibited)."""
    _http("POST", f"{url}/api/v2/alerts", alerts)
    deadline = time.monotonic() + 15
    while True:
        got_all = _http("GET", f"{url}/api/v2/alerts?active=true&inhibited=true&silenced=true")
        got = {
            a["labels"]["uid"]: bool(a["status"]["inhibitedBy"])
            for a in got_all
            if a["labels"].get("uid") in expected
        }
        if got == expected or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    wrong = {uid: got.get(uid) for uid, inh in expected.items() if got.get(uid) != inh}
    assert not wrong, f"expected inhibited={expected}, got {got}"


def test_offline_inhibits_isr_lag_and_hw_alerts_of_its_partition(alertmanager: str) -> None:
    p0 = {"cluster": "c1", "topic": "orders", "partition": "0"}
    _inhibited(
        alertmanager,
        [
            _alert("offline", "critical", "1-src", **p0),
            _alert("under_min_isr", "critical", "1-umi", **p0),
            _alert("at_min_isr", "warning", "1-ami", **p0),
            _alert("under_replicated", "warning", "1-ur", **p0),
            _alert("isr_shrink", "warning", "1-shrink", **p0),
            _alert("follower_lag", "warning", "1-fl", broker="3", **p0),
            _alert("hw_lag", "warning", "1-hw", **p0),
            # not targets: another partition, another kind
            _alert("under_min_isr", "critical", "1-umi-p1", **{**p0, "partition": "1"}),
            _alert("unclean_election", "critical", "1-unclean", **p0),
        ],
        {
            "1-src": False,
            "1-umi": True,
            "1-ami": True,
            "1-ur": True,
            "1-shrink": True,
            "1-fl": True,
            "1-hw": True,
            "1-umi-p1": False,
            "1-unclean": False,
        },
    )


def test_the_more_severe_isr_alert_wins(alertmanager: str) -> None:
    p0 = {"cluster": "c2", "topic": "orders", "partition": "0"}
    p1 = {"cluster": "c2", "topic": "orders", "partition": "1"}
    _inhibited(
        alertmanager,
        [
            _alert("under_min_isr", "critical", "2-umi", **p0),
            _alert("under_replicated", "warning", "2-ur", **p0),
            _alert("isr_shrink", "warning", "2-shrink", **p0),
            _alert("follower_lag", "warning", "2-fl", broker="2", **p0),
            _alert("at_min_isr", "warning", "2-ami", **p1),
            _alert("under_replicated", "warning", "2-ur-p1", **p1),
        ],
        {
            "2-umi": False,
            "2-ur": True,
            "2-shrink": True,
            "2-fl": False,
            "2-ami": False,
            "2-ur-p1": True,
        },
    )


def test_a_partition_unclean_election_mutes_the_controller_counter_of_its_cluster(
    alertmanager: str,
) -> None:
    """One election, two witnesses: the page names the partition. Another cluster's counter
    alert (no partition-level evidence there) still pages."""
    part = {"cluster": "u1", "topic": "orders", "partition": "0"}
    _inhibited(
        alertmanager,
        [
            _alert("unclean_election", "critical", "u-part", **part),
            _alert("unclean_election_counted", "critical", "u-count", cluster="u1"),
            _alert("unclean_election_counted", "critical", "u-count-2", cluster="u2"),
        ],
        {"u-part": False, "u-count": True, "u-count-2": False},
    )


def test_partition_stale_telemetry_inhibits_lag_alerts_of_that_partition(alertmanager: str) -> None:
    p0 = {"cluster": "c3", "topic": "orders", "partition": "0"}
    _inhibited(
        alertmanager,
        [
            _alert("stale_telemetry", "warning", "3-src", **p0),
            _alert("follower_lag", "warning", "3-fl", broker="1", **p0),
            _alert("hw_lag", "warning", "3-hw", **p0),
            _alert("isr_shrink", "warning", "3-shrink", **p0),
            _alert("under_min_isr", "critical", "3-umi", **p0),  # from metadata: not muted
            _alert("hw_lag", "warning", "3-hw-p1", cluster="c3", topic="orders", partition="1"),
        ],
        {
            "3-src": False,
            "3-fl": True,
            "3-hw": True,
            "3-shrink": True,
            "3-umi": False,
            "3-hw-p1": False,
        },
    )


def test_broker_stale_telemetry_inhibits_follower_lag_on_that_broker(alertmanager: str) -> None:
    p5 = {"cluster": "c4", "topic": "orders", "partition": "5"}
    _inhibited(
        alertmanager,
        [
            # broker-level: no topic, no partition label (Prometheus drops empty labels)
            _alert("stale_telemetry", "warning", "4-src", cluster="c4", broker="2"),
            _alert("follower_lag", "warning", "4-fl-b2", broker="2", **p5),
            _alert("follower_lag", "warning", "4-fl-b3", broker="3", **p5),
            _alert("hw_lag", "warning", "4-hw", **p5),
            _alert(
                "follower_lag",
                "warning",
                "4-fl-other-cluster",
                cluster="c5",
                topic="orders",
                partition="5",
                broker="2",
            ),
        ],
        {
            "4-src": False,
            "4-fl-b2": True,
            "4-fl-b3": False,
            "4-hw": False,
            "4-fl-other-cluster": False,
        },
    )


def test_monitor_down_inhibits_everything_else_of_that_monitor(alertmanager: str) -> None:
    other = {"job": "kafka-replication-monitor", "instance": "10.0.0.2:9478"}
    p0 = {"cluster": "c6", "topic": "orders", "partition": "0"}
    _inhibited(
        alertmanager,
        [
            _alert("monitor_down", "critical", "5-src", cause="view_incomplete", **MON),
            _alert("unclean_election", "critical", "5-unclean", **p0, **MON),
            _alert("under_min_isr", "critical", "5-umi", **p0, **MON),
            _alert("monitor_behind", "warning", "5-behind", cluster="c6", **MON),
            # a second monitor instance, and the collector: not muted
            _alert("under_min_isr", "critical", "5-umi-other", **p0, **other),
            _alert(
                "collector_down",
                "warning",
                "5-collector",
                cause="scrape_failed",
                job="kafka-replication-collector",
                instance="127.0.0.1:9479",
            ),
        ],
        {
            "5-src": False,
            "5-unclean": True,
            "5-umi": True,
            "5-behind": True,
            "5-umi-other": False,
            "5-collector": False,
        },
    )
