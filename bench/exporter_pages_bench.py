"""How slow are the exporter pages people really run, at a real broker's size?

    python -m bench.exporter_pages_bench [--partitions 2000] [--rounds 12] [--scrapes 3]
        [--styles shipped,strimzi,confluent] [--blocks 2] [--heap 768m] [--rate 100]
        [--collector-from CHECKOUT ...]

One lab of 3 brokers (Kafka from the Maven jars, the JMX exporter agent 1.0.1 in each
broker) holding ``--partitions`` partitions in all at RF 3 -- every broker holds every
partition, so a page carries ``--partitions`` replicas -- under a light produce load
(``--rate`` records/s, acks=1, spread over the partitions). The brokers' agents read their
rules from one file of the bench's (``LabConfig.exporter_rules``), which holds each rule
set in turn: the agent reloads a changed file at its next scrape, and the bench reads until
every page is of the new rules. The rule sets (``--styles``):

* ``shipped`` -- this project's rules for operators
  (``monitor/assets/jmx-exporter/kafka-replication.yaml``: only the MBeans the collector
  reads); ``lab`` -- the lab's own (every per-partition Kafka MBean, ``includeObjectNames``
  still narrowed to Kafka's domains);
* ``strimzi`` / ``confluent`` -- broad rules of our own in each project's style
  (``tests/collector/exporter_rules/``: no ``includeObjectNames``, every MBean of the JVM
  walked and tried against dozens of generic regexes);
* ``strimzi-narrowed`` / ``confluent-narrowed`` -- the same rules with the shipped rules'
  ``includeObjectNames`` (the MBeans the collector reads): what narrowing alone buys.

The rule sets take turns, so that each sees the same machine. ``--scrapes`` times, each in
turn: one untimed read of all pages (the reload), then its pages timed at the HTTP client
from connect to last byte -- each broker alone, one after another, with the CPU the
broker's exporter threads spent on it (the render's cost, which the machine's load does not
inflate), then all brokers at once, as the collector reads them (one thread per broker).
Then ``--blocks`` times, each in turn: the real collector (``Collector``;
``CollectorConfig`` at its defaults but the bootstrap and ``jmx_urls``; nothing published)
runs ``--rounds``/``--blocks`` rounds at its default interval -- per round, the share of
replicas sampled (those with a log end sample in the round's events, over those the
metadata lists), by broker, and the page errors; the brokers' CPU per round; how long their
exporters go on rendering the pages the collector gave up on. ``monitor collect --check``
runs once per rule set.

``--collector-from CHECKOUT`` runs ``--check`` and the rounds once more, on the same lab
and pages, with the collector of another checkout (a child process with that checkout's
``monitor`` first on its path), e.g. the commit before a change of the collector's
deadlines::

    mkdir /tmp/before && git archive COMMIT monitor streaming | tar -x -C /tmp/before
    python -m bench.exporter_pages_bench --collector-from /tmp/before

The end prints the rule sets side by side: render time and CPU (median / max over every
broker's scrapes), page size, lines and series (the MBean series: neither ``jvm_``, ``process_``
nor ``jmx_``), replicas on a page, ``--check``'s verdict on the pages, the share sampled a
round, the rounds with a failed page and why -- and the machine with its load average at
start and end.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import http.client
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import yaml  # type: ignore[import-untyped]

import monitor
from bench.model_bench import machine
from bench.spark_bench import _cpu_s
from monitor import assets
from monitor.collector import Collector, CollectorConfig, jmx
from monitor.collector.collector import RoundResult
from monitor.collector.jmx import PROFILES
from monitor.contract.events import PartitionEvent
from monitor.dev.lab.admin import admin_client, create_topic, elect_leader, wait_for_partitions
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.config import LabConfig, exporter_yaml
from monitor.dev.lab.load import produce
from monitor.dev.lab.ports import reserve_base_port

ROOT = Path(__file__).resolve().parents[1]
RULES_DIR = ROOT / "tests" / "collector" / "exporter_rules"
#: Where the collector measured comes from (this checkout, or another on PYTHONPATH).
MONITOR_ROOT = Path(monitor.__file__).resolve().parents[1]


def _shipped() -> str:
    return assets.read_text("jmx-exporter/kafka-replication.yaml")


def _broad(style: str) -> str:
    return (RULES_DIR / f"{style}-style.yaml").read_text()


def _narrowed(style: str) -> str:
    """``style``'s broad rules, the MBeans walked narrowed to the shipped rules' list (the
    ones the collector reads): what ``includeObjectNames`` alone buys."""
    include = yaml.safe_load(_shipped())["includeObjectNames"]
    return "includeObjectNames:\n" + "".join(f'  - "{n}"\n' for n in include) + _broad(style)


#: Each rule set's text, by name.
STYLES: dict[str, Callable[[], str]] = {
    "shipped": _shipped,
    "lab": exporter_yaml,
    "strimzi": lambda: _broad("strimzi"),
    "confluent": lambda: _broad("confluent"),
    "strimzi-narrowed": lambda: _narrowed("strimzi"),
    "confluent-narrowed": lambda: _narrowed("confluent"),
}
#: The largest topic created (KRaft refuses one CreateTopics batch that is too large).
TOPIC_MAX = 1000
#: Series that are not an MBean's: the agent's JVM and process collectors, its own.
_NOT_MBEAN = ("jvm_", "process_", "jmx_")
_BROKER_PREFIX = re.compile(r"^broker \d+: ")


def say(message: str) -> None:
    print(message, flush=True)


def timed_get(url: str) -> tuple[float, str]:
    """GET ``url``: the seconds from before connecting to the last byte, and the page."""
    parts = urllib.parse.urlsplit(url)
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=600)
    try:
        conn.request("GET", parts.path or "/")
        resp = conn.getresponse()
        body = resp.read()
        took = time.perf_counter() - t0
        if resp.status != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status} {resp.reason}")
    finally:
        conn.close()
    return took, body.decode("utf-8", errors="replace")


#: What the agent's HTTP server does with a request while all its threads render pages
#: (abandoned ones go on rendering): it closes the connection.
REFUSED = (ConnectionResetError, http.client.RemoteDisconnected, BrokenPipeError)


_T = TypeVar("_T")


def _retried(read: Callable[[], _T]) -> _T:
    """``read()``, again 10 s after a refused page (five times at most)."""
    for _ in range(5):
        try:
            return read()
        except REFUSED as e:
            say(f"  a page refused: {e!r}; again in 10 s")
            time.sleep(10)
    return read()


def at_once(urls: dict[int, str]) -> dict[int, tuple[float, str]]:
    """Every page read at the same time, one thread per broker (as the collector does)."""
    with ThreadPoolExecutor(len(urls)) as pool:
        futures = {b: pool.submit(timed_get, url) for b, url in urls.items()}
        return {b: fut.result() for b, fut in futures.items()}


def style_of(page: str) -> str | None:
    """Which rule set made ``page`` (the two of this project's told apart by the lab's
    per-partition families)."""
    profile = jmx.detect(page)
    if profile == "monitor":
        return "lab" if "kafka_log_size_bytes{" in page else "shipped"
    if profile is not None and "kafka_network_requestmetrics" not in page:
        return f"{profile}-narrowed"
    return profile


@dataclass
class PageFacts:
    size: int
    lines: int
    series: int
    mbean_series: int
    replicas: int  # of the bench's topics, as the collector reads them
    profile: str | None
    missing: list[str]

    @classmethod
    def of(cls, page: str, topics: set[str]) -> PageFacts:
        series = [line for line in page.splitlines() if line and line[0] != "#"]
        profile = jmx.detect(page)
        names = PROFILES[profile or "monitor"]
        scrape = jmx.parse(page, names)
        return cls(
            size=len(page.encode()),
            lines=page.count("\n"),
            series=len(series),
            mbean_series=sum(not line.startswith(_NOT_MBEAN) for line in series),
            replicas=sum(topic in topics for topic, _ in scrape.keys),
            profile=profile,
            missing=jmx.missing(page, names),
        )


class RulesFile:
    """The one rules file every broker's agent reads (``LabConfig.exporter_rules``)."""

    def __init__(self, path: Path, style: str) -> None:
        self.path = path
        self.style = ""
        self._write(style)

    def _write(self, style: str) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(STYLES[style]())
        os.replace(tmp, self.path)  # whole: an agent never reads half a file
        self.style = style

    def use(self, lab: Lab, style: str) -> None:
        """Serve ``style``'s rules: written, then every page read (untimed) until each is
        of those rules -- the agent reloads a changed file at its next scrape."""
        if style != self.style:
            self._write(style)
        made: dict[int, str | None] = {}
        for _ in range(10):
            try:
                pages = at_once(lab.jmx_urls)
            except REFUSED as e:  # the agent's threads all busy: see drain()
                say(f"  a page refused while the rules change: {e!r}; again in 10 s")
                time.sleep(10)
                continue
            made = {b: style_of(page) for b, (_, page) in pages.items()}
            if set(made.values()) == {style}:
                return
            os.utime(self.path)  # a reload that failed is not tried again by itself
        raise RuntimeError(f"the exporters did not take the {style} rules: {made}")


