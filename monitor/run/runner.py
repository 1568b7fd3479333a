"""``monitor run``: the whole monitor as one supervised unit on one host.

In order: ``monitor stream`` (local Spark, the slowest to start: it waits for its events
topic), the monitor's own cluster (a one-broker Kafka it starts itself,
:mod:`monitor.run.local_kafka`, unless the user names one), its three topics there (made
with the documented settings: :mod:`monitor.contract.topics`), the live view on the
findings topic, then ``monitor collect`` -- the two commands as children
(:mod:`monitor.run.children`), each serving its ``/metrics``. Then it prints each finding
as it comes and, once, what the job's first batches saw. A child that exits ends the unit
(its last lines said, every other part stopped); Ctrl-C or SIGTERM stops it all, in the
reverse order.

The production topology -- collector and job apart, the job on a Spark cluster -- is the
same two commands with the same settings (docs/deploy.md).
"""

from __future__ import annotations

import contextlib
import logging
import re
import signal
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from kafka.errors import KafkaError
from prometheus_client.parser import text_string_to_metric_families

from monitor import web
from monitor.connection import KafkaConnection
from monitor.contract.topics import Role
from monitor.preflight.report import Report
from monitor.preflight.topics import Need, check_topics
from monitor.run.children import Child
from monitor.run.live import FindingsView
from monitor.run.local_kafka import LocalKafka, LocalKafkaError

EXIT_FAILED, EXIT_CHECK, EXIT_CONFIG, EXIT_INTERRUPTED = 1, 2, 78, 130
#: How long the job waits for its events topic (the local Kafka's start, the topics' making).
TOPICS_WAIT_S = 300


@dataclass
class Plan:
    """What to run, as ``monitor run``'s flags said it."""

    state_dir: Path
    #: The collector's and the job's own flags (their settings files, the watched cluster,
    #: the exporters): passed through as given.
    collect_args: list[str]
    stream_args: list[str]
    #: The monitor's own cluster: one the user names, or None for the local one.
    events: KafkaConnection | None
    events_on_watched_cluster: bool
    #: The watched cluster, for ``events_on_watched_cluster``.
    watched: KafkaConnection | None
    topics: dict[Role, str]
    create_topics: bool
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9478
    collector_metrics_port: int = 9479
    #: Both /metrics' web configuration (TLS, basic auth): given to the job and the collector.
    web_config_file: Path | None = None
    verbose: bool = False
    env: dict[str, str] = field(default_factory=dict)


#: Lines that say what went wrong (a Python or Java exception, a refusal), in a child's tail.
_WHY = re.compile(r"Error|Exception|^monitor (collect|stream):|FAIL|refused", re.I)


def last_words(lines: list[str], most: int = 12) -> list[str]:
    """What to show of a child that died: the lines of its tail that say why (exceptions,
    its own refusals -- not the query plan a Spark error prints before them), then its
    last three lines.

    >>> last_words(["plan", "  +- Project", "py4j.protocol.Py4JJavaError: boom", "x", "y", "z"])
    ['py4j.protocol.Py4JJavaError: boom', 'x', 'y', 'z']
    """
    why = [ln for ln in lines[:-3] if _WHY.search(ln) and not ln.startswith((" ", "\t"))]
    return [*why[-(most - 3) :], *lines[-3:]]


