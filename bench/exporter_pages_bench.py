"""How slow are the exporter pages people really run, at a real broker's size?

    python -m bench.exporter_pages_bench [--partitions 2000] [--rounds 12] [--scrapes 5]
        [--styles monitor,strimzi,confluent] [--heap 768m] [--rate 100] [--dir DIR]
        [--collector-from CHECKOUT ...]

One lab of 3 brokers (Kafka from the Maven jars, the JMX exporter agent 1.0.1 in each
broker) holding ``--partitions`` partitions in all at RF 3 -- every broker holds every
partition, so a page carries ``--partitions`` replicas -- under a light produce load
(``--rate`` records/s, acks=1, spread over the partitions). Once per rule set, in the order
given, the brokers are started with it as their agent's rules (``LabConfig.exporter_rules``):

* ``monitor`` -- this project's rules (the lab's own: ``includeObjectNames`` narrowed to the
  MBeans it exports);
* ``strimzi`` / ``confluent`` -- broad rules of our own in each project's style
  (``tests/collector/exporter_rules/``: no ``includeObjectNames``, every MBean walked and
  tried against dozens of generic regexes).

For each it prints

* each broker's page render time, timed at the HTTP client from connect to last byte:
  ``--scrapes`` GETs of each broker alone (one after another), then ``--scrapes`` rounds of
  all brokers at once (as the collector reads them: one thread per broker); median and
  max, and the exporter's own ``jmx_scrape_duration_seconds`` beside them;
* the page: bytes, lines, series, the MBean series among them (neither ``jvm_``,
  ``process_`` nor ``jmx_``), the replicas on it, the profile the collector detects;
* ``monitor collect --check``'s lines for the lab (its exporters' verdicts);
* the real collector (``Collector``; ``CollectorConfig`` at its defaults but the bootstrap
  and ``jmx_urls``; nothing published) running ``--rounds`` rounds at its default interval:
  per round, the share of replicas sampled (the replicas with a log end sample in the
  round's events, over those the metadata lists), by broker, and the errors; the brokers'
  CPU per round.

``--collector-from CHECKOUT`` runs ``--check`` and the rounds once more, on the same lab
and pages, with the collector of another checkout (a child process with that checkout's
``monitor`` first on its path), e.g. the commit before a change of the collector's
deadlines::

    mkdir /tmp/before && git archive COMMIT monitor streaming | tar -x -C /tmp/before
    python -m bench.exporter_pages_bench --collector-from /tmp/before

The end prints the rule sets side by side (one run: their ratio holds on a noisy shared
machine better than their absolute figures), with the machine and its load average at
start and end. The first page after a start is timed apart (a cold JVM).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import monitor
from bench.model_bench import machine
from bench.spark_bench import _cpu_s
from monitor.collector import Collector, CollectorConfig, jmx
from monitor.collector.collector import RoundResult
from monitor.collector.jmx import PROFILES
from monitor.contract.events import PartitionEvent
from monitor.dev.lab.admin import admin_client, create_topic, elect_leader, wait_for_partitions
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.load import produce
from monitor.dev.lab.ports import reserve_base_port

ROOT = Path(__file__).resolve().parents[1]
RULES_DIR = ROOT / "tests" / "collector" / "exporter_rules"
#: Where the collector measured comes from (this checkout, or another on PYTHONPATH).
MONITOR_ROOT = Path(monitor.__file__).resolve().parents[1]
#: The rule sets, by name: None is the project's own (the lab's default).
STYLES: dict[str, Path | None] = {
    "monitor": None,
    "strimzi": RULES_DIR / "strimzi-style.yaml",
    "confluent": RULES_DIR / "confluent-style.yaml",
}
#: The largest topic created (KRaft refuses one CreateTopics batch that is too large).
TOPIC_MAX = 1000
#: Series that are not an MBean's: the agent's JVM and process collectors, its own.
_NOT_MBEAN = ("jvm_", "process_", "jmx_")
_SCRAPE_DURATION = re.compile(r"^jmx_scrape_duration_seconds(?:\{[^}]*\})? (\S+)$", re.M)
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


def exporter_seconds(page: str) -> float | None:
    """The exporter's own time for the MBean walk of this page."""
    m = _SCRAPE_DURATION.search(page)
    return float(m.group(1)) if m else None