@dataclass
class CollectorRun:
    """Rounds of one collector (a checkout's) on one rule set's pages."""

    source: str
    settings: str = ""
    check_code: int | None = None
    check_lines: list[str] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)  # per round, all brokers
    round_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0  # all the rounds, start to end
    failed_rounds: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # page errors, broker left out
    broker_cpu: list[float] = field(default_factory=list)  # per round, the brokers' mean
    drain_s: float = 0.0  # the brokers busy with abandoned pages after the rounds

    def merge(self, other: CollectorRun) -> None:
        self.settings = other.settings
        if other.check_lines:
            self.check_code, self.check_lines = other.check_code, other.check_lines
        self.shares += other.shares
        self.round_s += other.round_s
        self.wall_s += other.wall_s
        self.failed_rounds += other.failed_rounds
        self.errors = dict(collections.Counter(self.errors) + collections.Counter(other.errors))
        self.broker_cpu += other.broker_cpu
        self.drain_s = max(self.drain_s, other.drain_s)


@dataclass
class StyleResult:
    style: str
    alone: dict[int, list[float]] = field(default_factory=dict)
    together: dict[int, list[float]] = field(default_factory=dict)
    cpu: dict[int, list[float]] = field(default_factory=dict)  # the broker's, alone
    facts: dict[int, PageFacts] = field(default_factory=dict)
    runs: dict[str, CollectorRun] = field(default_factory=dict)  # by checkout


