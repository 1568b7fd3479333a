"""The same unclean-election loss on a lab formatted with ELR off (KIP-966 disabled).

A second, module-scoped lab (eligible.leader.replicas.version=0) on its own reserved port
block: the feature is cluster-wide, so flipping it on the shared session lab would change
what the other tests see.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.ports import reserve_base_port
from tests.dev.lab.helpers import our_jvms, run_unclean_election_scenario

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]

NO_ELR_BASE_PORT = int(os.environ.get("MONITOR_LAB_TEST_NO_ELR_BASE_PORT", "29300"))


@pytest.fixture(scope="module")
def no_elr_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab_dir = tmp_path_factory.mktemp("kafka-lab-no-elr")
    with reserve_base_port(NO_ELR_BASE_PORT) as base_port:
        lab = Lab(LabConfig(dir=lab_dir, base_port=base_port, elr=False))
        try:
            lab.up()
            yield lab
        finally:
            lab.down()
            assert our_jvms(lab.config.dir) == []


def test_unclean_election_without_elr_loses_the_same_records(
    no_elr_lab: Lab, tmp_path: Path
) -> None:
    run_unclean_election_scenario(no_elr_lab, tmp_path, elr=False)
