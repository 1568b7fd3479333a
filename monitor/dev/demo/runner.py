"""The demo's run: its stack started in order, the incident played, everything stopped.

The lab (3 brokers) and, beside it, the monitor's one-broker cluster; the collector (in
this process) publishing events there; the Spark job (``monitor stream``, its own process,
optionally on a standalone Spark cluster) with the Prometheus exporter in its driver;
Prometheus with the shipped rules and Alertmanager with the shipped routes, paging a
webhook receiver. Every process it started is stopped at the end or on Ctrl-C.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from monitor.collector import Collector, CollectorConfig
from monitor.dev.demo.incident import TOPIC, Incident, traffic
from monitor.dev.demo.live import LiveView
from monitor.dev.demo.monitor_stack import (
    EVENTS,
    FINDINGS,
    STREAM_ARGS,
    STREAM_ENV,
    create_monitor_topics,
    monitor_cluster,
)
from monitor.dev.demo.summary import Summary
from monitor.dev.demo.verdict import by_acknowledger
from monitor.dev.processes.prom import (
    AlertmanagerProcess,
    PrometheusProcess,
    WebhookReceiver,
    free_port,
)
from monitor.dev.processes.spark import SparkStandalone
from monitor.dev.processes.stream import FindingsReader, StreamProcess


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
        self.view = LiveView(TOPIC, out)
        self._stop = threading.Event()
        self.acks = workdir / "acks.jsonl"
        self.stream: StreamProcess | None = None

    def run(self) -> int:
        from monitor.dev.lab.admin import create_topic, elect_leader
        from monitor.dev.lab.cluster import Lab
        from monitor.dev.lab.config import LabConfig
        from monitor.dev.lab.load import produce, read_ack_log, verify
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
            reader = FindingsReader(mon.bootstrap_servers, FINDINGS, self.view.on_finding)
            reader.findings = self.view.findings
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
                        target=traffic,
                        args=(lab.bootstrap_servers, produce, self.acks, self._stop, self.say),
                        daemon=True,
                    ),
                    threading.Thread(
                        target=self.view.watch_alerts, args=(prom, hook, self._stop), daemon=True
                    ),
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
                Incident(self.view, self.short).play(lab, elect_leader)
                report = verify(lab.bootstrap_servers, TOPIC, self.acks, settle_s=5)
                summary = Summary(self.workdir, self.view, self.stream)
                # What the old leader acknowledged: the acks before it was killed (after
                # the unclean election the new leader acknowledges the same offsets again).
                killed = self.view.fault_times.get("kill", time.monotonic())
                killed_at = time.time() - (time.monotonic() - killed)
                entries = [e for e in read_ack_log(self.acks, TOPIC) if e.partition == 0]
                acked = set(by_acknowledger(entries, killed_at)[0])
                # The lost records the old leader acknowledged; those a new leader did (acks=1,
                # above the HW when leadership moved on again: never committed) apart.
                old, later = by_acknowledger(report.partitions[0].lost_entries, killed_at)
                return summary.report(old, acked, hook, later)
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