@dataclass
class StyleResult:
    style: str
    alone: dict[int, list[float]] = field(default_factory=dict)
    together: dict[int, list[float]] = field(default_factory=dict)
    own: list[float] = field(default_factory=list)  # jmx_scrape_duration_seconds
    first: dict[int, float] = field(default_factory=dict)
    facts: dict[int, PageFacts] = field(default_factory=dict)
    runs: list[CollectorRun] = field(default_factory=list)
    load: tuple[float, float] = (0.0, 0.0)  # 1-min load average at its start and end


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
        if topic in existing:  # the rule set before made them (the lab keeps its data)
            continue
        create_topic(
            lab.bootstrap_servers, topic, partitions=n, replication_factor=3,
            min_insync_replicas=2, timeout_s=900,
        )  # fmt: skip
    say(f"topics {', '.join(topics)}: {sum(topics.values()):,} partitions, RF 3 "
        f"(created or found in {time.perf_counter() - t:.0f} s)")  # fmt: skip


def settle(lab: Lab, topics: dict[str, int]) -> None:
    """Every partition led with a full ISR, leadership back on the preferred replicas
    (a restart leaves it wherever the brokers came up first)."""
    t = time.perf_counter()
    for topic, n in topics.items():
        wait_for_partitions(
            lab.bootstrap_servers, topic,
            lambda ps, n=n: len(ps) == n
            and all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in ps),
            timeout_s=900, what="every partition led with a full ISR",
        )  # fmt: skip
        try:
            elect_leader(lab.bootstrap_servers, topic, None, unclean=False, timeout_s=120)
        except Exception as e:  # ELECTION_NOT_NEEDED and the like: leadership is as it is
            say(f"  preferred election of {topic}: {type(e).__name__}")
    say(f"  full ISRs, preferred leaders ({time.perf_counter() - t:.0f} s)")


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


def scrape_pages(lab: Lab, res: StyleResult, n: int, topics: set[str]) -> None:
    urls = lab.jmx_urls
    for b, url in urls.items():  # the first page of a started JVM, apart
        res.first[b], page = timed_get(url)
    for b, url in urls.items():
        res.alone[b] = []
        for _ in range(n):
            took, page = timed_get(url)
            res.alone[b].append(took)
            if (own := exporter_seconds(page)) is not None:
                res.own.append(own)
        res.facts[b] = PageFacts.of(page, topics)
    for b in urls:
        res.together[b] = []
    with ThreadPoolExecutor(len(urls)) as pool:
        for _ in range(n):
            futures = {b: pool.submit(timed_get, url) for b, url in urls.items()}
            for b, fut in futures.items():
                res.together[b].append(fut.result()[0])
    for b in urls:
        f = res.facts[b]
        say(
            f"  broker {b}: first page {res.first[b]:.2f} s; alone {_fmt(res.alone[b])} s, "
            f"all at once {_fmt(res.together[b])} s (median / max of {n}); "
            f"{f.size / 1e6:.2f} MB, {f.lines:,} lines, {f.series:,} series "
            f"({f.mbean_series:,} of MBeans), {f.replicas:,} replicas of the bench's topics; "
            f"profile {f.profile}{', lacks ' + ', '.join(f.missing) if f.missing else ''}"
        )
    say(f"  the exporter's own jmx_scrape_duration_seconds (alone): {_fmt(res.own)} s")


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


@dataclass
class CollectorRun:
    """``--rounds`` rounds of one collector (a checkout's) on one rule set's pages."""

    source: str
    settings: str = ""
    check_code: int | None = None
    check_lines: list[str] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)  # per round, all brokers
    round_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0  # all the rounds, start to end
    failed_rounds: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # page errors, broker left out
    broker_cpu_per_round: dict[int, float] = field(default_factory=dict)


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


def run_collector(lab: Lab, where: Path, rounds: int) -> CollectorRun:
    """``monitor collect --check`` and ``rounds`` collector rounds from the checkout
    ``where`` (this process's own, or another's in a child process), with the brokers' CPU
    meanwhile."""
    run = CollectorRun(source=str(where))
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
    run.broker_cpu_per_round = {b: (_cpu_s(p) - cpu0[b]) / done for b, p in pids.items()}
    say(
        f"  {len(run.shares)} rounds in {run.wall_s:.0f} s; brokers' CPU per round (rendering "
        "the page, serving the load): "
        + ", ".join(f"{b}: {c:.2f} s" for b, c in run.broker_cpu_per_round.items())
    )
    return run


#: The line a ``--collect-only`` child ends with: its CollectorRun as JSON.
_RESULT = "RESULT "


