"""The demo's and soak's pager: a webhook receiver that stamps each delivery when it arrives.

The demo reports how long after a fault a page was *delivered*; the time must be the
POST's, not the time some later poll happened to notice it (CI stop 13: the summary read
the pages before the live view had, and reported two pages as never delivered).
"""

from __future__ import annotations

import json
import time
import urllib.request

from monitor.assets.rules import alert_name
from monitor.dev.processes.prom import WebhookReceiver


def _post(address: str, *names: str) -> None:
    body = {"alerts": [{"labels": {"alertname": alert_name(n), "kind": n}} for n in names]}
    req = urllib.request.Request(
        f"http://{address}/page",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200


def test_each_alert_keeps_the_time_of_its_first_delivery() -> None:
    hook = WebhookReceiver()
    hook.start()
    try:
        before = time.monotonic()
        _post(hook.address, "committed_data_loss", "unclean_election")
        first = time.monotonic()
        time.sleep(0.3)
        _post(hook.address, "committed_data_loss", "under_min_isr")
        time.sleep(0.3)
        read = hook.first_received()
    finally:
        hook.stop()
    assert set(read) == {"committed_data_loss", "unclean_election", "under_min_isr"}
    assert hook.kinds() == set(read)
    # Stamped on arrival: the first delivery's time, not the re-notification's or the read's.
    assert before <= read["committed_data_loss"] <= first
    assert before <= read["unclean_election"] <= first
    assert first < read["under_min_isr"] < time.monotonic() - 0.2