class Runner:
    """The unit's parts, started in order and stopped in reverse."""

    def __init__(self, plan: Plan, say: Callable[[str], None] = print) -> None:
        self.plan = plan
        self.say = say
        self.kafka: LocalKafka | None = None
        self.children: list[Child] = []
        self.view: FindingsView | None = None
        self._stop = threading.Event()
        self._signal: int | None = None

    # -- the whole run -----------------------------------------------------------------------

    def run(self) -> int:
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._run()
        except KeyboardInterrupt:
            self._signal = signal.SIGINT
            return EXIT_INTERRUPTED
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the stop below is not cut short
            self._shutdown()
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signal = signum
        self._stop.set()

    def _run(self) -> int:
        plan = self.plan
        plan.state_dir.mkdir(parents=True, exist_ok=True)
        # This process's own Kafka clients (topics, the live view) retry quietly: what the
        # collector and the job log is in their logs, the notable lines echoed.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
        events = self._events_cluster()
        if events is None:
            return EXIT_FAILED
        logs = plan.state_dir / "logs"
        metrics = ["--metrics-host", plan.metrics_host]
        if plan.web_config_file is not None:
            metrics += ["--web-config-file", str(plan.web_config_file)]
        # The job first, at once: its Spark takes longest to start (~30 s), and it waits for
        # the events topic (--wait-for-topics) while the cluster and the topics are made.
        job = Child(
            "job",
            ["stream", *plan.stream_args, "--bootstrap", events.bootstrap_servers,
             "--events-topic", plan.topics[Role.EVENTS],
             "--findings-topic", plan.topics[Role.FINDINGS],
             "--deadletter-topic", plan.topics[Role.DEADLETTER],
             "--checkpoint", str(plan.state_dir / "checkpoint"),
             "--store", str(plan.state_dir / "store"), *metrics,
             "--metrics-port", str(plan.metrics_port),
             "--wait-for-topics", str(TOPICS_WAIT_S)],
            logs / "stream.log", stop_signal=signal.SIGINT, grace_s=60,
            env=plan.env or None, say=self.say, verbose=plan.verbose,
        )  # fmt: skip
        job.start()
        self.children.append(job)
        if self.kafka is not None and not self._start_local_kafka():
            return EXIT_FAILED
        if not self._topics(events):
            return EXIT_CHECK
        self.view = FindingsView(events, plan.topics[Role.FINDINGS], self.say)
        try:
            self.view.open()
        except KafkaError as e:
            self.say(f"monitor run: reading the findings topic on {events.bootstrap_servers}: {e}")
            return EXIT_FAILED
        collector = Child(
            "collector",
            ["collect", *plan.collect_args, *self._events_flags(events), *metrics,
             "--metrics-port", str(plan.collector_metrics_port)],
            logs / "collector.log", stop_signal=signal.SIGTERM, grace_s=15,
            env=plan.env or None, say=self.say, verbose=plan.verbose,
        )  # fmt: skip
        collector.start()
        self.children.append(collector)
        host = plan.metrics_host
        scheme = "https" if web.load(plan.web_config_file).tls is not None else "http"
        self.say(
            f"monitor run: /metrics -- job {scheme}://{host}:{plan.metrics_port}/metrics, "
            f"collector {scheme}://{host}:{plan.collector_metrics_port}/metrics; state in "
            f"{plan.state_dir}; logs in {logs}; Ctrl-C stops it all"
        )
        self.say("monitor run: findings print here as the job writes them")
        return self._watch()

    # -- the parts ---------------------------------------------------------------------------

    def _events_cluster(self) -> KafkaConnection | None:
        plan = self.plan
        if plan.events is not None:
            self.say(f"monitor run: the monitor's topics on {plan.events.describe()}")
            return plan.events
        if plan.events_on_watched_cluster:
            assert plan.watched is not None
            self.say(
                f"monitor run: the monitor's topics on the watched cluster itself "
                f"({plan.watched.bootstrap_servers}): its telemetry fails with the cluster it "
                "watches -- give it one of its own (--events-bootstrap) in production"
            )
            return plan.watched
        self.kafka = LocalKafka(plan.state_dir / "kafka", say=self.say)
        self.kafka.prepare()  # its address now; it starts once the job is starting
        return KafkaConnection(bootstrap_servers=self.kafka.bootstrap_servers)

    def _start_local_kafka(self) -> bool:
        assert self.kafka is not None
        self.say(
            f"monitor run: starting the monitor's own one-broker Kafka (data in "
            f"{self.kafka.folder})"
        )
        try:
            self.kafka.start()
        except LocalKafkaError as e:
            self.say(f"monitor run: {e}")
            return False
        self.say(f"monitor run: the monitor's topics on {self.kafka.bootstrap_servers} (local)")
        return True

    def _events_flags(self, events: KafkaConnection) -> list[str]:
        if self.plan.events_on_watched_cluster and self.plan.events is None:
            return ["--events-on-watched-cluster"]
        return ["--events-bootstrap", events.bootstrap_servers]

    def _topics(self, events: KafkaConnection) -> bool:
        """The three topics on the monitor's cluster, made where missing (always on the
        local cluster; on a named one with --create-topics). Only problems are said."""
        from kafka import KafkaAdminClient

        plan = self.plan
        lines: list[str] = []
        report = Report(lines.append)
        admin: Any = KafkaAdminClient(client_id="replication-monitor-run", **events.client_kwargs())
        try:
            needs = [
                Need(Role.EVENTS, plan.topics[Role.EVENTS], ("READ", "WRITE"), "the monitor"),
                Need(Role.FINDINGS, plan.topics[Role.FINDINGS], ("READ", "WRITE"), "the monitor"),
                Need(Role.DEADLETTER, plan.topics[Role.DEADLETTER], ("WRITE",), "the job"),
            ]
            create = self.kafka is not None or plan.create_topics
            command = "monitor run ... --check"
            check_topics(admin, report, events, needs, create=create, command=command)
        finally:
            admin.close()
        for text in lines:
            if ": FAIL -- " in text or "created" in text:
                self.say(f"monitor run: {text}")
        return report.problems == 0

    # -- supervising ---------------------------------------------------------------------------

    def _watch(self) -> int:
        assert self.view is not None
        first_view = False
        next_look = time.monotonic() + 5
        while not self._stop.is_set():
            self.view.poll(0.5)
            for child in self.children:
                code = child.exited()
                if code is not None:
                    self.say(f"monitor run: {child.name} exited (code {code}); its last lines:")
                    for text in last_words(child.tail().splitlines()):
                        self.say(f"    {text}")
                    self.say(f"monitor run: its whole log: {child.log}; stopping the rest")
                    return EXIT_CONFIG if code == EXIT_CONFIG else EXIT_FAILED
            if not first_view and time.monotonic() >= next_look:
                next_look = time.monotonic() + 5
                first_view = self._say_first_view()
        return EXIT_INTERRUPTED if self._signal == signal.SIGINT else 0

    def _say_first_view(self) -> bool:
        """Once the job's /metrics shows a batch: how many partitions and brokers it
        tracks, and how many partitions no exporter sample has reached. Not with a web
        configuration: its credentials are the scraper's, not this command's (True: done)."""
        if self.plan.web_config_file is not None:
            return True
        url = f"http://{self.plan.metrics_host}:{self.plan.metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                text = answer.read().decode()
        except OSError:
            return False
        try:
            line = first_view(text)
        except ValueError:  # a page cut short: the next look reads it again
            return False
        if line is None:
            return False
        self.say(line)
        return True

    def _shutdown(self) -> None:
        if self.children or self.kafka is not None:
            self.say("monitor run: stopping")
        if self.view is not None:
            with contextlib.suppress(Exception):
                self.view.close()
        for child in reversed(self.children):  # the collector, then the job
            child.stop()
        if self.kafka is not None:
            self.kafka.stop()