def one_style(
    lab_dir: Path, port: int, args: argparse.Namespace, style: str, topics: dict[str, int]
) -> StyleResult:
    res = StyleResult(style)
    load0 = os.getloadavg()[0]
    say(f"\n== {style} rules ({STYLES[style] or 'the lab default'}), load average {load0:.1f}")
    cfg = LabConfig(dir=lab_dir, base_port=port, heap=args.heap, exporter_rules=STYLES[style])
    lab = Lab(cfg, progress=lambda m: say(f"  [lab] {m}"))
    lab.up()
    load = None
    try:
        ensure_topics(lab, topics)
        settle(lab, topics)
        load = ProduceLoad(lab, topics, args.rate)
        scrape_pages(lab, res, args.scrapes, set(topics))
        for where in [MONITOR_ROOT, *args.collector_from]:
            res.runs.append(run_collector(lab, where, args.rounds))
    finally:
        if load is not None:
            load.finish()
        lab.down()
    res.load = (load0, os.getloadavg()[0])
    return res


def summary(results: list[StyleResult], partitions: int, rounds: int) -> None:
    say(f"\n== side by side: {partitions:,} partitions, RF 3, 3 brokers (every broker holds "
        f"every partition); seconds are median / max over the brokers' scrapes")  # fmt: skip
    say(
        f"{'rules':10} {'alone s':>13} {'at once s':>13} {'own s':>13} {'first s':>6} "
        f"{'page MB':>7} {'lines':>7} {'MBean series':>12} {'replicas':>8}"
    )
    for r in results:
        alone = [x for v in r.alone.values() for x in v]
        together = [x for v in r.together.values() for x in v]
        facts = list(r.facts.values())
        say(
            f"{r.style:10} {_fmt(alone):>13} {_fmt(together):>13} {_fmt(r.own):>13} "
            f"{max(r.first.values()):6.2f} "
            f"{statistics.median(f.size for f in facts) / 1e6:7.2f} "
            f"{statistics.median(f.lines for f in facts):7,.0f} "
            f"{statistics.median(f.mbean_series for f in facts):12,.0f} "
            f"{min(f.replicas for f in facts):8,}"
        )
    say(
        f"\n{'rules':10} {'collector':28} {'--check pages':>13} {'sampled a round':>20} "
        f"{'failed rounds':>13} {'rounds took':>11} {'broker CPU/round':>16}"
    )
    for r in results:
        for run in r.runs:
            shares = (
                f"{statistics.mean(run.shares):.1%} (min {min(run.shares):.0%})"
                if run.shares
                else "-"
            )
            cpu = statistics.mean(run.broker_cpu_per_round.values() or [0.0])
            pages = [line for line in run.check_lines if line.startswith("exporter of broker")]
            check = f"{sum(': ok' in line for line in pages)}/{len(pages)} ok"
            say(
                f"{r.style:10} {run.source[-28:]:28} {check:>13} {shares:>20} "
                f"{f'{run.failed_rounds}/{len(run.shares)}':>13} {run.wall_s:10.0f}s "
                f"{cpu:15.2f}s"
            )
    for r in results:
        for run in r.runs:
            errors = "; ".join(f"{n}x {m}" for m, n in run.errors.items()) or "none"
            say(f"{r.style} / {run.source}: page errors: {errors}")
        say(f"{r.style}: load average {r.load[0]:.1f} -> {r.load[1]:.1f}")


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=2000, help="in all; each broker holds all")
    ap.add_argument("--rounds", type=int, default=12, help="collector rounds per rule set")
    ap.add_argument("--scrapes", type=int, default=5, help="timed GETs per broker, each way")
    ap.add_argument("--styles", default="monitor,strimzi,confluent")
    ap.add_argument("--heap", default="768m", help="-Xmx of each broker")
    ap.add_argument("--rate", type=float, default=100.0, help="records/s in all (acks=1)")
    ap.add_argument("--dir", type=Path, help="the lab's folder (kept); default: a temporary one")
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
    if unknown or not styles:
        ap.error(f"--styles: unknown {unknown}; known: {', '.join(STYLES)}")
    args.collector_from = [p.resolve() for p in args.collector_from]
    for where in args.collector_from:
        if not (where / "monitor" / "collector" / "collector.py").is_file():
            ap.error(f"--collector-from {where}: no monitor/collector there")
    started = time.monotonic()
    say(f"machine: {machine()}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    topics = topics_for(args.partitions)
    results = []
    with (
        tempfile.TemporaryDirectory(prefix="exporter-pages-") as tmp,
        reserve_base_port(23092) as port,
    ):
        lab_dir = args.dir or Path(tmp) / "lab"
        for style in styles:
            results.append(one_style(lab_dir, port, args, style, topics))
    summary(results, sum(topics.values()), args.rounds)
    say(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"bench wall time {time.monotonic() - started:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
