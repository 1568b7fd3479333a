"""``monitor demo``: a real cluster loses data, and the monitor says exactly what happened.

Starts the lab (3 KRaft brokers from Maven jars), the collector, the engine with the
Prometheus exporter, Prometheus with the shipped rules and Alertmanager with the shipped
routes, then plays a scripted incident on a topic under steady traffic:

1. a follower stalls -> the ISR shrinks -> under min ISR (an acks=all write is refused);
2. the follower returns;
3. the follower stops, the leader goes on alone, then the leader is killed while only the
   lagging replica survives -> offline -> a forced unclean election loses committed data;
4. recovery: the old leader returns, a preferred election gives it back its leadership.

A live log shows findings and Prometheus alerts as they change; the end prints an incident
summary (detection delays, committed offsets lost, confirmed by a consumer reading the topic
back) and draws the victim partition's watermark diagram. Every process it started is
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

from monitor.collector import Collector, CollectorConfig, RoundResult
from monitor.engine import LocalEngine
from monitor.exporter import MetricsServer
from monitor.model import Finding, FindingKind, ModelConfig, Severity
from monitor.ops.prom import AlertmanagerProcess, PrometheusProcess, WebhookReceiver, free_port
from monitor.plot import plot_watermarks
from monitor.render import summary
from monitor.sources import Sample, sample_of
from monitor.views import PartitionView, partition_view

TOPIC = "orders"
K = FindingKind


@dataclass
class Phase:
    name: str
    started: float
    detected: dict[str, float] = field(default_factory=dict)


class Demo:
    def __init__(self, workdir: Path, short: bool, out: Callable[[str], None] = print) -> None:
        self.workdir = workdir
        self.short = short
        self.say = out
        self.phases: list[Phase] = []
        self.fault_times: dict[str, float] = {}
        self.alert_first_firing: dict[str, float] = {}
        self._stop = threading.Event()
        self.acks = workdir / "acks.jsonl"
        self.history: list[Sample] = []
        self._phase_start = 0  # the victim partition, for the watermark diagram
        # Lab broker settings make faults show within seconds; the model's lag thresholds
        # follow (3 collection intervals, as docs/findings.md recommends).
        self.engine = LocalEngine(
            ModelConfig(follower_lag_ms=6_000, hw_lag_ms=6_000, stale_after_ms=15_000),
            on_finding=self._on_finding,
        )

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
        self._phase_start = len(self.engine.findings)
        self.say(f"\n== {name}")

    def wait_for(self, what: str, pred: Callable[[Finding], bool], timeout: float) -> Finding:
        deadline = time.monotonic() + timeout
        seen = self._phase_start  # only what this phase caused
        while time.monotonic() < deadline:
            found = self.engine.findings[seen:]
            seen += len(found)
            for f in found:
                if pred(f):
                    return f
            time.sleep(0.2)
        raise TimeoutError(f"the monitor did not report {what} within {timeout:.0f}s")

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> int:
        from monitor.lab.admin import create_topic, elect_leader
        from monitor.lab.cluster import Lab
        from monitor.lab.config import LabConfig
        from monitor.lab.load import produce, verify
        from monitor.lab.ports import reserve_base_port

        # A fresh cluster every time: the incident must start from a healthy, empty topic.
        for sub in ("lab", "prometheus", "alertmanager"):
            shutil.rmtree(self.workdir / sub, ignore_errors=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.acks.unlink(missing_ok=True)
        exporter_port, collector_port = free_port(), free_port()
        hook = WebhookReceiver()
        with reserve_base_port(19092, tries=20) as base_port:
            lab = Lab(LabConfig(dir=self.workdir / "lab", base_port=base_port))
            server = MetricsServer(self.engine.snapshot, port=exporter_port)
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
                self.say("== setup: lab (3 brokers), exporter, Prometheus, Alertmanager")
                lab.up()
                hook.start()
                server.start()
                am.start()
                prom.start()
                self.say(
                    f"   Prometheus {prom.url}  Alertmanager http://{am.address}  "
                    f"exporter http://127.0.0.1:{exporter_port}/metrics"
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
                        jmx_urls=lab.jmx_urls,
                        interval_s=1.0,
                        jmx_timeout_s=1.0,
                        config_every_rounds=5,
                        metrics_port=collector_port,
                    )
                )
                collector.start(produce=False)

                def on_round(res: RoundResult) -> None:
                    self.engine.feed(res.events, now_ms=int(time.time() * 1000))
                    self._record()

                threads = [
                    threading.Thread(
                        target=collector.run, kwargs={"on_round": on_round}, daemon=True
                    ),
                    threading.Thread(
                        target=self._traffic, args=(lab.bootstrap_servers, produce), daemon=True
                    ),
                    threading.Thread(target=self._watch_alerts, args=(prom,), daemon=True),
                ]
                for t in threads:
                    t.start()
                self._incident(lab, elect_leader)
                report = verify(lab.bootstrap_servers, TOPIC, self.acks, settle_s=5)
                return self._summary(report.lost_count, prom, hook, lab)
            finally:
                self._stop.set()
                if collector is not None:
                    collector.stop()
                for t in threads:
                    t.join(timeout=15)
                for stop in (prom.stop, am.stop, server.stop, hook.stop, lab.down):
                    try:
                        stop()
                    except Exception as e:  # keep stopping the rest
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

    def _watch_alerts(self, prom: PrometheusProcess) -> None:
        firing: set[str] = set()
        while not self._stop.wait(1.0):
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
        from monitor.lab.cluster import Lab

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
        # The page: Prometheus fires under_min_isr once it has held for the rule's `for`.
        deadline = time.monotonic() + 150
        while "under_min_isr" not in self.alert_first_firing:
            if time.monotonic() > deadline:
                raise TimeoutError("Prometheus did not fire under_min_isr within 150s")
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
        self, consumer_lost: int, prom: PrometheusProcess, hook: WebhookReceiver, lab: object
    ) -> int:
        findings = [f for f in self.engine.findings if f.topic == TOPIC]
        loss = [f for f in findings if f.kind == K.COMMITTED_DATA_LOSS]
        committed = sum(int(f.details["lost_count"]) for f in loss)
        held = sum(int(f.details["old_leader_offsets_lost"]) for f in loss)
        # What the leader could acknowledge between its last sample and the crash: one
        # collection round (1 s) and a scrape's delay at the traffic's 100 records/s.
        slack = 2 * 100
        # Pages reach the webhook after Alertmanager's group_wait: give them a moment.
        deadline = time.monotonic() + 30
        while "committed_data_loss" not in hook.alertnames() and time.monotonic() < deadline:
            time.sleep(0.5)
        self.say("\n== incident summary")
        for ph in self.phases[1:]:
            for kind, t in sorted(ph.detected.items(), key=lambda kv: kv[1]):
                self.say(f"   {ph.name[:40]:<40} {kind:<20} detected +{t - ph.started:5.1f}s")
        for name, t in sorted(self.alert_first_firing.items(), key=lambda kv: kv[1]):
            base = self.fault_times.get("stall", t)
            self.say(f"   alert {name:<22} first firing {t - base:6.1f}s after the first fault")
        self.say(f"   pages and tickets delivered by Alertmanager: {sorted(hook.alertnames())}")
        self.say(f"   committed offsets lost (HW last observed vs new leader's log): {committed}")
        self.say(
            f"   acknowledged records lost (consumer read-back):                 {consumer_lost}"
        )
        self.say(f"   held by the old leader at its last sample, not by the new one:  {held}")
        plot = self.workdir / "explain-orders-0.png"
        self._plot(plot)
        (self.workdir / "findings.jsonl").write_text(
            "".join(json.dumps(f.to_dict()) + "\n" for f in self.engine.findings)
        )
        self.say(f"   watermark diagram: {plot}")
        # acks=1 writes acknowledged after the last sample are lost too (sampling cannot
        # see them), so the consumer counts a little more than the monitor.
        ok = 0 < committed <= held <= consumer_lost <= held + slack
        self.say(
            "   verdict: "
            + (
                f"consistent: committed <= held <= lost by the consumer <= held + {slack} "
                "(one collection interval of writes)"
                if ok
                else "INCONSISTENT: the monitor's numbers do not bracket what the consumer saw"
            )
        )
        return 0 if ok else 1

    def _victim(self) -> PartitionView | None:
        model = self.engine.model
        ps = model.partitions.get(("lab", TOPIC, 0))
        if ps is None:
            return None
        ts = model.topics.get(("lab", TOPIC))
        return partition_view(ps, ts.config if ts else None)

    def _record(self) -> None:
        v = self._victim()
        if v is not None and v.last_seen >= 0:
            self.history.append(sample_of(v, v.last_seen))

    def _plot(self, path: Path) -> None:
        v = self._victim()
        if v is None or not self.history:
            return
        mine = [f.to_dict() for f in self.engine.findings if f.topic == TOPIC]
        plot_watermarks(v, self.history, mine, path)


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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from monitor.lab.paths import cache_root

    workdir = args.dir or cache_root() / "demo"
    demo = Demo(workdir, args.short)
    try:
        return demo.run()
    except TimeoutError as e:
        print(f"monitor demo: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("monitor demo: interrupted; everything it started has been stopped", file=sys.stderr)
        return 130
