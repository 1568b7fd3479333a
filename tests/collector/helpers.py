"""Shared by the collector's tests: a collector whose Admin reads and exporter pages are
stubs (rounds without a cluster); for the lab tests (and the store and job tests that record
the lab), the real collector recording in a thread, steady acks=all load, findings as names."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from monitor.collector import Collector, CollectorConfig
from monitor.contract.events import AnyEvent, PartitionEvent, ReplicaEvent, dumps, to_model
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.load import ProduceStats, produce
from monitor.dev.rounds import unfold_events
from monitor.model import ClusterModel, Finding, ModelConfig


def readings(events: Iterable[AnyEvent]) -> list[ReplicaEvent]:
    """The replica readings among ``events``: each ``replica`` event, and each sample of a
    round record as the ``replica`` event it means (:func:`monitor.dev.rounds.unfold_events`)."""
    return unfold_events(events)


def offline_collector(
    monkeypatch: pytest.MonkeyPatch,
    page: str | Mapping[int, str] = "",
    brokers: int = 1,
    read_metadata: Any = None,
    clock: Any = None,
    registered: set[int] | None = None,
    jmx: bool = True,
    workers: int = 1,
    jmx_urls: dict[int, str] | None = None,
    **settings: Any,
) -> Any:
    """A Collector whose Admin reads are stubs, and its exporter pages too: ``page`` for
    every broker, or each broker's (a mapping: its brokers are the exporters). ``_pool`` has
    ``workers`` threads (default one: the brokers are read one after another); the caller
    shuts it down. ``registered``:
    the brokers the metadata lists (default: every broker); ``jmx=False``: no endpoints;
    ``jmx_urls``: real endpoints, read by the real ``jmx.fetch``; ``settings``: more of
    the collector's settings."""
    from monitor.collector import collector as mod

    listed = set(range(1, brokers + 1)) if registered is None else registered

    def read_brokers(admin: object, reads: Any) -> None:
        reads.brokers = set(listed)

    monkeypatch.setattr(mod, "read_brokers", read_brokers)
    monkeypatch.setattr(
        mod, "read_metadata", read_metadata or (lambda admin, exclude, internal, reads: True)
    )
    monkeypatch.setattr(mod, "read_high_watermarks", lambda admin, reads: None)
    monkeypatch.setattr(mod, "read_epoch_starts", lambda admin, reads, wanted: None)
    monkeypatch.setattr(mod, "read_reassignments", lambda admin, reads: None)
    monkeypatch.setattr(mod, "read_topic_configs", lambda admin, topics, reads: {})
    if jmx_urls is None:
        pages = page if isinstance(page, Mapping) else dict.fromkeys(range(1, brokers + 1), page)
        jmx_urls = {b: f"http://broker-{b}" for b in pages} if jmx else {}

        def fetch(url: str, timeout_s: float, max_bytes: int) -> str:
            return pages[int(url.removeprefix("http://broker-"))]

        monkeypatch.setattr(mod.jmx, "fetch", fetch)
    config = CollectorConfig(
        cluster="c", kafka={"bootstrap_servers": "127.0.0.1:1"}, jmx_urls=jmx_urls, **settings
    )
    c = mod.Collector(config) if clock is None else mod.Collector(config, clock=clock)
    c._admin = object()
    c._pool = mod.PageReaders(workers)
    return c


class Recording:
    """A collector running every second in a thread, keeping every event it built."""

    def __init__(
        self, lab: Lab, interval_s: float = 1.0, jmx_urls: dict[int, str] | None = None
    ) -> None:
        self.config = CollectorConfig(
            cluster="lab",
            kafka={"bootstrap_servers": lab.bootstrap_servers, "request_timeout_ms": 3000},
            jmx_urls=lab.jmx_urls if jmx_urls is None else jmx_urls,
            interval_s=interval_s,
            jmx_timeout_s=1.0,
            config_every_rounds=1,
        )
        self.collector = Collector(self.config)
        self.events: list[AnyEvent] = []
        self.rounds = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        def on_round(res: object) -> None:
            with self._lock:
                self.events.extend(res.events)  # type: ignore[attr-defined]
                self.rounds += 1

        self.collector.run(on_round=on_round)

    def __enter__(self) -> Recording:
        self.collector.start(produce=False)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.collector.stop()
        self._thread.join(timeout=30)

    def snapshot(self, since: int = 0) -> list[AnyEvent]:
        """The events recorded so far (from index ``since``), as one consistent copy."""
        with self._lock:
            return self.events[since:]

    def wait_rounds(self, n: int, timeout: float = 60) -> None:
        target = self.rounds + n
        deadline = time.monotonic() + timeout
        while self.rounds < target:
            assert time.monotonic() < deadline, f"collector did not finish {n} rounds"
            time.sleep(0.1)

    def wait_for(
        self,
        what: str,
        predicate: Callable[[AnyEvent], bool],
        timeout: float = 60,
        since: int = 0,
    ) -> AnyEvent:
        """The first recorded event (from index ``since``) that ``predicate`` accepts."""
        deadline = time.monotonic() + timeout
        seen = since
        while time.monotonic() < deadline:
            with self._lock:
                fresh = self.events[seen:]
                seen = len(self.events)
            for ev in fresh:
                if predicate(ev):
                    return ev
            time.sleep(0.2)
        raise AssertionError(f"no collected event {what} within {timeout}s")


