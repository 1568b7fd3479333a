"""``monitor demo``: a real cluster loses data, and the monitor says exactly what happened.

Starts the lab (3 KRaft brokers from Maven jars) and, beside it, a one-broker "monitor
cluster" for the monitor's own topics (a monitor whose telemetry rides on the cluster it
watches goes blind during the very outage it must report); the collector publishing events
there; the Spark job (``monitor stream``, its own process) with the Prometheus exporter in its
driver; Prometheus with the shipped rules and Alertmanager with the shipped routes. Then it
plays a scripted incident on a topic under steady traffic:

1. a follower stalls -> the ISR shrinks -> under min ISR (an acks=all write is refused);
2. the follower returns;
3. the follower stops, the leader goes on alone, then the leader is killed while only the
   lagging replica survives -> offline -> a forced unclean election loses committed data;
4. recovery: the old leader returns, a preferred election gives it back its leadership.

A live log shows findings (read from the job's findings topic) and Prometheus alerts as they
change; the end prints an incident summary (detection delays, committed offsets lost,
confirmed by a consumer reading the topic back), writes ``summary.json`` and draws the victim
partition's watermark diagram from the job's state store. Every process it started is
stopped at the end or on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from monitor.collector import Collector, CollectorConfig
from monitor.contract.events import DEADLETTER_TOPIC, EVENTS_TOPIC, FINDINGS_TOPIC
from monitor.contract.state import PartitionView
from monitor.dev.processes.prom import (
    AlertmanagerProcess,
    PrometheusProcess,
    WebhookReceiver,
    free_port,
)
from monitor.dev.processes.spark import SparkStandalone
from monitor.dev.processes.stream import FindingsReader, StreamProcess
from monitor.model import Finding, FindingKind, Severity
from monitor.query.plot import plot_watermarks
from monitor.query.render import summary
from monitor.query.sources import SourceError, sample_of
from monitor.query.store import StoreSource

if TYPE_CHECKING:
    from monitor.dev.lab.cluster import Lab

TOPIC = "orders"
K = FindingKind
EVENTS, FINDINGS, DEADLETTER = EVENTS_TOPIC, FINDINGS_TOPIC, DEADLETTER_TOPIC
#: The lab's broker settings make faults show within seconds; the model's lag thresholds
#: follow (3 collection intervals, as docs/findings.md recommends). Passed to the job as
#: MONITOR_STREAMING_* settings.
STREAM_ENV = {
    "MONITOR_STREAMING_MODEL__FOLLOWER_LAG_MS": "6000",
    "MONITOR_STREAMING_MODEL__HW_LAG_MS": "6000",
    "MONITOR_STREAMING_MODEL__STALE_AFTER_MS": "15000",
}
#: Which injected fault each alert answers (for the fault -> firing delays).
ALERT_FAULT = {
    "offline": "kill",
    "unclean_election": "unclean",
    "committed_data_loss": "unclean",
    "truncation_below_hw": "unclean",  # the new leader's restart truncation, seen at election
    "leader_election": "kill",
}
STREAM_ARGS = ["--trigger-seconds", "1", "--tick-ms", "2000", "--buckets", "2"]


@dataclass
class Phase:
    name: str
    started: float
    detected: dict[str, float] = field(default_factory=dict)


class Demo:
    def __init__(
        self,
        workdir: Path,
        short: bool,
        out: Callable[[str], None] = print,
        standalone: bool = False,
    ) -> None:
        self.workdir = workdir
        self.short = short
        self.standalone = standalone
        self.say = out
        self.phases: list[Phase] = []
        self.fault_times: dict[str, float] = {}
        self.alert_first_firing: dict[str, float] = {}
        self.page_first: dict[str, float] = {}  # first delivery to the pager (webhook)
        self._stop = threading.Event()
        self.acks = workdir / "acks.jsonl"
        self._phase_start = 0
        self.findings: list[Finding] = []  # as read from the findings topic
        self.stream: StreamProcess | None = None

    # -- output ------------------------------------------------------------------------

    def _on_finding(self, f: Finding) -> None:
        if f.topic not in (TOPIC, None) or (
            f.severity < Severity.WARNING and f.kind not in (K.LEADER_ELECTION, K.ISR_EXPAND)
        ):
            return
        if f.topic is None and f.kind != K.STALE_TELEMETRY:
            return
        phase = self.phases[-1] if self.phases else None
        if phase is not None and f.state.value in ("open", "event"):
            phase.detected.setdefault(str(f.kind), time.monotonic())
        mark = {"critical": "!!", "warning": " !", "info": "  "}[f.severity.label]
        self.say(f"  {mark} {f.kind:<20} {f.state.value:<8} {f.subject:<18} {summary(f)}")

    def phase(self, name: str) -> None:
        self.phases.append(Phase(name, time.monotonic()))
        self._phase_start = len(self.findings)
        self.say(f"\n== {name}")

    def wait_for(self, what: str, pred: Callable[[Finding], bool], timeout: float) -> Finding:
        deadline = time.monotonic() + timeout
        seen = self._phase_start  # only what this phase caused
        while time.monotonic() < deadline:
            found = self.findings[seen:]
            seen += len(found)
            for f in found:
                if pred(f):
                    return f
            time.sleep(0.2)
        raise TimeoutError(f"the monitor did not report {what} within {timeout:.0f}s")

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> int:
        from monitor.dev.lab.admin import create_topic, elect_leader
        from monitor.dev.lab.cluster import Lab
        from monitor.dev.lab.config import LabConfig
        from monitor.dev.lab.load import produce, verify
        from monitor.dev.lab.ports import reserve_base_port

        # A fresh cluster every time: the incident must start from a healthy, empty topic.
        for sub in ("lab", "monitor-cluster", "stream", "spark", "prometheus", "alertmanager"):
            shutil.rmtree(self.workdir / sub, ignore_errors=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.acks.unlink(missing_ok=True)
        exporter_port, collector_port = free_port(), free_port()
        hook = WebhookReceiver()
        with (
            reserve_base_port(19092, tries=20) as base_port,
            reserve_base_port(base_port + 500, tries=20, brokers=1) as monitor_port,
        ):
            lab = Lab(LabConfig(dir=self.workdir / "lab", base_port=base_port))
            mon = monitor_cluster(self.workdir / "monitor-cluster", monitor_port)
            spark = SparkStandalone(self.workdir / "spark") if self.standalone else None
            stream_args = list(STREAM_ARGS)
            if spark is not None:
                stream_args += [
                    "--master", spark.url,
                    "--conf", "spark.executor.memory=1g",
                    "--conf", "spark.cores.max=2",
                ]  # fmt: skip
            stream = self.stream = StreamProcess(
                self.workdir / "stream",
                mon.bootstrap_servers,
                metrics_port=exporter_port,
                args=stream_args,
                env={**STREAM_ENV, **(spark.env if spark is not None else {})},
            )
            reader = FindingsReader(mon.bootstrap_servers, FINDINGS, self._on_finding)
            reader.findings = self.findings
            am = AlertmanagerProcess(self.workdir / "alertmanager", webhook=hook.address)
            prom = PrometheusProcess(
                self.workdir / "prometheus",
                exporter=f"127.0.0.1:{exporter_port}",
                collector=f"127.0.0.1:{collector_port}",
                alertmanager=am.address,
                scrape_interval="2s",
                evaluation_interval="2s",
            )
            collector: Collector | None = None
            threads: list[threading.Thread] = []
            try:
                self.say(
                    "== setup: lab (3 brokers), monitor cluster (1 broker), Spark job with "
                    "exporter, Prometheus, Alertmanager"
                )
                # The monitor's side first: the Spark job's start-up (its JVM, the first
                # batch) overlaps the lab's.
                mon.up()
                if spark is not None:
                    spark.start()
                    self.say(f"   Spark standalone master {spark.url} with 1 worker")
                create_monitor_topics(mon.bootstrap_servers)
                stream.start()
                lab.up()
                hook.start()
                am.start()
                prom.start()
                self.say(
                    f"   Prometheus {prom.url}  Alertmanager http://{am.address}  "
                    f"exporter {stream.metrics_url}  job log {stream.log_path}"
                )
                create_topic(
                    lab.bootstrap_servers, TOPIC, assignments={0: [1, 2]}, min_insync_replicas=2
                )
                collector = Collector(
                    CollectorConfig(
                        cluster="lab",
                        kafka={
                            "bootstrap_servers": lab.bootstrap_servers,
                            "request_timeout_ms": 3000,
                        },
                        events_kafka={"bootstrap_servers": mon.bootstrap_servers},
                        events_topic=EVENTS,
                        jmx_urls=lab.jmx_urls,
                        interval_s=1.0,
                        jmx_timeout_s=1.0,
                        config_every_rounds=5,
                        metrics_port=collector_port,
                    )
                )
                collector.start(produce=True)
                threads = [
                    threading.Thread(target=collector.run, daemon=True),
                    threading.Thread(
                        target=self._traffic, args=(lab.bootstrap_servers, produce), daemon=True
                    ),
                    threading.Thread(target=self._watch_alerts, args=(prom, hook), daemon=True),
                ]
                for t in threads:
                    t.start()
                reader.start()
                waited = [0.0]

                def progress(s: float) -> None:
                    if s - waited[0] >= 15:
                        waited[0] = s
                        self.say(f"   waiting for the Spark job's first batch ({s:.0f}s)")

                stream.wait_processing(300, progress)
                self._incident(lab, elect_leader)
                report = verify(lab.bootstrap_servers, TOPIC, self.acks, settle_s=5)
                return self._summary(report.partitions[0].lost, prom, hook, lab)
            finally:
                self._stop.set()
                if collector is not None:
                    collector.stop()
                for t in threads:
                    t.join(timeout=15)
                stops = [reader.stop, stream.stop, prom.stop, am.stop, hook.stop]
                if spark is not None:
                    stops.insert(2, spark.stop)
                for stop in stops:
                    try:
                        stop()
                    except Exception as e:  # keep stopping the rest
                        self.say(f"   (while stopping: {e!r})")
                for cluster in (lab, mon):
                    try:
                        cluster.down()
                    except Exception as e:
                        self.say(f"   (while stopping: {e!r})")

    def _traffic(self, bootstrap: str, produce: Callable[..., object]) -> None:
        """Steady acks=1 traffic, every acknowledged record logged for the final check."""
        reported: set[str] = set()
        while not self._stop.is_set():
            try:
                produce(
                    bootstrap,
                    TOPIC,
                    rate=100,
                    acks="1",
                    duration_s=2.0,
                    log_path=self.acks,
                    stop=self._stop,
                    delivery_timeout_s=15.0,
                )
            except Exception as e:  # offline for a while: keep trying, say it once
                if type(e).__name__ not in reported:
                    reported.add(type(e).__name__)
                    self.say(f"   (traffic: {type(e).__name__}: {str(e)[:100]}; retrying)")
                time.sleep(0.5)

    def _watch_alerts(self, prom: PrometheusProcess, pager: WebhookReceiver) -> None:
        firing: set[str] = set()
        while not self._stop.wait(1.0):
            for name, t in sorted(pager.first_received().items()):
                if name not in self.page_first:
                    self.page_first[name] = t
                    self.say(f"  >> PAGE delivered  {name}")
            try:
                now = {a["labels"]["alertname"] for a in prom.alerts() if a["state"] == "firing"}
            except Exception:
                continue
            for name in sorted(now - firing):
                self.alert_first_firing.setdefault(name, time.monotonic())
                self.say(f"  >> alert FIRING    {name}")
            for name in sorted(firing - now):
                self.say(f"  >> alert resolved  {name}")
            firing = now

    def _incident(self, lab: object, elect_leader: Callable[..., None]) -> None:
        from monitor.dev.lab.cluster import Lab

        assert isinstance(lab, Lab)
        steady = 5 if self.short else 15

        def mine(kind: FindingKind, state: str | None = None) -> Callable[[Finding], bool]:
            return lambda f: (
                f.topic == TOPIC and f.kind == kind and (state is None or f.state == state)
            )

        self.phase(f"steady traffic ({steady}s): followers a few offsets behind, no findings")
        time.sleep(steady)

        self.phase("1. follower 2 stalls (SIGSTOP)")
        self.fault_times["stall"] = time.monotonic()
        lab.pause(2)
        self.wait_for("under_min_isr", mine(K.UNDER_MIN_ISR, "open"), 90)
        self._probe_acks_all(lab.bootstrap_servers)
        # The page: Prometheus fires under_min_isr once it has held for the rule's `for`,
        # Alertmanager delivers it to the pager after the route's group_wait.
        deadline = time.monotonic() + 150
        while "under_min_isr" not in self.page_first:
            if time.monotonic() > deadline:
                raise TimeoutError("under_min_isr did not reach the pager within 150s")
            time.sleep(1)

        self.phase("2. follower 2 returns (SIGCONT)")
        lab.resume(2)
        self.wait_for("under_min_isr resolved", mine(K.UNDER_MIN_ISR, "resolved"), 120)

        self.phase(
            "3. on-call lowers min.insync.replicas to 1 to keep writes flowing; "
            "follower 2 stops; leader 1 commits alone"
        )
        # With min ISR 2, Kafka 4.x (KIP-966) would not advance the HW under min ISR and
        # would keep broker 2 eligible: the election below would be clean. Lowering min
        # ISR is what makes the leader's lone writes *committed* -- and losable.
        _set_min_isr(lab.bootstrap_servers, 1)
        lab.stop(2)
        self.wait_for("isr shrink", mine(K.ISR_SHRINK), 60)
        time.sleep(4 if self.short else 10)  # committed records the follower never gets
        self.fault_times["kill"] = time.monotonic()
        lab.kill(1)
        lab.start(2)  # two of three KRaft voters again: the controller can act
        self.wait_for("offline", mine(K.OFFLINE, "open"), 90)
        time.sleep(3)  # let the collector sample broker 2's LEO
        self.say("   forcing an unclean election of broker 2 (Admin ElectLeaders UNCLEAN)")
        self.fault_times["unclean"] = time.monotonic()
        elect_leader(lab.bootstrap_servers, TOPIC, 0, unclean=True)
        self.wait_for("unclean_election", mine(K.UNCLEAN_ELECTION), 60)
        self.wait_for("committed_data_loss", mine(K.COMMITTED_DATA_LOSS), 30)

        self.phase("4. recovery: broker 1 returns, preferred leader election")
        lab.start(1)
        self.wait_for("ISR back to [1, 2]", mine(K.UNDER_REPLICATED, "resolved"), 120)
        elect_leader(lab.bootstrap_servers, TOPIC, 0, unclean=False)
        self.wait_for(
            "leader 1 again",
            lambda f: mine(K.LEADER_ELECTION)(f) and f.details.get("leader") == 1,
            60,
        )
        time.sleep(4)  # let Prometheus evaluate the last alerts

    def _probe_acks_all(self, bootstrap: str) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            retries=0,
            request_timeout_ms=5000,
            delivery_timeout_ms=6000,
        )
        try:
            producer.send(TOPIC, b"probe").get(timeout=10)
            self.say("   an acks=all write was accepted (!)")
        except Exception as e:
            self.say(f"   an acks=all write is refused, as it must be: {type(e).__name__}")
        finally:
            producer.close(timeout=5)

    def _summary(
        self, lost_offsets: list[int], prom: PrometheusProcess, hook: WebhookReceiver, lab: object
    ) -> int:
        findings = [f for f in self.findings if f.topic == TOPIC]
        loss = [f for f in findings if f.kind == K.COMMITTED_DATA_LOSS]
        committed = sum(int(f.details["lost_count"]) for f in loss)
        held = sum(int(f.details["old_leader_offsets_lost"]) for f in loss)
        consumer_lost = len(lost_offsets)
        # The consumer's lost offsets, split at what the monitor last saw of the old leader:
        # [new leader's LEO, old leader's last sampled LEO) is what the monitor reports as
        # held and lost; offsets above were acknowledged (acks=1) after its last sample,
        # which no sampling monitor can see.
        ranges = [
            (int(f.details["new_leader_leo"]), int(f.details["leader_before_leo"])) for f in loss
        ]
        seen = sum(1 for o in lost_offsets if any(lo <= o < hi for lo, hi in ranges))
        after = sum(1 for o in lost_offsets if all(o >= hi for _lo, hi in ranges))
        # Pages reach the webhook after Alertmanager's group_wait: give them a moment.
        deadline = time.monotonic() + 30
        awaited = {"committed_data_loss", "unclean_election"}
        while not awaited <= hook.alertnames() and time.monotonic() < deadline:
            time.sleep(0.5)
        # The delivery times the receiver stamped, whether or not the live view has shown them.
        for name, t in hook.first_received().items():
            self.page_first.setdefault(name, t)
        self.say("\n== incident summary")
        for ph in self.phases[1:]:
            for kind, t in sorted(ph.detected.items(), key=lambda kv: kv[1]):
                self.say(f"   {ph.name[:40]:<40} {kind:<20} detected +{t - ph.started:5.1f}s")
        alert_delays: dict[str, float] = {}
        page_delays: dict[str, float] = {}
        for name, t in sorted(self.alert_first_firing.items(), key=lambda kv: kv[1]):
            fault = ALERT_FAULT.get(name, "stall")
            base = self.fault_times.get(fault)
            if base is None or t < base:
                self.say(f"   alert {name:<22} firing (not caused by an injected fault)")
                continue
            alert_delays[name] = round(t - base, 1)
            paged = self.page_first.get(name)
            page = f", paged {paged - base:6.1f}s" if paged is not None else ""
            if paged is not None:
                page_delays[name] = round(paged - base, 1)
            self.say(f"   alert {name:<22} firing {t - base:6.1f}s{page} after the {fault}")
        self.say(f"   pages and tickets delivered by Alertmanager: {sorted(hook.alertnames())}")
        self.say(f"   committed offsets lost (HW last observed vs new leader's log): {committed}")
        self.say(
            f"   acknowledged records lost (consumer read-back):                 {consumer_lost}"
        )
        self.say(f"   held by the old leader at its last sample, not by the new one:  {held}")
        self.say(
            f"   of the consumer's {consumer_lost}: {seen} in the range the monitor reported, "
            f"{after} acknowledged after its last sample of the old leader"
        )
        plot = self.workdir / "explain-orders-0.png"
        self._plot(plot)
        (self.workdir / "findings.jsonl").write_text(
            "".join(json.dumps(f.to_dict()) + "\n" for f in self.findings)
        )
        self.say(f"   watermark diagram: {plot}")
        stored = self._stored_kinds()
        self.say(f"   findings in the job's state store: {sorted(stored)}")
        detected = {
            ph.name: {k: round(t - ph.started, 1) for k, t in ph.detected.items()}
            for ph in self.phases[1:]
        }
        verdict, ok = loss_verdict(loss, committed, held, seen, after, consumer_lost)
        (self.workdir / "summary.json").write_text(
            json.dumps(
                {
                    "detected_after_phase_start_s": detected,
                    "alert_firing_after_fault_s": alert_delays,
                    "page_delivered_after_fault_s": page_delays,
                    "alertmanager_received": sorted(hook.alertnames()),
                    "committed_offsets_lost": committed,
                    "consumer_lost": consumer_lost,
                    "held_by_old_leader": held,
                    "consumer_lost_in_reported_range": seen,
                    "consumer_lost_after_last_sample": after,
                    "consumer_lost_below_reported_range": consumer_lost - seen - after,
                    "store_finding_kinds": sorted(stored),
                    # "consistent", or why not; and what each loss was judged on.
                    "loss_verdict": verdict.split(":")[0],
                    "loss_evidence": [str(f.details.get("leo_sampled")) for f in loss],
                },
                indent=2,
            )
            + "\n"
        )
        self.say(f"   verdict: {verdict}")
        return 0 if ok else 1

    def _store(self) -> StoreSource | None:
        if self.stream is None or not self.stream.store.exists():
            return None
        try:
            return StoreSource(self.stream.store, cluster="lab")
        except SourceError:
            return None

    def _victim_rows(self) -> list[PartitionView]:
        """The victim partition's rows in the job's state store, oldest first."""
        store = self._store()
        return store.views(TOPIC, 0) if store is not None else []

    def _stored_kinds(self) -> set[str]:
        store = self._store()
        if store is None:
            return set()
        return {f.kind for f in store.reader.all_findings() if f.topic == TOPIC}

    def _plot(self, path: Path) -> None:
        views = self._victim_rows()
        if not views:
            self.say("   (no state rows of the victim partition in the store: no diagram)")
            return
        samples = [sample_of(v, v.updated_at) for v in views if v.updated_at >= 0]
        mine = [f.to_dict() for f in self.findings if f.topic == TOPIC]
        plot_watermarks(views[-1], samples, mine, path)


def loss_verdict(
    loss: list[Finding], committed: int, held: int, seen: int, after: int, consumer_lost: int
) -> tuple[str, bool]:
    """The demo's verdict on the monitor's loss report against the consumer's read-back.

    ``consistent``: every offset of the reported range ``[new leader's log end, old
    leader's last sampled LEO)`` was acknowledged to the demo's producer (it is the topic's
    only writer), so the consumer must miss exactly those, and the rest of what it misses
    lies above the range (acknowledged after the monitor's last sample of the old leader).
    A few acknowledgements may die with the leader's crash unlogged: 2 % slack, never more.

    ``UNDER-REPORTED`` passes only when the findings themselves say their evidence was
    incomplete -- no loss of the election was judged on the new leader's epoch record
    (``leo_sampled`` is never ``epoch``), so the count rests on a LEO sample that a restart
    truncation can undercut -- and by no more than 2 % of the reported count. Anything else
    (an over-report, an under-report the findings call exact) fails.

    >>> loss_verdict([], 0, 0, 0, 0, 5)[1]
    False
    """
    slack = max(5, held // 50)
    exact = 0 < committed <= held and held - slack <= seen <= held and seen + after == consumer_lost
    below = consumer_lost - seen - after
    if exact:
        return (
            "consistent: the consumer misses exactly the offsets the monitor reported "
            "lost, plus writes acknowledged after the monitor's last sample",
            True,
        )
    incomplete = bool(loss) and all(f.details.get("leo_sampled") != "epoch" for f in loss)
    if 0 < committed <= held and seen >= held - slack and below > 0 and incomplete:
        bounded = below <= max(5, committed // 50)
        return (
            f"UNDER-REPORTED by {below}: the consumer also misses {below} offsets below the "
            "reported range; the findings say their evidence was incomplete (judged on the "
            "new leader's LEO sample, no epoch record)"
            + ("" if bounded else f", beyond the {max(5, committed // 50)} allowed"),
            bounded,
        )
    if below > 0:
        return (
            f"UNDER-REPORTED by {below}: the consumer misses {below} offsets below the "
            "range the monitor reported as exact",
            False,
        )
    return (
        f"INCONSISTENT: reported {committed} committed / {held} held, the consumer missed "
        f"{seen} of them and {after} above",
        False,
    )


#: A one-broker cluster: internal topics with one replica.
ONE_BROKER = {
    name: "1"
    for name in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.replication.factor",
        "default.replication.factor",
    )
}


def monitor_cluster(workdir: Path, base_port: int) -> Lab:
    """The one-broker cluster that holds the monitor's own topics (demo and soak)."""
    from monitor.dev.lab.cluster import Lab
    from monitor.dev.lab.config import LabConfig

    return Lab(
        LabConfig(dir=workdir, base_port=base_port, brokers=1, extra_broker_config=ONE_BROKER)
    )


def create_monitor_topics(bootstrap: str) -> None:
    """The events, findings and dead-letter topics on the monitor's cluster."""
    from monitor.dev.lab.admin import create_topic

    for name in (EVENTS, FINDINGS, DEADLETTER):
        create_topic(
            bootstrap,
            name,
            partitions=2 if name == EVENTS else 1,
            replication_factor=1,
            min_insync_replicas=1,
        )


def _set_min_isr(bootstrap: str, value: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, TOPIC, {"min.insync.replicas": str(value)})]
        )
    finally:
        admin.close()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="play a scripted incident on a local cluster",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--dir", type=Path, default=None, help="work folder (default .cache/demo)")
    p.add_argument("--short", action="store_true", help="shorter waits (CI)")
    p.add_argument(
        "--standalone",
        action="store_true",
        help="run the Spark job on a local standalone cluster (master + 1 worker)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from monitor.dev.lab.paths import cache_root

    workdir = args.dir or cache_root() / "demo"
    demo = Demo(workdir, args.short, standalone=args.standalone)
    try:
        return demo.run()
    except TimeoutError as e:
        print(f"monitor demo: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("monitor demo: interrupted; everything it started has been stopped", file=sys.stderr)
        return 130
