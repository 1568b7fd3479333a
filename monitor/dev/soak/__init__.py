"""``monitor soak``: the whole stack under steady load, lab faults and faults of the monitor.

Starts the demo's stack (a 3-broker lab, a one-broker monitor cluster for the monitor's own
topics, the collector, the Spark job with ``/metrics`` in its driver, Prometheus with the
shipped rules, Alertmanager with the shipped routes and a webhook pager) -- except that the
collector runs as a child process (``monitor collect``) so that it can really be killed --
and then loops cycles on a healthy topic (RF 3, ``min.insync.replicas=2``) under steady
``acks=all`` traffic:

1. a **quiet window**: no finding may open and no Prometheus alert may fire;
2. a **lab fault**, rotating: a follower SIGSTOPped then SIGCONTed; a follower stopped and
   started; the leader SIGKILLed and restarted (the controller elects an in-sync follower:
   a clean election);
3. while the lab fault's conditions are open, a **fault of the monitor itself**, rotating:
   SIGKILL of the Spark job in the middle of a micro-batch and a restart from its
   checkpoint; a crash and restart of the events topic's broker; SIGKILL of the collector
   and a restart; a restart of Prometheus on the same data;
4. recovery: the cluster heals and every condition the monitor opened resolves.

Every finding on the findings topic is attributed to the window its event time falls in.
Per lab fault, the findings the fault must cause (``REQUIRED``) must each appear exactly
once (one id; a condition's open and resolve once each); nothing may appear in a quiet
window; the findings topic is read back raw at the end, and a finding id written twice (a
replayed micro-batch after a SIGKILL) must carry the same content both times. The monitor's
health (its ``/metrics``, ``kafka_replication_monitor_up``, the input lag, the collector's
rounds, Prometheus ``up`` and the monitor-health alerts) is sampled through each monitor
fault. The RSS of the Spark job's process group (driver, JVM, Python workers) and of the
collector is sampled all along; after a warm-up (the job's: a time; the collector's: the
first quiet window of its run) it must not grow by more than a tolerance.

``soak.json`` holds every cycle, the health and RSS series and the verdict; the exit code is
0 only if the verdict is ``pass``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from monitor.dev.demo import (
    EVENTS,
    FINDINGS,
    STREAM_ARGS,
    STREAM_ENV,
    create_monitor_topics,
    monitor_cluster,
)
from monitor.dev.processes.prom import (
    AlertmanagerProcess,
    PrometheusProcess,
    WebhookReceiver,
    free_port,
)
from monitor.dev.processes.stream import FindingsReader, StreamProcess
from monitor.model import Finding

TOPIC = "soak"
#: Both partitions on the same replica order: an election picks the same new leader for
#: both, so "a follower" (a broker leading neither) always exists.
ASSIGNMENTS = {0: [1, 2, 3], 1: [1, 2, 3]}
LAB_FAULTS = ("pause", "stop", "leader_kill")
MONITOR_FAULTS = ("stream_kill", "events_broker_restart", "collector_kill", "prometheus_restart")
#: What each lab fault must cause, per partition of the soak topic, exactly once: events
#: (one id) and conditions (one open, one resolve of that open).
_FOLLOWER = {"isr_shrink": "event", "isr_expand": "event"}
_FOLLOWER |= {"under_replicated": "condition", "at_min_isr": "condition"}
REQUIRED: dict[str, dict[str, str]] = {
    "pause": _FOLLOWER,
    "stop": _FOLLOWER,
    "leader_kill": {**_FOLLOWER, "leader_election": "event"},
}
#: Findings a lab fault may also cause, any number of times (they depend on sampling
#: moments): the stalled or dead broker's lag and silence.
COLLATERAL = frozenset({"follower_lag", "hw_lag", "stale_telemetry"})
#: The monitor-health alerts of deploy/prometheus/rules/replication.yml.
HEALTH_ALERTS = ("monitor_down", "monitor_behind", "collector_down")


# -- small helpers ---------------------------------------------------------------------------


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


def _metric(page: dict[str, float] | None, name: str) -> float | None:
    """The value of ``name`` (unlabelled), or the max over its labelled series."""
    if page is None:
        return None
    if name in page:
        return page[name]
    values = [v for k, v in page.items() if k.startswith(name + "{")]
    return max(values) if values else None


def group_rss(pgid: int) -> tuple[int, int]:
    """Total RSS (bytes) and number of the processes in process group ``pgid``."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != pgid:  # state, ppid, pgrp, ...
                continue
            resident = int(Path(f"/proc/{entry.name}/statm").read_text().split()[1])
        except (OSError, ValueError):
            continue  # gone meanwhile
        total += resident * page
        count += 1
    return total, count


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


class CollectorProcess:
    """``python -m monitor collect --config FILE`` in a process group of its own."""

    def __init__(self, workdir: Path, config: dict[str, Any]) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = workdir / "collector.json"
        self.config_path.write_text(json.dumps(config, indent=2))
        self.metrics_url = f"http://127.0.0.1:{config['metrics_port']}/metrics"
        self.log_path = workdir / "collector.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "monitor", "collect", "--config", str(self.config_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def kill(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
        self.kill()


# -- the record ------------------------------------------------------------------------------


@dataclass
class Window:
    kind: str  # setup | quiet | fault | outage
    cycle: int
    start: float  # Unix seconds
    end: float = 0.0


@dataclass
class MonitorFault:
    name: str
    started: float  # Unix seconds
    ended: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    recovered: bool = False
    recovery_s: float | None = None


@dataclass
class Cycle:
    index: int
    lab_fault: str
    victim: int
    quiet: Window
    fault: Window
    monitor_faults: list[MonitorFault] = field(default_factory=list)
    detection_s: dict[str, float] = field(default_factory=dict)  # kind -> first arrival
    resolved_s: float | None = None
    healthy_s: float | None = None  # after resolved_s, until the monitor up, nothing firing
    findings: list[dict[str, Any]] = field(default_factory=list)
    matched: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


