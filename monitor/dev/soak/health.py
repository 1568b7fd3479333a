"""The monitor's health as the soak checks it: waits until nothing is wrong any more, and
what the health samples and Prometheus recorded over a span (a monitor fault, the outage).
"""

from __future__ import annotations

import time
from typing import Any

from monitor.assets.rules import alert_name
from monitor.dev.soak.plan import CAUGHT_UP_AGE_S, HEALTH_ALERTS
from monitor.dev.soak.probes import metric, scrape, wait_until
from monitor.dev.soak.record import Record
from monitor.dev.soak.stack import Stack


class Health:
    def __init__(self, record: Record, stack: Stack) -> None:
        self.record = record
        self.stack = stack
        self.say = record.say

    def settle(self, timeout: float) -> None:
        """Wait until the monitor holds no open condition on the lab."""
        record = self.record
        wait_until(record.calm, timeout, f"open conditions left: {sorted(map(str, record.open))}")

    def healthy(self, timeout: float) -> float:
        """Wait until nothing is wrong any more: no open condition, the monitor up, and no
        alert firing (those of the last fault resolve). Returns the seconds waited."""
        stream, prom = self.stack.stream, self.stack.prom
        started = time.monotonic()
        self.settle(timeout)
        self.monitor_up(max(10.0, timeout - (time.monotonic() - started)))

        def caught_up() -> bool:
            # monitor_up tolerates 2 minutes of telemetry age and a large input lag; a
            # quiet window starts only once the job has read its backlog after a restart.
            page = scrape(stream.metrics_url)
            age = metric(page, "kafka_replication_monitor_telemetry_age_seconds")
            lag = metric(page, "kafka_replication_monitor_input_lag_records")
            return age is not None and age <= CAUGHT_UP_AGE_S and lag is not None and lag >= 0

        wait_until(
            caught_up,
            max(10.0, timeout - (time.monotonic() - started)),
            "the job catching up",
            1.0,
        )
        self.settle(60)  # what the backlog opened and closed
        self.metrics_agree()

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

    def metrics_agree(self, within_s: float = 30.0) -> None:
        """/metrics must drop a condition soon after the findings topic resolved it (the
        next batch): found by the first 30-minute run, where it kept ``hw_lag`` open for 5
        minutes and the alert fired in a quiet window."""
        stream = self.stack.stream

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
            self.record.stale_metrics.append(
                {"at": round(time.time() - self.record.t0, 1), "series": left, "waited_s": within_s}
            )
        else:
            lag = time.monotonic() - started
            if lag > 5:
                self.say(f"   /metrics caught up with the findings {lag:.1f}s after them")

    def monitor_up(self, timeout: float) -> float:
        """Wait until the job's ``kafka_replication_monitor_up`` is 1; the seconds waited."""
        stream = self.stack.stream
        return wait_until(
            lambda: metric(scrape(stream.metrics_url), "kafka_replication_monitor_up") == 1,
            timeout,
            "kafka_replication_monitor_up back to 1",
            1.0,
        )

    def between(self, start: float, end: float) -> dict[str, Any]:
        """What the health samples of ``[start, end]`` (1 s either side) show."""
        rows = [h for h in self.record.health if start - 1 <= h["t"] <= end + 1]
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

    def prom_view(self, start: float) -> dict[str, Any]:
        """What Prometheus recorded since ``start``: min ``up`` per job, the largest input
        lag, and every state the monitor-health alerts were in."""
        prom = self.stack.prom
        span = f"{int(time.time() - start) + 4}s"
        out: dict[str, Any] = {}
        try:
            for job in ("kafka-replication-monitor", "kafka-replication-collector"):
                r = prom.query(f'min_over_time(up{{job="{job}"}}[{span}])')
                out[f"prom_min_up_{job}"] = float(r[0]["value"][1]) if r else None
            r = prom.query(f"max_over_time(kafka_replication_monitor_input_lag_records[{span}])")
            out["prom_max_input_lag"] = float(r[0]["value"][1]) if r else None
            r = prom.query(f"min_over_time(kafka_replication_monitor_up[{span}])")
            out["prom_min_monitor_up"] = float(r[0]["value"][1]) if r else None
            names = "|".join(map(alert_name, HEALTH_ALERTS))
            alerts = prom.query(f'max_over_time(ALERTS{{alertname=~"{names}"}}[{span}])')
            out["health_alerts"] = sorted(
                f"{a['metric']['kind']}{{cause={a['metric'].get('cause', '')}}} "
                f"{a['metric']['alertstate']}"
                for a in alerts
            )
        except Exception as e:
            out["prom_error"] = repr(e)
        return out
