"""Reading one broker's exporter page: ``jmx.parse`` per profile and ``jmx.detect``.

    python -m bench.jmx_parse_bench [--replicas 10000] [--runs 15]
    python -m bench.jmx_parse_bench --page FILE [--runs 15]

A page of ``--replicas`` replicas in each profile's names, as the Prometheus JMX exporter
(1.x: the Prometheus Java client 1.x) prints it: one block per metric family, families
sorted by name, each after its ``# HELP`` and ``# TYPE`` lines, labels sorted, values as
Java's ``Double.toString`` writes them (``226.0``, ``1.2345678E7``); LEO and log start of
every replica, the fetcher's lag of the two in three it follows, the broker's counters and
a few JVM series. Prints the CPU time (best of ``--runs``, the cyclic garbage collector
paused as in a round) of :func:`jmx.parse` (every round, every broker) per replica, of the
line-by-line reading it falls back to (:func:`jmx.parse_lines`: the parser before), and of
:func:`jmx.detect` (once per broker).

``--page FILE``: the same figures on a page saved from a real exporter (``curl
http://127.0.0.1:PORT/metrics > FILE`` on a lab broker), in the profile :func:`jmx.detect`
finds, per replica whose log end is on it.

``--adversarial``: pages a misbehaving exporter could serve (issue 50) -- an unclosed label
of 5 to 80 kB, every series of the page twice, and pages of 5 to 50 MB of lines in another
shape (read line by line): per page, the µs per line of :func:`jmx.parse` (flat across
sizes: linear), and the longest the collector's round loop stalls while a page reader
thread parses it (the main thread asks for the interpreter every millisecond).
"""

from __future__ import annotations

import argparse
import gc
import threading
import time
from collections.abc import Callable, Iterable

from monitor.collector.jmx import PROFILES, JmxNames, detect, parse, parse_lines

#: The fetcher's client id label, as each profile's rules name it.
CLIENT = {"monitor": "client_id", "strimzi": "clientId", "confluent": "clientid"}


def java_double(value: int) -> str:
    """An integral value as Java's ``Double.toString`` prints it (what the exporter writes).

    >>> java_double(226), java_double(12_345_678), java_double(10_000_000)
    ('226.0', '1.2345678E7', '1.0E7')
    """
    if value < 10_000_000:
        return f"{value}.0"
    digits = str(value)
    return f"{digits[0]}.{digits[1:].rstrip('0') or '0'}E{len(digits) - 1}"


def page(
    names: JmxNames,
    client: str,
    replicas: Iterable[tuple[str, int, int | None]],
    counters: dict[str, int] | None = None,
) -> str:
    """An exporter page of one broker holding ``replicas``: (topic, partition, the broker it
    follows or None where it leads). The offsets are made up from the partition (a log end
    in the millions for two in three partitions); a follower's lag is 0 but for one in ten."""
    leo, start, following = [], [], []
    # Each family's series sorted by their labels' values, as the Java client sorts them.
    for topic, partition, leader in sorted(replicas, key=lambda r: (str(r[1]), r[0])):
        labels = f'partition="{partition}",topic="{topic}"'
        end = 1_000 + partition * 7 if partition % 3 == 0 else 12_000_000 + partition * 131
        leo.append(f"{names.log_end_offset}{{{labels}}} {java_double(end)}")
        start.append(f"{names.log_start_offset}{{{labels}}} {java_double(end // 10)}")
        if leader is not None:
            behind = 17 if partition % 10 == 0 else 0
            thread = f"ReplicaFetcherThread-0-{leader}"
            following.append((thread, str(partition), topic, f"{labels}}} {float(behind)}"))
    lag = [f'{names.fetcher_lag}{{{client}="{c}",{rest}' for c, _, _, rest in sorted(following)]
    c = counters or {}
    families: dict[str, tuple[str, list[str]]] = {
        names.log_end_offset: ("gauge", leo),
        names.log_start_offset: ("gauge", start),
        names.fetcher_lag: ("gauge", lag),
        names.isr_shrinks: ("counter", [f"{names.isr_shrinks} {float(c.get('shrinks', 4))}"]),
        names.isr_expands: ("counter", [f"{names.isr_expands} {float(c.get('expands', 5))}"]),
        names.under_replicated: ("gauge", [f"{names.under_replicated} 0.0"]),
        names.active_controller: ("gauge", [f"{names.active_controller} 0.0"]),
        names.unclean_elections: ("counter", [f"{names.unclean_elections} 0.0"]),
        names.process_start: ("gauge", [f"{names.process_start} 1.693829439767E9"]),
        "jvm_threads_current": ("gauge", ["jvm_threads_current 93.0"]),
        "jvm_memory_bytes_used": (
            "gauge",
            [f'jvm_memory_bytes_used{{area="{a}"}} 1.2345678E8' for a in ("heap", "nonheap")],
        ),
        "jmx_scrape_duration_seconds": ("gauge", ["jmx_scrape_duration_seconds 1.942"]),
    }
    lines = []
    # Families sorted by name; a counter's name without its "_total" in HELP and TYPE.
    for name in sorted(families, key=lambda n: n.removesuffix("_total")):
        kind, samples = families[name]
        meta = name.removesuffix("_total") if kind == "counter" else name
        if samples:
            lines += [f"# HELP {meta} {meta} (synthetic)", f"# TYPE {meta} {kind}", *samples]
    return "\n".join(lines) + "\n"