class Soak:
    def __init__(
        self,
        workdir: Path,
        *,
        minutes: float,
        cycles: int | None,
        cycle_seconds: float,
        quiet_seconds: float,
        fault_seconds: float,
        monitor_faults_per_cycle: int,
        outage_seconds: float,
        warmup_seconds: float,
        rss_tolerance: float,
        out: Callable[[str], None] = print,
    ) -> None:
        self.workdir = workdir
        self.minutes = minutes
        self.cycles_wanted = cycles
        self.cycle_seconds = cycle_seconds
        self.quiet_seconds = quiet_seconds
        self.fault_seconds = fault_seconds
        self.per_cycle = monitor_faults_per_cycle
        self.outage_seconds = outage_seconds
        self.warmup_seconds = warmup_seconds
        self.rss_tolerance = rss_tolerance
        self.say = out
        self.t0 = time.time()
        self.windows: list[Window] = []
        self.cycles: list[Cycle] = []
        self.arrivals: list[tuple[float, Finding]] = []  # (Unix arrival time, finding)
        self.open: dict[tuple[Any, ...], Finding] = {}
        self.alert_log: list[dict[str, Any]] = []  # changes of Prometheus's alert set
        self.quiet_alerts: list[dict[str, Any]] = []
        self.health: list[dict[str, Any]] = []
        self.rss: list[dict[str, Any]] = []
        self.unexpected_exits: list[dict[str, Any]] = []
        #: /metrics still showing conditions the findings topic had resolved.
        self.stale_metrics: list[dict[str, Any]] = []
        self.outage: dict[str, Any] = {}
        self._expect_down: set[str] = set()  # components down on purpose (the outage)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._prom_down = threading.Event()
        self._proc_lock = threading.Lock()  # the sampler's restarts vs the soak's kills
        self._struck = threading.Event()  # the cycle's first monitor fault is injected
        self._next_quiet = 0.0

    # -- live inputs ---------------------------------------------------------------------

    def _on_finding(self, f: Finding) -> None:
        now = time.time()
        with self._lock:
            self.arrivals.append((now, f))
            key = (f.kind, f.topic, f.partition, f.broker)
            if f.state.value == "open":
                self.open[key] = f
            elif f.state.value == "resolved":
                self.open.pop(key, None)
        if f.topic in (TOPIC, None):
            where = f.subject
            self.say(f"   {_clock(now - self.t0)} finding {f.kind:<18} {f.state.value:<8} {where}")

    def _window_now(self) -> Window | None:
        return self.windows[-1] if self.windows and not self.windows[-1].end else None

    def _watch_alerts(self, prom: PrometheusProcess) -> None:
        last: set[tuple[str, str, str]] = set()
        while not self._stop.wait(2.0):
            if self._prom_down.is_set():
                continue
            try:
                alerts = prom.alerts()
            except Exception:
                continue
            now = time.time()
            current = {
                (
                    a["labels"]["alertname"],
                    a["state"],
                    json.dumps(a["labels"], sort_keys=True),
                )
                for a in alerts
            }
            win = self._window_now()
            if win is not None and win.kind == "quiet":
                for name, state, labels in current:
                    if state == "firing":
                        self.quiet_alerts.append(
                            {"t": now, "cycle": win.cycle, "alert": name, "labels": labels}
                        )
            if current != last:
                self.alert_log.append(
                    {
                        "t": round(now, 1),
                        "window": f"{win.kind}:{win.cycle}" if win else None,
                        "alerts": sorted([n, s] for n, s, _ in current),
                    }
                )
                was = {(n, lb) for n, st, lb in last if st == "firing"}
                now_firing = {(n, lb) for n, st, lb in current if st == "firing"}
                for name, _ in sorted(now_firing - was):
                    self.say(f"   {_clock(now - self.t0)} alert {name} FIRING")
                for name, _ in sorted(was - now_firing):
                    self.say(f"   {_clock(now - self.t0)} alert {name} no longer firing")
            last = current

    def _sample(self, stream: StreamProcess, collector: CollectorProcess) -> None:
        """Health every 2 s, RSS every 10 s; restarts a component that died on its own."""
        n = 0
        while not self._stop.wait(2.0):
            try:
                self._sample_once(n, stream, collector)
            except Exception as e:  # a sampler that dies would blind the soak: go on
                self.say(f"   (sampler: {e!r})")
            n += 1

    def _sample_once(self, n: int, stream: StreamProcess, collector: CollectorProcess) -> None:
        now = time.time()
        page = scrape(stream.metrics_url)
        cpage = scrape(collector.metrics_url)
        self.health.append(
            {
                "t": round(now, 1),
                "exporter": page is not None,
                "monitor_up": _metric(page, "kafka_replication_monitor_up"),
                "input_lag": _metric(page, "kafka_replication_monitor_input_lag_records"),
                "telemetry_age": _metric(page, "kafka_replication_monitor_telemetry_age_seconds"),
                "processed": _metric(page, "kafka_replication_monitor_events_processed_total"),
                "collector": cpage is not None,
                "rounds": _metric(cpage, "kafka_replication_collector_rounds_total"),
                "collector_errors": sum(
                    v
                    for k, v in (cpage or {}).items()
                    if k.startswith("kafka_replication_collector_errors_total")
                ),
            }
        )
        if n % 5 == 0:
            sample: dict[str, Any] = {"t": round(now, 1)}
            for name, pid in (("stream", stream.pid), ("collector", collector.pid)):
                if pid is not None and name not in self._expect_down:
                    rss, procs = group_rss(pid)
                    if procs:
                        sample[name] = {"pid": pid, "rss_mb": round(rss / 2**20, 1)}
                        sample[name]["procs"] = procs
            self.rss.append(sample)
        with self._proc_lock:
            for name, proc in (("stream", stream), ("collector", collector)):
                if name not in self._expect_down and not proc.alive():
                    self.unexpected_exits.append({"t": now, "component": name})
                    self.say(f"   !! {name} exited on its own: restarting it")
                    proc.start()

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> int:
        from monitor.dev.lab.admin import create_topic
        from monitor.dev.lab.cluster import Lab
        from monitor.dev.lab.config import LabConfig
        from monitor.dev.lab.ports import reserve_base_port

        for sub in ("lab", "monitor-cluster", "stream", "prometheus", "alertmanager", "collector"):
            shutil.rmtree(self.workdir / sub, ignore_errors=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        exporter_port, collector_port = free_port(), free_port()
        hook = WebhookReceiver()
        with (
            reserve_base_port(19092, tries=20) as base_port,
            reserve_base_port(base_port + 500, tries=20, brokers=1) as monitor_port,
        ):
            lab = Lab(LabConfig(dir=self.workdir / "lab", base_port=base_port))
            mon = monitor_cluster(self.workdir / "monitor-cluster", monitor_port)
            stream = StreamProcess(
                self.workdir / "stream",
                mon.bootstrap_servers,
                metrics_port=exporter_port,
                args=STREAM_ARGS,
                env=STREAM_ENV,
            )
            collector = CollectorProcess(
                self.workdir / "collector",
                {
                    "cluster": "lab",
                    "kafka": {
                        "bootstrap_servers": lab.config.bootstrap_servers,
                        "request_timeout_ms": 3000,
                    },
                    "events_kafka": {"bootstrap_servers": mon.bootstrap_servers},
                    "events_topic": EVENTS,
                    "jmx_urls": {str(k): v for k, v in lab.jmx_urls.items()},
                    "interval_s": 1.0,
                    "jmx_timeout_s": 1.0,
                    "config_every_rounds": 5,
                    "metrics_port": collector_port,
                },
            )
            reader = FindingsReader(mon.bootstrap_servers, FINDINGS, self._on_finding)
            am = AlertmanagerProcess(self.workdir / "alertmanager", webhook=hook.address)
            prom = PrometheusProcess(
                self.workdir / "prometheus",
                exporter=f"127.0.0.1:{exporter_port}",
                collector=f"127.0.0.1:{collector_port}",
                alertmanager=am.address,
                scrape_interval="2s",
                evaluation_interval="2s",
            )
            threads: list[threading.Thread] = []
            try:
                self.windows.append(Window("setup", -1, time.time()))
                self.say("== setup: lab, monitor cluster, Spark job, collector, Prometheus")
                lab.up()
                mon.up()
                create_monitor_topics(mon.bootstrap_servers)
                create_topic(
                    lab.bootstrap_servers, TOPIC, assignments=ASSIGNMENTS, min_insync_replicas=2
                )
                stream.start()
                collector.start()
                hook.start()
                am.start()
                prom.start()
                reader.start()
                threads = [
                    threading.Thread(target=self._traffic, args=(lab,), daemon=True),
                    threading.Thread(target=self._watch_alerts, args=(prom,), daemon=True),
                    threading.Thread(target=self._sample, args=(stream, collector), daemon=True),
                ]
                for t in threads:
                    t.start()
                stream.wait_processing(900)
                self._healthy(stream, prom, 600)
                self.windows[-1].end = time.time()
                self.say(f"   stack up in {time.time() - self.t0:.0f}s; Prometheus {prom.url}")
                self._cycles(lab, mon, stream, collector, prom)
                if self.outage_seconds > 0:
                    self._long_outage(stream, prom, hook)
                return self._report(mon, prom, hook)
            finally:
                self._stop.set()
                for t in threads:
                    t.join(timeout=20)
                for stop in (reader.stop, collector.stop, stream.stop, prom.stop, am.stop):
                    try:
                        stop()
                    except Exception as e:  # keep stopping the rest
                        self.say(f"   (while stopping: {e!r})")
                hook.stop()
                for cluster in (lab, mon):
                    try:
                        cluster.down()
                    except Exception as e:
                        self.say(f"   (while stopping: {e!r})")

    def _traffic(self, lab: Any) -> None:
        from monitor.dev.lab.load import produce

        while not self._stop.is_set():
            try:
                produce(
                    lab.bootstrap_servers,
                    TOPIC,
                    rate=50,
                    acks="all",
                    duration_s=10.0,
                    stop=self._stop,
                    delivery_timeout_s=20.0,
                )
            except Exception:  # a broker restarting under the producer: go on
                self._stop.wait(0.5)

    def _settle(self, timeout: float) -> None:
        """Wait until the monitor holds no open condition on the lab."""

        def calm() -> bool:
            with self._lock:
                return not self.open

        wait_until(calm, timeout, f"open conditions left: {sorted(map(str, self.open))}")

    def _healthy(self, stream: StreamProcess, prom: PrometheusProcess, timeout: float) -> float:
        """Wait until nothing is wrong any more: no open condition, the monitor up, and no
        alert firing (those of the last fault resolve). Returns the seconds waited."""
        started = time.monotonic()
        self._settle(timeout)
        self._wait_monitor_up(stream, max(10.0, timeout - (time.monotonic() - started)))

        def caught_up() -> bool:
            # monitor_up tolerates 2 minutes of telemetry age and a large input lag; a
            # quiet window starts only once the job has read its backlog after a restart.
            page = scrape(stream.metrics_url)
            age = _metric(page, "kafka_replication_monitor_telemetry_age_seconds")
            lag = _metric(page, "kafka_replication_monitor_input_lag_records")
            return age is not None and age <= CAUGHT_UP_AGE_S and lag is not None and lag >= 0

        wait_until(
            caught_up,
            max(10.0, timeout - (time.monotonic() - started)),
            "the job catching up",
            1.0,
        )
        self._settle(60)  # what the backlog opened and closed
        self._metrics_agree(stream)

        def none_firing() -> bool:
            try:
                return not any(a["state"] == "firing" for a in prom.alerts())
            except Exception:
                return False

        wait_until(
            none_firing,
            max(10.0, timeout - (time.monotonic() - started)),
            "alerts still firing",
            1.0,
        )
        return time.monotonic() - started

    def _metrics_agree(self, stream: StreamProcess, within_s: float = 30.0) -> None:
        """/metrics must drop a condition soon after the findings topic resolved it (the
        next batch): found by the first 30-minute run, where it kept ``hw_lag`` open for 5
        minutes and the alert fired in a quiet window."""

        def shown() -> list[str]:
            page = scrape(stream.metrics_url) or {}
            return sorted(
                k
                for k, v in page.items()
                if k.startswith("kafka_replication_finding_open_since_timestamp_seconds{")
                and 'cluster="lab"' in k
                and "durability_risk" not in k
            )

        started = time.monotonic()
        try:
            wait_until(lambda: not shown(), within_s, "/metrics dropping resolved conditions", 1.0)
        except TimeoutError:
            left = shown()
            self.say(f"   !! /metrics still shows resolved conditions: {left}")
            self.stale_metrics.append(
                {"at": round(time.time() - self.t0, 1), "series": left, "waited_s": within_s}
            )
        else:
            lag = time.monotonic() - started
            if lag > 5:
                self.say(f"   /metrics caught up with the findings {lag:.1f}s after them")

    # -- cycles ----------------------------------------------------------------------------

    def _cycles(
        self,
        lab: Any,
        mon: Any,
        stream: StreamProcess,
        collector: CollectorProcess,
        prom: PrometheusProcess,
    ) -> None:
        budget = self.minutes * 60 - self.outage_seconds
        started = time.time()
        i = 0
        while True:
            if self.cycles_wanted is not None:
                if i >= self.cycles_wanted:
                    break
            elif i > 0 and time.time() - started + self.cycle_seconds > budget:
                break
            names = [
                MONITOR_FAULTS[(i * self.per_cycle + k) % len(MONITOR_FAULTS)]
                for k in range(self.per_cycle)
            ]
            self._cycle(
                i, LAB_FAULTS[i % len(LAB_FAULTS)], names, lab, mon, stream, collector, prom
            )
            i += 1

    def _cycle(
        self,
        i: int,
        lab_fault: str,
        monitor_faults: list[str],
        lab: Any,
        mon: Any,
        stream: StreamProcess,
        collector: CollectorProcess,
        prom: PrometheusProcess,
    ) -> None:
        from monitor.dev.lab.admin import describe_topic

        began = time.time()
        quiet = Window("quiet", i, began)
        self.windows.append(quiet)
        quiet_s = max(self.quiet_seconds, self._next_quiet)
        self.say(f"\n== cycle {i}: quiet window ({quiet_s:.0f}s)")
        time.sleep(quiet_s)
        quiet.end = time.time()
        states = describe_topic(lab.bootstrap_servers, TOPIC)
        leaders = {s.leader for s in states}
        if lab_fault == "leader_kill":
            victim = states[0].leader
        else:
            followers = [b for b in lab.node_ids if b not in leaders]
            victim = followers[i % len(followers)]
        fault = Window("fault", i, time.time())
        self.windows.append(fault)
        cycle = Cycle(i, lab_fault, victim, quiet, fault)
        self.cycles.append(cycle)
        self.say(f"== cycle {i}: {lab_fault} of broker {victim} (leaders {sorted(leaders)})")
        arrived = len(self.arrivals)
        self._struck.clear()
        recovery = threading.Thread(
            target=self._lab_fault, args=(lab, lab_fault, victim, cycle), daemon=True
        )
        recovery.start()
        try:
            # The monitor faults strike while the lab fault's conditions are open.
            self._wait_kind(arrived, "under_replicated", "open", 300, cycle)
            for name in monitor_faults:
                cycle.monitor_faults.append(
                    self._monitor_fault(name, lab, mon, stream, collector, prom)
                )
        except TimeoutError as e:
            cycle.problems.append(str(e))
            self.say(f"   !! {e}")
        finally:
            self._struck.set()
        recovery.join()
        try:
            self._wait_kind(arrived, "isr_expand", None, 900, cycle)
            self._settle(600)
            cycle.resolved_s = round(time.time() - fault.start, 1)
            time.sleep(6)  # Prometheus scrapes (2 s) and evaluates (2 s) the healed state
            cycle.healthy_s = round(self._healthy(stream, prom, 900) + 6, 1)
        except TimeoutError as e:
            cycle.problems.append(str(e))
            self.say(f"   !! {e}")
        fault.end = time.time()
        # The next quiet window fills what is left of the cycle's period.
        self._next_quiet = self.cycle_seconds - (fault.end - fault.start)
        self.say(
            f"   cycle {i}: healed {cycle.resolved_s}s after the fault; "
            f"detected {cycle.detection_s}"
        )

    def _wait_kind(
        self, since: int, kind: str, state: str | None, timeout: float, c: Cycle
    ) -> None:
        """Wait until every soak partition has a ``kind`` finding (in ``state``)."""

        def seen() -> bool:
            with self._lock:
                parts = {
                    f.partition
                    for _, f in self.arrivals[since:]
                    if f.topic == TOPIC and f.kind == kind and (state is None or f.state == state)
                }
            return parts >= set(ASSIGNMENTS)

        wait_until(seen, timeout, f"{kind} {state or ''} on every partition")
        c.detection_s.setdefault(kind, round(time.time() - c.fault.start, 1))

    def _hold(self, started: float) -> None:
        """The lab fault lasts ``fault_seconds``, and at least until the first monitor fault
        has struck: the cluster heals while the monitor is down or restarting."""
        time.sleep(max(0.0, started + self.fault_seconds - time.time()))
        self._struck.wait()

    def _lab_fault(self, lab: Any, name: str, victim: int, cycle: Cycle) -> None:
        from monitor.dev.lab.admin import wait_for_partitions

        started = time.time()
        try:
            if name == "pause":
                lab.pause(victim)
                self._hold(started)
                lab.resume(victim)
            elif name == "stop":
                lab.stop(victim)
                self._hold(started)
                lab.start(victim)
            else:
                lab.kill(victim)
                wait_for_partitions(
                    lab.bootstrap_servers,
                    TOPIC,
                    lambda ps: all(p.leader not in (-1, victim) for p in ps),
                    timeout_s=60,
                    what="a new leader",
                )
                self._hold(started)
                lab.start(victim)
            wait_for_partitions(
                lab.bootstrap_servers,
                TOPIC,
                lambda ps: all(set(p.isr) == set(p.replicas) for p in ps),
                timeout_s=180,
                what="full ISR again",
            )
        except Exception as e:
            cycle.problems.append(f"lab fault {name}: {e!r}")
            self.say(f"   !! lab fault {name}: {e!r}")

    # -- faults of the monitor ---------------------------------------------------------------

    def _monitor_fault(
        self,
        name: str,
        lab: Any,
        mon: Any,
        stream: StreamProcess,
        collector: CollectorProcess,
        prom: PrometheusProcess,
    ) -> MonitorFault:
        mf = MonitorFault(name, time.time())
        self.say(f"   {_clock(mf.started - self.t0)} monitor fault: {name}")
        d = mf.details
        try:
            if name == "stream_kill":
                with self._proc_lock:
                    d.update(self._kill_mid_batch(stream))
                    self._struck.set()
                    stream.start()
                d["exporter_back_s"] = round(
                    wait_until(lambda: scrape(stream.metrics_url) is not None, 120, "/metrics"), 1
                )
                d["monitor_up_s"] = round(
                    self._wait_monitor_up(stream, 900) + d["exporter_back_s"], 1
                )
            elif name == "events_broker_restart":
                mon.kill(1)
                self._struck.set()
                mon.start(1)
                d["broker_back_s"] = round(time.time() - mf.started, 1)
                d["stream_survived"] = stream.alive()
                self._wait_monitor_up(stream, 600)
            elif name == "collector_kill":
                with self._proc_lock:
                    collector.kill()
                    self._struck.set()
                    # Down a few scrapes long (a supervisor's restart delay), well under
                    # the model's stale_after_ms (15 s here): no telemetry gap finding.
                    time.sleep(COLLECTOR_DOWN_S)
                    collector.start()
                d["collector_back_s"] = round(
                    wait_until(
                        lambda: (_metric(scrape(collector.metrics_url), _ROUNDS) or 0) > 0,
                        120,
                        "the collector's rounds",
                    ),
                    1,
                )
                self._wait_monitor_up(stream, 600)
            else:
                self._prom_down.set()
                prom.stop()
                self._struck.set()
                prom.start(timeout=120)
                self._prom_down.clear()
                d["prometheus_back_s"] = round(time.time() - mf.started, 1)
                wait_until(lambda: set(prom.targets_up().values()) == {"up"}, 60, "targets up", 1.0)
                # The samples of the minute before the restart are still there (same TSDB).
                kept = prom.query(
                    'count_over_time(up{job="replication-monitor"}[60s])', at=mf.started - 1
                )
                d["samples_of_the_minute_before"] = int(float(kept[0]["value"][1])) if kept else 0
            mf.recovered = True
        except Exception as e:
            d["error"] = repr(e)
            self.say(f"   !! monitor fault {name}: {e!r}")
        finally:
            self._struck.set()
            self._prom_down.clear()
        mf.ended = time.time()
        mf.recovery_s = round(mf.ended - mf.started, 1)
        time.sleep(4)  # the last health samples and a Prometheus scrape of the healed state
        d.update(self._health_between(mf.started, mf.ended))
        d.update(self._prom_view(prom, mf.started))
        self.say(f"   {_clock(mf.ended - self.t0)} {name}: back after {mf.recovery_s}s; {d}")
        return mf

    def _kill_mid_batch(self, stream: StreamProcess) -> dict[str, Any]:
        """SIGKILL the job's group while a micro-batch is planned but not committed."""
        ckpt = stream.workdir / "checkpoint"

        def last(sub: str) -> int:
            folder = ckpt / sub
            ids = [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
            return max(ids, default=-1)

        deadline = time.monotonic() + 60
        mid = False
        while time.monotonic() < deadline:
            if last("offsets") > last("commits"):
                mid = True
                break
            time.sleep(0.05)
        batch = last("offsets")
        stream.kill()
        return {"mid_batch": mid, "killed_batch": batch, "last_commit": last("commits")}

    def _wait_monitor_up(self, stream: StreamProcess, timeout: float) -> float:
        return wait_until(
            lambda: _metric(scrape(stream.metrics_url), "kafka_replication_monitor_up") == 1,
            timeout,
            "kafka_replication_monitor_up back to 1",
            1.0,
        )

    def _health_between(self, start: float, end: float) -> dict[str, Any]:
        rows = [h for h in self.health if start - 1 <= h["t"] <= end + 1]
        lags = [h["input_lag"] for h in rows if h["input_lag"] is not None]
        ages = [h["telemetry_age"] for h in rows if h["telemetry_age"] is not None]
        errors = [h["collector_errors"] for h in rows if h["collector"]]
        return {
            "exporter_unreachable_samples": sum(1 for h in rows if not h["exporter"]),
            "monitor_up_0_samples": sum(1 for h in rows if h["exporter"] and not h["monitor_up"]),
            "collector_unreachable_samples": sum(1 for h in rows if not h["collector"]),
            "max_input_lag": max(lags, default=None),
            "max_telemetry_age_s": round(max(ages), 1) if ages else None,
            "collector_errors": max(errors, default=0) - min(errors, default=0),
            "health_samples": len(rows),
        }

    def _prom_view(self, prom: PrometheusProcess, start: float) -> dict[str, Any]:
        """What Prometheus recorded since ``start``: min ``up`` per job, the largest input
        lag, and every state the monitor-health alerts were in."""
        span = f"{int(time.time() - start) + 4}s"
        out: dict[str, Any] = {}
        try:
            for job in ("replication-monitor", "replication-collector"):
                r = prom.query(f'min_over_time(up{{job="{job}"}}[{span}])')
                out[f"prom_min_up_{job}"] = float(r[0]["value"][1]) if r else None
            r = prom.query(f"max_over_time(kafka_replication_monitor_input_lag_records[{span}])")
            out["prom_max_input_lag"] = float(r[0]["value"][1]) if r else None
            r = prom.query(f"min_over_time(kafka_replication_monitor_up[{span}])")
            out["prom_min_monitor_up"] = float(r[0]["value"][1]) if r else None
            alerts = prom.query(
                f'max_over_time(ALERTS{{alertname=~"{"|".join(HEALTH_ALERTS)}"}}[{span}])'
            )
            out["health_alerts"] = sorted(
                f"{a['metric']['alertname']}{{cause={a['metric'].get('cause', '')}}} "
                f"{a['metric']['alertstate']}"
                for a in alerts
            )
        except Exception as e:
            out["prom_error"] = repr(e)
        return out

    def _long_outage(self, stream: StreamProcess, prom: PrometheusProcess, hook: Any) -> None:
        """The job down long enough for monitor_down (scrape_failed, for: 2m) to fire and
        page; then back, and the alert resolves."""
        win = Window("outage", len(self.cycles), time.time())
        self.windows.append(win)
        self.say(f"\n== monitor outage: the Spark job down for {self.outage_seconds:.0f}s")
        with self._proc_lock:
            self._expect_down.add("stream")
            stream.kill()
        o: dict[str, Any] = {"down_s": self.outage_seconds}

        def firing() -> bool:
            try:
                return any(
                    a["labels"]["alertname"] == "monitor_down" and a["state"] == "firing"
                    for a in prom.alerts()
                )
            except Exception:
                return False

        try:
            o["monitor_down_firing_after_s"] = round(
                wait_until(firing, self.outage_seconds + 120, "monitor_down firing", 1.0), 1
            )
            o["paged_after_s"] = round(
                wait_until(
                    lambda: "monitor_down" in hook.alertnames(), 120, "monitor_down paged", 1.0
                )
                + o["monitor_down_firing_after_s"],
                1,
            )
            rest = self.outage_seconds - (time.time() - win.start)
            if rest > 0:
                time.sleep(rest)
        except TimeoutError as e:
            o["error"] = str(e)
        with self._proc_lock:
            stream.start()
            self._expect_down.discard("stream")
        restarted = time.time()
        try:
            self._wait_monitor_up(stream, 900)
            o["monitor_up_after_restart_s"] = round(time.time() - restarted, 1)
            o["monitor_down_resolved_after_restart_s"] = round(
                wait_until(lambda: not firing(), 120, "monitor_down resolved", 1.0)
                + o["monitor_up_after_restart_s"],
                1,
            )
        except TimeoutError as e:
            o["error"] = str(e)
        win.end = time.time()
        o.update(self._prom_view(prom, win.start))
        self.outage = o
        self.say(f"   outage: {o}")
        # A last quiet window: everything healthy again, nothing firing.
        try:
            self._healthy(stream, prom, 900)
        except TimeoutError as e:
            o["error"] = str(e)
        q = Window("quiet", len(self.cycles), time.time())
        self.windows.append(q)
        time.sleep(self.quiet_seconds)
        q.end = time.time()

    # -- the verdict -------------------------------------------------------------------------

    def _report(self, mon: Any, prom: PrometheusProcess, hook: Any) -> int:
        time.sleep(3)
        raw = read_raw(mon.bootstrap_servers, FINDINGS)
        first: dict[str, dict[str, Any]] = {}
        copies: Counter[str] = Counter()
        differing: list[str] = []
        for d in raw:
            copies[d["id"]] += 1
            if d["id"] in first:
                if json.dumps(first[d["id"]], sort_keys=True) != json.dumps(d, sort_keys=True):
                    differing.append(d["id"])
            else:
                first[d["id"]] = d
        unique = list(first.values())
        problems: list[str] = []
        # Conditions: open and resolve alternate per subject; a resolve closes its open.
        opened: dict[tuple[Any, ...], dict[str, Any]] = {}
        sequence_errors: list[str] = []
        for d in unique:
            if d["state"] == "event":
                continue
            key = (d["kind"], d["topic"], d["partition"], d["broker"])
            if d["state"] == "open":
                if key in opened:
                    sequence_errors.append(f"{key} opened twice without a resolve")
                opened[key] = d
            else:
                o = opened.pop(key, None)
                if o is None or o["at"] != d["opened_at"]:
                    sequence_errors.append(f"{key} resolved without its open")
        still_open = [str(k) for k in opened]
        problems += sequence_errors
        if still_open:
            problems.append(f"conditions still open at the end: {still_open}")
        if differing:
            problems.append(f"{len(differing)} finding ids written twice with different content")
        # Attribution by event time.
        windows = [w for w in self.windows if w.end]
        spurious: list[dict[str, Any]] = []
        setup_findings: list[dict[str, Any]] = []
        for d in unique:
            at = d["at"] / 1000
            w = next((w for w in windows if w.start - 1 <= at <= w.end), None)
            if w is not None and w.kind == "setup":
                setup_findings.append(_brief(d))  # the stack starting: reported, not judged
            elif w is None or w.kind != "fault":  # quiet, the outage (a quiet lab), after
                spurious.append({**_brief(d), "window": f"{w.kind}:{w.cycle}" if w else None})
        for c in self.cycles:
            mine = [d for d in unique if c.fault.start - 1 <= d["at"] / 1000 <= c.fault.end]
            c.findings = [_brief(d) for d in mine]
            c.matched = _match(c.lab_fault, mine)
            c.problems += c.matched.pop("problems")
            for mf in c.monitor_faults:
                if not mf.recovered:
                    c.problems.append(f"{mf.name}: the monitor did not come back")
            problems += [f"cycle {c.index}: {p}" for p in c.problems]
        if spurious:
            problems.append(f"{len(spurious)} findings outside fault windows")
        if self.quiet_alerts:
            names = sorted({a["alert"] for a in self.quiet_alerts})
            problems.append(f"alerts firing in quiet windows: {names}")
        if self.unexpected_exits:
            problems.append(f"components exited on their own: {self.unexpected_exits}")
        if self.stale_metrics:
            problems.append(f"/metrics kept resolved conditions open: {self.stale_metrics}")
        if self.outage_seconds > 0 and "error" in self.outage:
            problems.append(f"monitor outage: {self.outage['error']}")
        rss = _rss_summary(
            self.rss, self.warmup_seconds, self.rss_tolerance, [c.quiet.start for c in self.cycles]
        )
        for name, s in rss.items():
            for inc in s["incarnations"]:
                if inc.get("flat") is False:
                    problems.append(
                        f"{name} pid {inc['pid']}: RSS grew {inc['growth']:.0%} after warm-up "
                        f"(tolerance {self.rss_tolerance:.0%})"
                    )
        covered = {mf.name for c in self.cycles for mf in c.monitor_faults}
        verdict = "pass" if not problems else "fail"
        result = {
            "verdict": verdict,
            "problems": problems,
            "settings": {
                "minutes": self.minutes,
                "cycles": self.cycles_wanted,
                "cycle_seconds": self.cycle_seconds,
                "quiet_seconds": self.quiet_seconds,
                "fault_seconds": self.fault_seconds,
                "monitor_faults_per_cycle": self.per_cycle,
                "outage_seconds": self.outage_seconds,
                "warmup_seconds": self.warmup_seconds,
                "rss_tolerance": self.rss_tolerance,
                "topic": TOPIC,
                "assignments": ASSIGNMENTS,
                "stream_env": STREAM_ENV,
            },
            "duration_s": round(time.time() - self.t0, 1),
            "lab_faults": dict(Counter(c.lab_fault for c in self.cycles)),
            "monitor_faults": dict(
                Counter(mf.name for c in self.cycles for mf in c.monitor_faults)
            ),
            "monitor_faults_covered": sorted(covered),
            "findings_topic": {
                "records": len(raw),
                "unique_ids": len(unique),
                "raw_duplicates": len(raw) - len(unique),
                "ids_written_more_than_once": sum(1 for n in copies.values() if n > 1),
                "duplicates_with_different_content": len(differing),
                "condition_sequence_errors": sequence_errors,
                "still_open": still_open,
            },
            "spurious_findings": spurious,
            "setup_findings": setup_findings,
            "quiet_window_alerts": self.quiet_alerts,
            "quiet_windows_s": [round(w.end - w.start, 1) for w in windows if w.kind == "quiet"],
            "cycles": [_cycle_json(c) for c in self.cycles],
            "outage": self.outage,
            "pages": sorted(hook.alertnames()),
            "unexpected_exits": self.unexpected_exits,
            "stale_metrics": self.stale_metrics,
            "rss": rss,
            "rss_series": self.rss,
            "health_series": self.health,
            "alert_log": self.alert_log,
        }
        (self.workdir / "soak.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        self._print(result)
        return 0 if verdict == "pass" else 1

    def _print(self, r: dict[str, Any]) -> None:
        say = self.say
        say("\n== soak report")
        say(f"   {len(r['cycles'])} cycles in {r['duration_s'] / 60:.1f} min")
        say(f"   lab faults: {r['lab_faults']}   monitor faults: {r['monitor_faults']}")
        for c in r["cycles"]:
            say(
                f"   cycle {c['index']:>2} {c['lab_fault']:<11} b{c['victim']} "
                f"+{'+'.join(m['name'] for m in c['monitor_faults']) or '-':<40} "
                f"detected {c['detection_s']} healed {c['resolved_s']}s "
                f"(+{c['healthy_s']}s all clear) "
                f"{'ok' if not c['problems'] else 'PROBLEMS'}"
            )
            for m in c["monitor_faults"]:
                say(f"        {m['name']}: back in {m['recovery_s']}s  {m['details']}")
        ft = r["findings_topic"]
        say(
            f"   findings topic: {ft['records']} records, {ft['unique_ids']} ids, "
            f"{ft['raw_duplicates']} raw duplicates (replays, identical: "
            f"{ft['duplicates_with_different_content'] == 0})"
        )
        say(f"   findings outside fault windows: {len(r['spurious_findings'])}")
        say(f"   alerts firing in quiet windows: {len(r['quiet_window_alerts'])}")
        if r["outage"]:
            say(f"   monitor outage: {r['outage']}")
        say(f"   pages delivered: {r['pages']}")
        for name, s in r["rss"].items():
            for inc in s["incarnations"]:
                say(
                    f"   RSS {name:<9} pid {inc['pid']:>7}: {inc['samples']:>3} samples over "
                    f"{inc['span_s'] / 60:5.1f} min, min {inc['min_mb']} max {inc['max_mb']} MB"
                    + (
                        f", after warm-up {inc['first_mb']} -> {inc['last_mb']} MB "
                        f"({inc['growth']:+.1%}, {inc['slope_mb_per_h']:+.0f} MB/h)"
                        if inc.get("growth") is not None
                        else " (too short to judge)"
                    )
                )
        for p in r["problems"]:
            say(f"   !! {p}")
        say(f"   verdict: {r['verdict'].upper()}   ({self.workdir / 'soak.json'})")


_ROUNDS = "kafka_replication_collector_rounds_total"
#: The job has caught up when its newest telemetry is this fresh (the model's stale_after_ms
#: is 15 s here).
CAUGHT_UP_AGE_S = 10.0
#: How long the killed collector stays down before its restart.
COLLECTOR_DOWN_S = 5.0


def _clock(s: float) -> str:
    return f"[{int(s) // 60:02d}:{int(s) % 60:02d}]"


def _brief(d: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": d["id"],
        "kind": d["kind"],
        "state": d["state"],
        "topic": d["topic"],
        "partition": d["partition"],
        "broker": d["broker"],
        "at": d["at"],
    }


def _match(lab_fault: str, found: list[dict[str, Any]]) -> dict[str, Any]:
    """The fault's required findings, each exactly once per partition; nothing else but
    collateral."""
    required = REQUIRED[lab_fault]
    problems: list[str] = []
    counts: dict[str, dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(Counter))
    unexpected: list[str] = []
    for d in found:
        kind = d["kind"]
        if d["topic"] == TOPIC and kind in required:
            counts[kind][d["partition"]][d["state"]] += 1
        elif kind not in COLLATERAL:
            unexpected.append(f"{kind} {d['state']} {d['topic']}/{d['partition']}")
    for kind, typ in required.items():
        for p in ASSIGNMENTS:
            got = dict(counts[kind][p])
            want = {"event": 1} if typ == "event" else {"open": 1, "resolved": 1}
            if got != want:
                problems.append(f"{kind} on {TOPIC}/{p}: {got or 'none'}, expected {want}")
    if unexpected:
        problems.append(f"unexpected findings: {unexpected}")
    collateral = Counter(d["kind"] for d in found if d["kind"] in COLLATERAL)
    return {
        "one_to_one": not problems,
        "required": {k: {p: dict(v) for p, v in ps.items()} for k, ps in counts.items()},
        "collateral": dict(collateral),
        "problems": problems,
    }


def _cycle_json(c: Cycle) -> dict[str, Any]:
    return {
        "index": c.index,
        "lab_fault": c.lab_fault,
        "victim": c.victim,
        "quiet": [round(c.quiet.start, 1), round(c.quiet.end, 1)],
        "fault": [round(c.fault.start, 1), round(c.fault.end, 1)],
        "monitor_faults": [asdict(m) for m in c.monitor_faults],
        "detection_s": c.detection_s,
        "resolved_s": c.resolved_s,
        "healthy_s": c.healthy_s,
        "matched": c.matched,
        "findings": c.findings,
        "problems": c.problems,
    }


def _rss_summary(
    series: list[dict[str, Any]],
    warmup_s: float,
    tolerance: float,
    quiet_starts: list[float] | None = None,
) -> dict[str, Any]:
    """Per component and process incarnation: min/max, and the RSS growth over the part of
    its run that is judged, from the median of its first samples to the median of its last
    (up to three each, never the same ones):

    - the collector (a Python process: warm after its imports and first rounds) from the
      first quiet window that starts while it runs (``quiet_starts``). Every quiet window
      starts with the stack healthy and caught up: the same point of the run on any
      machine, however fast. The first collector runs from the stack's start into the
      first fault at least, so it always has that point and the samples after it: judged
      whenever two samples follow it.
    - the job's process group (a JVM grows its heap for minutes) after ``warmup_s`` of its
      run, when at least six samples span two minutes after that (the 30-minute soak)."""
    out: dict[str, Any] = {}
    for name in ("stream", "collector"):
        by_pid: dict[int, list[tuple[float, float]]] = defaultdict(list)
        for s in series:
            if name in s:
                by_pid[s[name]["pid"]].append((s["t"], s[name]["rss_mb"]))
        incarnations = []
        for pid, points in by_pid.items():
            start = points[0][0]
            inc: dict[str, Any] = {
                "pid": pid,
                "samples": len(points),
                "span_s": round(points[-1][0] - start, 1),
                "min_mb": min(v for _, v in points),
                "max_mb": max(v for _, v in points),
                "growth": None,
            }
            if name == "collector":
                warm_at = next((q for q in sorted(quiet_starts or []) if q >= start), None)
                after = [(t, v) for t, v in points if warm_at is not None and t >= warm_at]
                judged = len(after) >= 2
            else:
                warm_at = start + warmup_s
                after = [(t, v) for t, v in points if t >= warm_at]
                judged = len(after) >= 6 and after[-1][0] - after[0][0] >= 120
            if judged and warm_at is not None:
                k = min(3, len(after) // 2)
                first = statistics.median(v for _, v in after[:k])
                last = statistics.median(v for _, v in after[-k:])
                ts = [t for t, _ in after]
                vs = [v for _, v in after]
                slope = statistics.linear_regression(ts, vs).slope * 3600
                inc.update(
                    judged_from=round(warm_at, 1),
                    judged_samples=len(after),
                    first_mb=first,
                    last_mb=last,
                    growth=round((last - first) / first, 4),
                    slope_mb_per_h=round(slope, 1),
                    flat=(last - first) / first <= tolerance,
                )
            incarnations.append(inc)
        out[name] = {"incarnations": incarnations}
    return out


# -- the command -------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "soak",
        help="run the whole stack for a while under load, lab faults and monitor faults",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--minutes", type=float, default=30.0, help="how long to run (default 30)")
    p.add_argument("--cycles", type=int, help="exactly this many cycles (overrides --minutes)")
    p.add_argument("--dir", type=Path, default=None, help="work folder (default .cache/soak)")
    p.add_argument(
        "--cycle-seconds",
        type=float,
        default=150.0,
        help="period of a cycle; the quiet window fills what the fault leaves (default 150)",
    )
    p.add_argument("--quiet-seconds", type=float, default=20.0, help="shortest quiet window")
    p.add_argument("--fault-seconds", type=float, default=20.0, help="how long a lab fault lasts")
    p.add_argument(
        "--monitor-faults-per-cycle",
        type=int,
        default=1,
        choices=range(0, len(MONITOR_FAULTS) + 1),
        help="monitor faults injected during each lab fault (default 1)",
    )
    p.add_argument(
        "--outage-seconds",
        type=float,
        default=None,
        help="at the end, the Spark job down this long, so that monitor_down fires and "
        "pages (default 150 with --minutes >= 20, else 0: off)",
    )
    p.add_argument(
        "--warmup-seconds",
        type=float,
        default=300.0,
        help="RSS warm-up of each run of the Spark job (300); the collector's RSS is judged "
        "from the first quiet window of its run",
    )
    p.add_argument(
        "--rss-tolerance",
        type=float,
        default=0.25,
        help="largest RSS growth after warm-up, as a fraction (0.25)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from monitor.dev.lab.paths import cache_root

    outage = args.outage_seconds
    if outage is None:
        outage = 150.0 if args.minutes >= 20 and args.cycles is None else 0.0
    soak = Soak(
        args.dir or cache_root() / "soak",
        minutes=args.minutes,
        cycles=args.cycles,
        cycle_seconds=args.cycle_seconds,
        quiet_seconds=args.quiet_seconds,
        fault_seconds=args.fault_seconds,
        monitor_faults_per_cycle=args.monitor_faults_per_cycle,
        outage_seconds=outage,
        warmup_seconds=args.warmup_seconds,
        rss_tolerance=args.rss_tolerance,
    )
    try:
        return soak.run()
    except TimeoutError as e:
        print(f"monitor soak: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("monitor soak: interrupted; everything it started has been stopped", file=sys.stderr)
        return 130
