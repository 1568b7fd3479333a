"""Small probes of the running stack: a /metrics page, one value on it, a topic read back
raw, and a wait for a condition."""

from __future__ import annotations

import contextlib
import http.client
import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any


def scrape(url: str, timeout: float = 2.0) -> dict[str, float] | None:
    """A /metrics page as ``{"name{labels}": value}``; None if it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            text = r.read().decode()
    except (OSError, http.client.HTTPException, UnicodeDecodeError):
        return None  # not up, or killed in the middle of an answer
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        with contextlib.suppress(ValueError):
            out[name] = float(value)
    return out


def metric(page: dict[str, float] | None, name: str) -> float | None:
    """The value of ``name`` (unlabelled), or the max over its labelled series."""
    if page is None:
        return None
    if name in page:
        return page[name]
    values = [v for k, v in page.items() if k.startswith(name + "{")]
    return max(values) if values else None


def read_raw(bootstrap: str, topic: str, timeout_s: float = 120.0) -> list[dict[str, Any]]:
    """Every record of ``topic`` from its start to its end now, duplicates included."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","), enable_auto_commit=False, group_id=None
    )
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic} to its end in {timeout_s:.0f}s")
            for batch in consumer.poll(timeout_ms=1000).values():
                out.extend(json.loads(rec.value) for rec in batch)
        return out
    finally:
        consumer.close()


def wait_until(pred: Callable[[], bool], timeout: float, what: str, every: float = 0.5) -> float:
    """Poll ``pred`` until true; returns the seconds waited; TimeoutError after ``timeout``."""
    started = time.monotonic()
    while not pred():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f}s")
        time.sleep(every)
    return time.monotonic() - started