def broker_page(names: JmxNames, client: str, replicas: int, broker: int = 1) -> str:
    """A page of ``replicas`` replicas of 100-partition topics, ``broker`` leading one in
    three (the others led by brokers 2 and 3 in turn)."""
    held = []
    for p in range(replicas):
        leader = broker + p % 3 if p % 3 else None
        held.append((f"topic-{p // 100:05d}", p % 100, leader))
    return page(names, client, held)


def cpu_best(f: Callable[[], object], runs: int) -> float:
    """The least CPU time (seconds) of ``runs`` calls, each after a full collection, the
    cyclic collector paused as during a collector's round (``Collector.round``)."""
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            f()
            best = min(best, time.process_time() - t0)
        finally:
            gc.enable()
    return best


def longest_stall(f: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds of ``f`` in a thread, the longest the main thread waited meanwhile to
    run again after a 1 ms sleep): a page reader's parse against the round loop."""
    done = threading.Event()
    took: list[float] = []

    def reader() -> None:
        t0 = time.perf_counter()
        f()
        took.append(time.perf_counter() - t0)
        done.set()

    thread = threading.Thread(target=reader)
    worst, thread_started = 0.0, False
    while not done.is_set():
        t0 = time.perf_counter()
        if not thread_started:
            thread.start()
            thread_started = True
        time.sleep(0.001)
        worst = max(worst, time.perf_counter() - t0 - 0.001)
    thread.join()
    return took[0], worst


def adversarial_pages(replicas: int) -> list[tuple[str, str]]:
    """(what, page) of the pages ``--adversarial`` reads."""
    names = PROFILES["monitor"]
    base = broker_page(names, CLIENT["monitor"], replicas)
    out = []
    for kb in (5, 20, 40, 80):
        line = f'{names.log_end_offset}{{partition="5",topic="' + "a" * (kb * 1000) + "\n"
        out.append((f"unclosed label {kb} kB", base + line))
    doubled = "".join(line + "\n" + line + "\n" for line in base.splitlines())
    out.append(("every series twice", doubled))
    # Another shape: labels in the other order -- read line by line, as any odd page is.
    odd = "".join(
        f'{names.log_end_offset}{{topic="t{i // 100}",partition="{i % 100}"}} {i}.0\n'
        for i in range(50_000)
    )
    for mb in (5, 20, 50):
        out.append((f"irregular {mb} MB", odd * max(1, round(mb * 1e6 / len(odd)))))
    return out


def adversarial(replicas: int, runs: int) -> None:
    names = PROFILES["monitor"]
    for what, text in adversarial_pages(replicas):
        lines = text.count("\n")
        cpu = cpu_best(lambda: parse(text, names), runs)  # noqa: B023 -- run at once
        wall, stall = longest_stall(lambda: parse(text, names))  # noqa: B023
        print(
            f"{what:22} {len(text) / 1e6:6.1f} MB {lines:>9,} lines: parse {cpu * 1e3:8.1f} ms "
            f"({cpu / lines * 1e6:.2f} µs/line), in a thread {wall * 1e3:8.1f} ms, "
            f"round loop's longest stall {stall * 1e3:7.1f} ms"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--page", help="a saved exporter page, instead of synthetic ones")
    ap.add_argument("--adversarial", action="store_true", help="hostile pages (issue 50)")
    args = ap.parse_args()
    if args.adversarial:
        adversarial(args.replicas, max(1, args.runs // 5))
        return
    if args.page:
        try:
            with open(args.page, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            ap.error(f"--page {args.page}: {e}")
        name = detect(text)
        if name is None:
            ap.error(f"--page {args.page}: no profile's names on it (jmx.detect)")
        pages = [(name, text, len(parse(text, PROFILES[name]).keys))]
    else:
        pages = [(name, broker_page(names, CLIENT[name], args.replicas), args.replicas)
                 for name, names in PROFILES.items()]  # fmt: skip
    for name, text, n in pages:
        names = PROFILES[name]
        assert parse(text, names) == parse_lines(text, names)
        bulk = cpu_best(lambda: parse(text, names), args.runs)  # noqa: B023 -- run at once
        lines = cpu_best(lambda: parse_lines(text, names), max(3, args.runs // 5))  # noqa: B023
        det = cpu_best(lambda: detect(text), max(3, args.runs // 5))  # noqa: B023
        print(
            f"{name:9} {n:,} replicas, {text.count(chr(10)):,} lines, {len(text) / 1e6:.1f} MB: "
            f"parse {bulk * 1e3:.1f} ms ({bulk / n * 1e6:.2f} µs/replica), "
            f"line by line {lines * 1e3:.1f} ms ({lines / n * 1e6:.2f} µs/replica), "
            f"detect {det * 1e3:.1f} ms"
        )


if __name__ == "__main__":
    main()
