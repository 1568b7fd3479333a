"""A soak's run: the stack started, its threads (traffic, alert watcher, sampler) running,
the cycles, the outage, the verdict; everything stopped at the end or on Ctrl-C."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from monitor.dev.demo.monitor_stack import FINDINGS
from monitor.dev.processes.prom import WebhookReceiver, free_port
from monitor.dev.soak.cycles import Cycles, traffic
from monitor.dev.soak.health import Health
from monitor.dev.soak.judge import judge
from monitor.dev.soak.monitor_faults import MonitorFaults
from monitor.dev.soak.plan import MOVE_TOPIC, TOPIC, SoakPlan
from monitor.dev.soak.probes import read_raw
from monitor.dev.soak.record import Record, Window
from monitor.dev.soak.report import print_report
from monitor.dev.soak.sampling import sample, watch_alerts
from monitor.dev.soak.stack import Stack


class Soak:
    def __init__(self, workdir: Path, plan: SoakPlan, out: Callable[[str], None] = print) -> None:
        self.workdir = workdir
        self.plan = plan
        self.say = out
        self.record = Record(out)
        self._stop = threading.Event()

    def run(self) -> int:
        """The whole soak; 0 if the verdict is ``pass``."""
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
            stack = Stack(
                self.workdir,
                base_port=base_port,
                monitor_port=monitor_port,
                exporter_port=exporter_port,
                collector_port=collector_port,
                hook=hook,
                on_finding=self.record.on_finding,
            )
            health = Health(self.record, stack)
            threads: list[threading.Thread] = []
            try:
                self.record.windows.append(Window("setup", -1, time.time()))
                self.say("== setup: lab, monitor cluster, Spark job, collector, Prometheus")
                stack.start()
                threads = [
                    threading.Thread(
                        target=traffic, args=(stack, self._stop, TOPIC, 50), daemon=True
                    ),
                    threading.Thread(
                        target=traffic, args=(stack, self._stop, MOVE_TOPIC, 20), daemon=True
                    ),
                    threading.Thread(
                        target=watch_alerts, args=(self.record, stack, self._stop), daemon=True
                    ),
                    threading.Thread(
                        target=sample, args=(self.record, stack, self._stop), daemon=True
                    ),
                ]
                for t in threads:
                    t.start()
                stack.stream.wait_processing(900)
                health.healthy(600)
                self.record.windows[-1].end = time.time()
                self.say(
                    f"   stack up in {time.time() - self.record.t0:.0f}s; "
                    f"Prometheus {stack.prom.url}"
                )
                faults = MonitorFaults(self.plan, self.record, health)
                Cycles(self.plan, self.record, health, faults).run()
                if self.plan.outage_seconds > 0:
                    faults.long_outage()
                return self._report(stack)
            finally:
                self._stop.set()
                for t in threads:
                    t.join(timeout=20)
                stack.stop(self.say)

    def _report(self, stack: Stack) -> int:
        time.sleep(3)
        raw = read_raw(stack.mon.bootstrap_servers, FINDINGS)
        result = judge(self.record, self.plan, raw, sorted(stack.hook.kinds()))
        path = self.workdir / "soak.json"
        path.write_text(json.dumps(result, indent=1, default=str) + "\n")
        print_report(result, self.say, path)
        return 0 if result["verdict"] == "pass" else 1
