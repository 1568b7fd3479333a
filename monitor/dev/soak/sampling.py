"""What the soak samples all along, each on a thread of its own: the monitor's health
(every 2 s) and RSS (every 10 s), restarting a component that died on its own; and
Prometheus's alerts (every 2 s), any alert firing in a quiet window noted."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from monitor.dev.soak.probes import metric, scrape
from monitor.dev.soak.record import Record
from monitor.dev.soak.rss import group_rss
from monitor.dev.soak.stack import Stack


def sample(record: Record, stack: Stack, stop: threading.Event) -> None:
    """Health every 2 s, RSS every 10 s; restarts a component that died on its own."""
    n = 0
    while not stop.wait(2.0):
        try:
            sample_once(record, stack, n)
        except Exception as e:  # a sampler that dies would blind the soak: go on
            record.say(f"   (sampler: {e!r})")
        n += 1


def sample_once(record: Record, stack: Stack, n: int) -> None:
    """One health sample; every fifth call, one RSS sample too."""
    stream, collector = stack.stream, stack.collector
    now = time.time()
    page = scrape(stream.metrics_url)
    cpage = scrape(collector.metrics_url)
    record.health.append(
        {
            "t": round(now, 1),
            "exporter": page is not None,
            "monitor_up": metric(page, "kafka_replication_monitor_up"),
            "input_lag": metric(page, "kafka_replication_monitor_input_lag_records"),
            "telemetry_age": metric(page, "kafka_replication_monitor_telemetry_age_seconds"),
            "processed": metric(page, "kafka_replication_monitor_events_processed_total"),
            "collector": cpage is not None,
            "rounds": metric(cpage, "kafka_replication_collector_rounds_total"),
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
            if pid is not None and name not in stack.expect_down:
                rss, procs = group_rss(pid)
                if procs:
                    sample[name] = {"pid": pid, "rss_mb": round(rss / 2**20, 1)}
                    sample[name]["procs"] = procs
        record.rss.append(sample)
    with stack.proc_lock:
        for name, proc in (("stream", stream), ("collector", collector)):
            if name not in stack.expect_down and not proc.alive():
                record.unexpected_exits.append({"t": now, "component": name})
                record.say(f"   !! {name} exited on its own: restarting it")
                proc.start()


def watch_alerts(record: Record, stack: Stack, stop: threading.Event) -> None:
    """Every change of Prometheus's alert set into ``record.alert_log``, every alert firing
    in a quiet window into ``record.quiet_alerts``; paused while Prometheus restarts."""
    prom, say = stack.prom, record.say
    last: set[tuple[str, str, str]] = set()
    while not stop.wait(2.0):
        if stack.prom_down.is_set():
            continue
        try:
            alerts = prom.alerts()
        except Exception:
            continue
        now = time.time()
        current = {
            (
                a["labels"].get("kind", a["labels"]["alertname"]),
                a["state"],
                json.dumps(a["labels"], sort_keys=True),
            )
            for a in alerts
        }
        win = record.window_now()
        if win is not None and win.kind == "quiet":
            for name, state, labels in current:
                if state == "firing":
                    record.quiet_alerts.append(
                        {"t": now, "cycle": win.cycle, "alert": name, "labels": labels}
                    )
        if current != last:
            record.alert_log.append(
                {
                    "t": round(now, 1),
                    "window": f"{win.kind}:{win.cycle}" if win else None,
                    "alerts": sorted([n, s] for n, s, _ in current),
                }
            )
            was = {(n, lb) for n, st, lb in last if st == "firing"}
            now_firing = {(n, lb) for n, st, lb in current if st == "firing"}
            for name, _ in sorted(now_firing - was):
                say(f"   {record.clock(now)} alert {name} FIRING")
            for name, _ in sorted(was - now_firing):
                say(f"   {record.clock(now)} alert {name} no longer firing")
        last = current