def first_view(page: str) -> str | None:
    """The line ``monitor run`` says once the job's ``/metrics`` (``page``) shows a batch:
    the partitions it tracks, how many no exporter sample has reached, and the brokers it
    knows with how many of them answer the collector (``broker_up``). ``None`` while the
    job tracks nothing yet.

    >>> page = "\\n".join([
    ...     'kafka_replication_partitions{cluster="c"} 6.0',
    ...     'kafka_replication_partitions_without_replica_samples{cluster="c"} 2.0',
    ...     'kafka_replication_broker_up{cluster="c",broker="1"} 1.0',
    ...     'kafka_replication_broker_up{cluster="c",broker="2"} 0.0',
    ... ])
    >>> for part in first_view(page).split(", "):
    ...     print(part)
    monitor run: the job tracks 6 partition(s)
    2 without a replica sample yet (JMX: collect --check); 2 broker(s)
    1 answering the collector
    >>> first_view("kafka_replication_partitions 0.0") is None
    True
    """
    values: dict[str, float] = {}
    brokers = 0
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
            brokers += sample.name == "kafka_replication_broker_up"
    partitions = int(values.get("kafka_replication_partitions", 0))
    if not partitions:
        return None
    unsampled = int(values.get("kafka_replication_partitions_without_replica_samples", 0))
    answering = int(values.get("kafka_replication_broker_up", 0))
    sampled = (
        "every one with its replicas' log ends sampled"
        if unsampled == 0
        else f"{unsampled} without a replica sample yet (JMX: collect --check)"
    )
    heard = "every one" if answering == brokers else str(answering)
    return (
        f"monitor run: the job tracks {partitions} partition(s), {sampled}; "
        f"{brokers} broker(s), {heard} answering the collector"
    )
