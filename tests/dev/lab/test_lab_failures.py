"""`up` must fail loudly and leave nothing running when a broker dies while starting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.errors import LabError
from monitor.dev.lab.ports import reserve_base_port
from tests.dev.lab.helpers import our_jvms

pytestmark = [pytest.mark.lab, pytest.mark.timeout(180)]

FAIL_BASE_PORT = int(os.environ.get("MONITOR_LAB_TEST_FAIL_BASE_PORT", "29592"))


def test_up_reports_the_log_tail_of_a_broker_that_dies_and_stops_the_others(
    tmp_path: Path,
) -> None:
    with reserve_base_port(FAIL_BASE_PORT) as base_port:
        _check_failed_start(tmp_path, base_port)


def _check_failed_start(tmp_path: Path, base_port: int) -> None:
    config = LabConfig(dir=tmp_path / "lab", base_port=base_port, start_timeout_s=90)
    # Node 3's storage claims to belong to node 99: kafka.Kafka refuses to start on it.
    config.data_dir(3).mkdir(parents=True)
    (config.data_dir(3) / "meta.properties").write_text(
        "version=1\nnode.id=99\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n"
    )
    lab = Lab(config)
    try:
        with pytest.raises(LabError) as failure:
            lab.up()
        message = str(failure.value)
        assert "broker 3 exited while starting" in message
        assert "Stored node id 99 doesn't match previous node id 3" in message
        assert our_jvms(config.dir) == []
    finally:
        lab.down()
        assert our_jvms(config.dir) == []