def _fmt(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} / {max(values):.2f}"


def topics_for(partitions: int) -> dict[str, int]:
    count = math.ceil(partitions / TOPIC_MAX)
    per = math.ceil(partitions / count)
    return {f"pages-{partitions}-{i}": per for i in range(count)}


def ensure_topics(lab: Lab, topics: dict[str, int]) -> None:
    t = time.perf_counter()
    with admin_client(lab.bootstrap_servers) as admin:
        existing = set(admin.list_topics())
    for topic, n in topics.items():
        if topic in existing:  # a --dir lab of an earlier run
            continue
        create_topic(
            lab.bootstrap_servers, topic, partitions=n, replication_factor=3,
            min_insync_replicas=2, timeout_s=900,
        )  # fmt: skip
    for topic, n in topics.items():
        wait_for_partitions(
            lab.bootstrap_servers, topic,
            lambda ps, n=n: len(ps) == n
            and all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in ps),
            timeout_s=900, what="every partition led with a full ISR",
        )  # fmt: skip
        try:  # leadership on the preferred replicas (a restarted lab's is anywhere)
            elect_leader(lab.bootstrap_servers, topic, None, unclean=False, timeout_s=120)
        except Exception as e:  # ELECTION_NOT_NEEDED and the like: as it is
            say(f"  preferred election of {topic}: {type(e).__name__}")
    say(f"topics {', '.join(topics)}: {sum(topics.values()):,} partitions, RF 3, full ISRs "
        f"({time.perf_counter() - t:.0f} s)")  # fmt: skip


class ProduceLoad:
    """acks=1 records at ``rate``/s in all over ``topics``, one producer thread a topic."""

    def __init__(self, lab: Lab, topics: dict[str, int], rate: float) -> None:
        self.stop = threading.Event()
        per_topic = {"rate": rate / len(topics), "acks": "1", "stop": self.stop}
        self.threads = [
            threading.Thread(
                target=produce,
                args=(lab.bootstrap_servers, topic),
                kwargs={**per_topic, "delivery_timeout_s": 60},
                daemon=True,
            )
            for topic in topics
        ]
        for th in self.threads:
            th.start()

    def finish(self) -> None:
        self.stop.set()
        for th in self.threads:
            th.join(timeout=90)


