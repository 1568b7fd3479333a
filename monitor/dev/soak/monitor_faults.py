"""Faults of the monitor itself, struck while a lab fault's conditions are open: SIGKILL of
the Spark job in the middle of a micro-batch and a restart from its checkpoint; a crash and
restart of the events topic's broker; SIGKILL of the collector and a restart; a restart of
Prometheus on the same data. And at the end of a long soak, the job down long enough for
``monitor_down`` to fire and page.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from monitor.dev.processes.stream import StreamProcess
from monitor.dev.soak.health import Health
from monitor.dev.soak.plan import COLLECTOR_DOWN_S, SoakPlan
from monitor.dev.soak.probes import metric, scrape, wait_until
from monitor.dev.soak.record import MonitorFault, Record, Window

_ROUNDS = "kafka_replication_collector_rounds_total"


class MonitorFaults:
    def __init__(self, plan: SoakPlan, record: Record, health: Health) -> None:
        self.plan = plan
        self.record = record
        self.health = health
        self.stack = health.stack
        self.say = record.say

    def inject(self, name: str, struck: threading.Event) -> MonitorFault:
        """Strike ``name`` (setting ``struck`` the moment it has struck), wait until the
        monitor is back, and record what its health and Prometheus showed meanwhile."""
        stack, health = self.stack, self.health
        stream, collector, prom = stack.stream, stack.collector, stack.prom
        mf = MonitorFault(name, time.time())
        self.say(f"   {self.record.clock(mf.started)} monitor fault: {name}")
        d = mf.details
        try:
            if name == "stream_kill":
                with stack.proc_lock:
                    d.update(kill_mid_batch(stream))
                    struck.set()
                    stream.start()
                d["exporter_back_s"] = round(
                    wait_until(lambda: scrape(stream.metrics_url) is not None, 120, "/metrics"), 1
                )
                d["monitor_up_s"] = round(health.monitor_up(900) + d["exporter_back_s"], 1)
            elif name == "events_broker_restart":
                stack.mon.kill(1)
                struck.set()
                stack.mon.start(1)
                d["broker_back_s"] = round(time.time() - mf.started, 1)
                d["stream_survived"] = stream.alive()
                health.monitor_up(600)
            elif name == "collector_kill":
                with stack.proc_lock:
                    collector.kill()
                    struck.set()
                    # Down a few scrapes long (a supervisor's restart delay), well under
                    # the model's stale_after_ms (15 s here): no telemetry gap finding.
                    time.sleep(COLLECTOR_DOWN_S)
                    collector.start()
                d["collector_back_s"] = round(
                    wait_until(
                        lambda: (metric(scrape(collector.metrics_url), _ROUNDS) or 0) > 0,
                        120,
                        "the collector's rounds",
                    ),
                    1,
                )
                health.monitor_up(600)
            else:
                stack.prom_down.set()
                prom.stop()
                struck.set()
                prom.start(timeout=120)
                stack.prom_down.clear()
                d["prometheus_back_s"] = round(time.time() - mf.started, 1)
                wait_until(lambda: set(prom.targets_up().values()) == {"up"}, 60, "targets up", 1.0)
                # The samples of the minute before the restart are still there (same TSDB).
                kept = prom.query(
                    'count_over_time(up{job="kafka-replication-monitor"}[60s])', at=mf.started - 1
                )
                d["samples_of_the_minute_before"] = int(float(kept[0]["value"][1])) if kept else 0
            mf.recovered = True
        except Exception as e:
            d["error"] = repr(e)
            self.say(f"   !! monitor fault {name}: {e!r}")
        finally:
            struck.set()
            stack.prom_down.clear()
        mf.ended = time.time()
        mf.recovery_s = round(mf.ended - mf.started, 1)
        time.sleep(4)  # the last health samples and a Prometheus scrape of the healed state
        d.update(health.between(mf.started, mf.ended))
        d.update(health.prom_view(mf.started))
        self.say(f"   {self.record.clock(mf.ended)} {name}: back after {mf.recovery_s}s; {d}")
        return mf

    def long_outage(self) -> None:
        """The job down long enough for monitor_down (scrape_failed, for: 2m) to fire and
        page; then back, and the alert resolves."""
        record, stack, health, plan = self.record, self.stack, self.health, self.plan
        stream, prom, hook = stack.stream, stack.prom, stack.hook
        win = Window("outage", len(record.cycles), time.time())
        record.windows.append(win)
        self.say(f"\n== monitor outage: the Spark job down for {plan.outage_seconds:.0f}s")
        with stack.proc_lock:
            stack.expect_down.add("stream")
            stream.kill()
        o: dict[str, Any] = {"down_s": plan.outage_seconds}

        def firing() -> bool:
            try:
                return any(
                    a["labels"].get("kind") == "monitor_down" and a["state"] == "firing"
                    for a in prom.alerts()
                )
            except Exception:
                return False

        try:
            o["monitor_down_firing_after_s"] = round(
                wait_until(firing, plan.outage_seconds + 120, "monitor_down firing", 1.0), 1
            )
            o["paged_after_s"] = round(
                wait_until(lambda: "monitor_down" in hook.kinds(), 120, "monitor_down paged", 1.0)
                + o["monitor_down_firing_after_s"],
                1,
            )
            rest = plan.outage_seconds - (time.time() - win.start)
            if rest > 0:
                time.sleep(rest)
        except TimeoutError as e:
            o["error"] = str(e)
        with stack.proc_lock:
            stream.start()
            stack.expect_down.discard("stream")
        restarted = time.time()
        try:
            health.monitor_up(900)
            o["monitor_up_after_restart_s"] = round(time.time() - restarted, 1)
            o["monitor_down_resolved_after_restart_s"] = round(
                wait_until(lambda: not firing(), 120, "monitor_down resolved", 1.0)
                + o["monitor_up_after_restart_s"],
                1,
            )
        except TimeoutError as e:
            o["error"] = str(e)
        win.end = time.time()
        o.update(health.prom_view(win.start))
        record.outage = o
        self.say(f"   outage: {o}")
        # A last quiet window: everything healthy again, nothing firing.
        try:
            health.healthy(900)
        except TimeoutError as e:
            o["error"] = str(e)
        q = Window("quiet", len(record.cycles), time.time())
        record.windows.append(q)
        time.sleep(plan.quiet_seconds)
        q.end = time.time()


def kill_mid_batch(stream: StreamProcess) -> dict[str, Any]:
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