class Load:
    """acks=all records at ``rate``/s in a thread until stopped, every ack logged."""

    def __init__(self, lab: Lab, topic: str, acks_log: Path, rate: float) -> None:
        self.stop = threading.Event()
        self.stats: ProduceStats | None = None

        def run() -> None:
            self.stats = produce(
                lab.bootstrap_servers, topic, rate=rate, acks="all", stop=self.stop,
                log_path=acks_log, delivery_timeout_s=60,
            )  # fmt: skip

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def finish(self) -> ProduceStats:
        self.stop.set()
        self._thread.join(timeout=120)
        assert self.stats is not None, "the producer did not finish"
        return self.stats


def names(findings: list[Finding]) -> list[str]:
    return [f"{f.kind}:{f.state} {f.details}" for f in findings]


class EpochRecordHold:
    """The collector's epoch-record request held back while :attr:`held` is set, as if it
    had failed (the collector asks again in a later round); :attr:`withheld` counts the
    partitions of each request held."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from monitor.collector import collector as mod

        self.held = threading.Event()
        self.withheld: list[int] = []
        real = mod.read_epoch_starts

        def read_epoch_starts(admin: Any, reads: Any, wanted: Any) -> None:
            if self.held.is_set():
                self.withheld.append(len(wanted))
                return
            real(admin, reads, wanted)

        monkeypatch.setattr(mod, "read_epoch_starts", read_epoch_starts)


class HandRounds:
    """The real collector, one round when the test says; its events through the model."""

    def __init__(
        self,
        lab: Lab,
        jmx_urls: dict[int, str],
        events_file: Path,
        model: ModelConfig | None = None,
        round_timeout_s: float = 4.0,
    ) -> None:
        self.config = CollectorConfig(
            cluster="lab",
            kafka={"bootstrap_servers": lab.bootstrap_servers, "request_timeout_ms": 3000},
            jmx_urls=jmx_urls,
            interval_s=1.0,
            jmx_timeout_s=1.0,
            round_timeout_s=round_timeout_s,
            config_every_rounds=1,
        )
        self.collector = Collector(self.config)
        self.model = ClusterModel(model or ModelConfig())
        self.events: list[AnyEvent] = []
        self.findings: list[Finding] = []
        self._file = events_file.open("w")

    def __enter__(self) -> HandRounds:
        self.collector.start(produce=False)
        return self

    def __exit__(self, *exc: object) -> None:
        self.collector.stop()
        self._file.close()

    def round(self) -> list[AnyEvent]:
        res = self.collector.round()
        for ev in res.events:
            self.events.append(ev)
            self._file.write(dumps(ev) + "\n")
            self.findings.extend(self.model.apply(to_model(ev)))
        self._file.flush()
        return res.events

    def until(
        self, what: str, pred: Callable[[PartitionEvent], bool], topic: str, rounds: int = 60
    ) -> PartitionEvent:
        """Rounds, a second apart, until a partition event of ``topic`` satisfies ``pred``."""
        for _ in range(rounds):
            started = time.monotonic()
            for ev in self.round():
                if isinstance(ev, PartitionEvent) and ev.topic == topic and pred(ev):
                    return ev
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
        raise AssertionError(f"no round showed {topic} {what} in {rounds} rounds")

    def of(self, topic: str) -> list[Finding]:
        return [f for f in self.findings if f.topic == topic]