#: The agent's HTTP server threads (``prometheus-http-<pool>-<n>``, as the kernel keeps a
#: thread's name: 15 characters): a page is rendered in the one serving its request.
_EXPORTER_THREADS = "prometheus-http"


def exporter_threads(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each of the exporter agent's HTTP threads in the JVM
    ``pid``, by thread id: rendering its pages is all they do (the JMX walk and the rules'
    matching run there; the JVM's garbage collector, a thread of its own, is not counted)."""
    threads = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            if (task / "comm").read_text().startswith(_EXPORTER_THREADS):
                f = (task / "stat").read_text().rsplit(")", 1)[1].split()
                threads[int(task.name)] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:  # a thread that just ended
            continue
    return threads


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """The exporter CPU between two readings of :func:`exporter_threads` (a thread the pool
    let go meanwhile takes its last moments with it; a new one counts from 0)."""
    return sum(cpu - before.get(tid, 0.0) for tid, cpu in after.items())


def rendering(lab: Lab, seconds: float = 5.0) -> dict[int, float]:
    """Each broker's exporter CPU per second over ``seconds``: above 0, it renders a page."""
    pids = {b: p for b in lab.node_ids if (p := lab.pid(b)) is not None}
    c0, t0 = {b: exporter_threads(p) for b, p in pids.items()}, time.monotonic()
    time.sleep(seconds)
    dt = time.monotonic() - t0
    return {b: spent(c0[b], exporter_threads(p)) / dt for b, p in pids.items()}


def scrape_turn(lab: Lab, res: StyleResult, topics: set[str], turn: int) -> None:
    """One turn of ``res.style``'s pages (its rules served): each broker alone -- with the
    CPU its exporter spent on it -- then all at once."""
    urls = lab.jmx_urls
    for b, url in urls.items():
        pid = lab.pid(b)
        c0 = exporter_threads(pid) if pid else {}
        took, page = _retried(functools.partial(timed_get, url))
        if pid:
            res.cpu.setdefault(b, []).append(spent(c0, exporter_threads(pid)))
        res.alone.setdefault(b, []).append(took)
        res.facts[b] = PageFacts.of(page, topics)
    for b, (took, _) in _retried(lambda: at_once(urls)).items():
        res.together.setdefault(b, []).append(took)
    say(
        f"  turn {turn} {res.style:9}: alone "
        + ", ".join(f"{b}: {res.alone[b][-1]:.2f}" for b in urls)
        + " s; at once "
        + ", ".join(f"{b}: {res.together[b][-1]:.2f}" for b in urls)
        + " s; CPU "
        + ", ".join(f"{b}: {res.cpu[b][-1]:.2f}" for b in urls if b in res.cpu)
        + f" s; load {os.getloadavg()[0]:.1f}"
    )


def run_check(bootstrap: str, urls: dict[int, str], where: Path) -> tuple[int, list[str]]:
    """``monitor collect --check`` for the lab as an operator runs it, from the checkout
    ``where`` (its exit code and lines)."""
    cmd = [sys.executable, "-m", "monitor", "collect", "--check", "--bootstrap", bootstrap]
    for b, url in urls.items():
        cmd += ["--jmx", f"{b}={url}"]
    t = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, cwd=where, env=_env_for(where)
    )
    say(f"  monitor collect --check: exit {proc.returncode} ({time.perf_counter() - t:.1f} s)")
    for line in proc.stdout.splitlines():
        say(f"    {line}")
    if proc.returncode not in (0, 2):
        say(f"    stderr: {proc.stderr.strip()[-2000:]}")
    return proc.returncode, proc.stdout.splitlines()


def _env_for(where: Path) -> dict[str, str]:
    """The environment that runs the monitor of the checkout ``where`` with this bench (and
    this checkout's jar cache)."""
    env = dict(os.environ)
    if where != MONITOR_ROOT:
        env["PYTHONPATH"] = os.pathsep.join([str(where), str(ROOT)])
        env.setdefault("MONITOR_CACHE", str(ROOT / ".cache"))
    return env


def collect_rounds(bootstrap: str, urls: dict[int, str], rounds: int, run: CollectorRun) -> None:
    """The collector at its defaults (but where the cluster is), ``rounds`` rounds at its
    own interval; what each round sampled, into ``run``."""
    config = CollectorConfig(kafka={"bootstrap_servers": bootstrap}, jmx_urls=urls)
    run.settings = ", ".join(
        f"{name} {getattr(config, name)}"
        for name in ("interval_s", "jmx_timeout_s", "jmx_timeout_max_s", "round_timeout_s")
        if hasattr(config, name)
    )
    say(f"  collector from {MONITOR_ROOT} (its defaults: {run.settings})")
    collector = Collector(config)
    errors: collections.Counter[str] = collections.Counter()

    def on_round(r: RoundResult) -> None:
        listed: collections.Counter[int] = collections.Counter()
        sampled: collections.Counter[int] = collections.Counter()
        for e in r.events:
            if isinstance(e, PartitionEvent):
                listed.update(e.replicas)
                for s in e.replica_samples or ():
                    if s.broker in e.replicas:
                        sampled[s.broker] += 1
        total = sum(listed.values())
        share = sum(sampled.values()) / total if total else 0.0
        run.shares.append(share)
        run.round_s.append(r.duration_s)
        jmx_errors = [m for source, m in r.errors if source == "jmx"]
        if jmx_errors:
            run.failed_rounds += 1
        errors.update(_BROKER_PREFIX.sub("", m) for m in jmx_errors)
        by_broker = ", ".join(f"{b}: {sampled[b]:,}/{listed[b]:,}" for b in sorted(listed))
        others = collections.Counter(source for source, _ in r.errors if source != "jmx")
        say(
            f"  round {len(run.shares) - 1}: {r.duration_s:.2f} s, sampled {share:.1%} of "
            f"{total:,} replicas ({by_broker}); page errors {len(jmx_errors)}"
            + (f": {'; '.join(sorted(set(jmx_errors)))}" if jmx_errors else "")
            + (f"; other errors {dict(others)}" if others else "")
        )

    collector.start(produce=False)
    t = time.monotonic()
    try:
        collector.run(rounds=rounds, on_round=on_round)
    finally:
        run.wall_s = time.monotonic() - t
        collector.stop()
    run.errors = dict(errors.most_common())


def run_collector(lab: Lab, where: Path, rounds: int, check: bool) -> CollectorRun:
    """``rounds`` collector rounds from the checkout ``where`` (this process's own, or
    another's in a child process), with the brokers' CPU meanwhile; ``monitor collect
    --check`` first if ``check``."""
    run = CollectorRun(source=str(where))
    if check:
        run.check_code, run.check_lines = run_check(lab.bootstrap_servers, lab.jmx_urls, where)
    pids = {b: p for b in lab.node_ids if (p := lab.pid(b)) is not None}
    cpu0 = {b: _cpu_s(p) for b, p in pids.items()}
    if where == MONITOR_ROOT:
        collect_rounds(lab.bootstrap_servers, lab.jmx_urls, rounds, run)
    else:
        cmd = [sys.executable, "-m", "bench.exporter_pages_bench", "--collect-only",
               "--bootstrap", lab.bootstrap_servers, "--rounds", str(rounds)]  # fmt: skip
        for b, url in lab.jmx_urls.items():
            cmd += ["--jmx", f"{b}={url}"]
        proc = subprocess.Popen(
            cmd, cwd=where, env=_env_for(where), stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        result = ""
        for line in proc.stdout:
            if line.startswith(_RESULT):
                result = line[len(_RESULT) :]
            else:
                say(line.rstrip("\n"))
        if proc.wait() != 0 or not result:
            raise RuntimeError(f"the collector from {where} failed (exit {proc.returncode})")
        child = json.loads(result)
        child.update(source=str(where), check_code=run.check_code, check_lines=run.check_lines)
        run = CollectorRun(**child)
    done = max(1, len(run.shares))
    cpu = [(_cpu_s(p) - cpu0[b]) / done for b, p in pids.items()]
    run.broker_cpu = [statistics.mean(cpu)] * len(run.shares)
    say(
        f"  {len(run.shares)} rounds in {run.wall_s:.0f} s; brokers' CPU per round "
        f"(rendering the page, serving the load): {', '.join(f'{c:.2f}' for c in cpu)} s"
    )
    run.drain_s = drain(lab)
    return run


def drain(lab: Lab, limit_s: float = 240.0) -> float:
    """Wait until no broker renders a page any more: a page the collector gave up on goes
    on rendering in the broker (the agent does not notice the client left), so after
    rounds of cut pages the brokers are busy for a while -- how long, returned and said."""
    t = time.monotonic()
    busy: dict[int, float] = {}
    while time.monotonic() - t < limit_s:
        busy = rendering(lab, 2.0)
        if max(busy.values(), default=0.0) < DRAINED_CPU:
            break
    took = time.monotonic() - t
    cpu = ", ".join(f"{c:.2f}" for c in busy.values())
    say(f"  the brokers' exporters busy with pages left behind for {took:.0f} s after the "
        f"rounds (their CPU a second then: {cpu})")  # fmt: skip
    return took


#: An exporter rendering no page uses less than this CPU a second.
DRAINED_CPU = 0.02


#: The line a ``--collect-only`` child ends with: its CollectorRun as JSON.
_RESULT = "RESULT "


def summary(results: dict[str, StyleResult], partitions: int) -> None:
    say(f"\n== side by side: {partitions:,} partitions, RF 3, 3 brokers (every broker holds "
        f"every partition); seconds are median / max over the brokers' scrapes")  # fmt: skip
    say(
        f"{'rules':18} {'alone s':>13} {'at once s':>13} {'CPU s':>13} "
        f"{'page MB':>7} {'lines':>7} {'MBean series':>12} {'replicas':>8}"
    )
    for r in results.values():
        alone = [x for v in r.alone.values() for x in v]
        together = [x for v in r.together.values() for x in v]
        facts = list(r.facts.values())
        say(
            f"{r.style:18} {_fmt(alone):>13} {_fmt(together):>13} "
            f"{_fmt([x for v in r.cpu.values() for x in v]):>13} "
            f"{statistics.median(f.size for f in facts) / 1e6:7.2f} "
            f"{statistics.median(f.lines for f in facts):7,.0f} "
            f"{statistics.median(f.mbean_series for f in facts):12,.0f} "
            f"{min(f.replicas for f in facts):8,}"
        )
    say(
        f"\n{'rules':18} {'collector':28} {'--check pages':>13} {'sampled a round':>20} "
        f"{'failed rounds':>13} {'s a round':>9} {'broker CPU/round':>16} {'busy after':>10}"
    )
    for r in results.values():
        for run in r.runs.values():
            shares = (
                f"{statistics.mean(run.shares):.1%} (min {min(run.shares):.0%})"
                if run.shares
                else "-"
            )
            pages = [line for line in run.check_lines if line.startswith("exporter of broker")]
            check = f"{sum(': ok' in line for line in pages)}/{len(pages)} ok"
            cpu = statistics.mean(run.broker_cpu or [0.0])
            pace = run.wall_s / max(1, len(run.shares))
            say(
                f"{r.style:18} {run.source[-28:]:28} {check:>13} {shares:>20} "
                f"{f'{run.failed_rounds}/{len(run.shares)}':>13} {pace:9.1f} {cpu:15.2f}s "
                f"{run.drain_s:9.0f}s"
            )
    for r in results.values():
        for run in r.runs.values():
            errors = "; ".join(f"{n}x {m}" for m, n in run.errors.items()) or "none"
            say(f"{r.style} / {run.source}: page errors: {errors}")


def collect_only(args: argparse.Namespace) -> int:
    """A child's part (``--collector-from``): the rounds, then their result as one line."""
    urls = {}
    for item in args.jmx:
        broker, _, url = item.partition("=")
        urls[int(broker)] = url
    run = CollectorRun(source=str(MONITOR_ROOT))
    collect_rounds(args.bootstrap, urls, args.rounds, run)
    say(_RESULT + json.dumps(dataclasses.asdict(run)))
    return 0


def bench(args: argparse.Namespace, styles: list[str], work: Path, port: int) -> None:
    topics = topics_for(args.partitions)
    rules = RulesFile(work / "rules.yaml", styles[0])
    cfg = LabConfig(dir=work / "lab", base_port=port, heap=args.heap, exporter_rules=rules.path)
    lab = Lab(cfg, progress=lambda m: say(f"  [lab] {m}"))
    results = {s: StyleResult(s) for s in styles}
    sources = [MONITOR_ROOT, *args.collector_from]
    lab.up()
    load = None
    try:
        ensure_topics(lab, topics)
        load = ProduceLoad(lab, topics, args.rate)
        first = {b: took for b, (took, _) in at_once(lab.jmx_urls).items()}
        say(f"the first pages after the start ({styles[0]}): "
            + ", ".join(f"{b}: {t:.2f} s" for b, t in first.items()))  # fmt: skip
        say(f"\n== pages, {args.scrapes} turns of each rule set")
        for turn in range(args.scrapes):
            for style in styles:
                rules.use(lab, style)
                scrape_turn(lab, results[style], set(topics), turn)
        for r in results.values():
            for b, f in r.facts.items():
                say(
                    f"  {r.style:9} broker {b}: {f.size / 1e6:.2f} MB, {f.lines:,} lines, "
                    f"{f.series:,} series ({f.mbean_series:,} of MBeans), {f.replicas:,} "
                    f"replicas of the bench's topics; profile {f.profile}"
                    + (f", lacks {', '.join(f.missing)}" if f.missing else "")
                )
        per_block = math.ceil(args.rounds / args.blocks)
        if per_block:
            say(f"\n== the collector, {args.blocks} blocks of {per_block} rounds each rule set")
        for block in range(args.blocks if per_block else 0):
            for style in styles:
                rules.use(lab, style)
                order = sources if block % 2 == 0 else sources[::-1]
                for where in order:
                    say(f"block {block}, {style} rules, the collector from {where}:")
                    run = run_collector(lab, where, per_block, check=block == 0)
                    runs = results[style].runs
                    runs.setdefault(str(where), CollectorRun(source=str(where))).merge(run)
    finally:
        if load is not None:
            load.finish()
        lab.down()
    summary(results, sum(topics.values()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=2000, help="in all; each broker holds all")
    ap.add_argument("--rounds", type=int, default=12, help="collector rounds per rule set")
    ap.add_argument("--blocks", type=int, default=2, help="turns the rounds are taken in")
    ap.add_argument("--scrapes", type=int, default=3, help="turns of timed GETs per rule set")
    ap.add_argument("--styles", default="shipped,strimzi,confluent", help=f"of {list(STYLES)}")
    ap.add_argument("--heap", default="768m", help="-Xmx of each broker")
    ap.add_argument("--rate", type=float, default=100.0, help="records/s in all (acks=1)")
    ap.add_argument(
        "--collector-from",
        type=Path,
        action="append",
        default=[],
        metavar="CHECKOUT",
        help="also run --check and the rounds with the collector of this checkout (e.g. "
        "`git archive COMMIT monitor streaming` unpacked), on the same pages",
    )
    ap.add_argument("--collect-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--jmx", action="append", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.collect_only:
        return collect_only(args)
    styles = [s.strip() for s in args.styles.split(",") if s.strip()]
    unknown = [s for s in styles if s not in STYLES]
    if unknown or not styles or len(set(styles)) < len(styles):
        ap.error(f"--styles: unknown or repeated {unknown or styles}; known: {', '.join(STYLES)}")
    if args.blocks < 1 or args.scrapes < 1 or args.rounds < 0:
        ap.error("--blocks and --scrapes are at least 1, --rounds at least 0 (no collector)")
    args.collector_from = [p.resolve() for p in args.collector_from]
    for where in args.collector_from:
        if not (where / "monitor" / "collector" / "collector.py").is_file():
            ap.error(f"--collector-from {where}: no monitor/collector there")
    started = time.monotonic()
    say(f"machine: {machine()}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with (
        tempfile.TemporaryDirectory(prefix="exporter-pages-") as tmp,
        reserve_base_port(23092) as port,
    ):
        bench(args, styles, Path(tmp), port)
    say(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"bench wall time {time.monotonic() - started:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
