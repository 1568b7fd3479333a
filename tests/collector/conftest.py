"""Fixtures of the collector's lab tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.gate import EndpointGate


@pytest.fixture
def gates(lab: Lab) -> Iterator[dict[int, EndpointGate]]:
    """A gate in front of each broker's exporter (``gate.url`` for the collector): a test
    blinds the collector to a broker with ``block()``."""
    opened = {b: EndpointGate(url) for b, url in lab.jmx_urls.items()}
    try:
        yield opened
    finally:
        for g in opened.values():
            g.close()
