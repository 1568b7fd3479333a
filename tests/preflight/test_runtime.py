"""``--check``'s lines about the machine and the exporters, each saying what to do: a page
slower than the longest deadline it may have, a missing Spark Kafka source, no Java --
checked on what is really there (an HTTP server that takes its time, the jar cache, PATH)."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from monitor.collector.check import _check_endpoint, _read_page
from monitor.collector.config import CollectorConfig
from monitor.preflight import runtime
from monitor.preflight.report import Report

K = {"bootstrap_servers": "127.0.0.1:9092"}
PAGE = 'kafka_log_log_end_offset{partition="0",topic="t"} 5.0\n'


@contextmanager
def _slow_page(delay_s: float) -> Iterator[str]:
    stop = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if stop.wait(delay_s):
                return
            body = PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def test_a_page_slower_than_its_longest_deadline_says_what_to_do() -> None:
    """The exporter's rules walk every MBean: the page takes longer than the longest a page
    may (jmx_timeout_max_s, 1 s here): FAIL, naming the deadline and what to do."""
    cfg = CollectorConfig(kafka=K, jmx_timeout_max_s=1.0, jmx_urls={1: "http://x"})
    with _slow_page(3.0) as url:
        lines: list[str] = []
        assert _check_endpoint(cfg, 1, url, lines.append, _read_page(cfg, url)) == 1
    (line,) = lines
    assert line.startswith(f"exporter of broker 1 ({url}): FAIL -- page not read within 1 s: ")
    assert "narrow the exporter's rules" in line and "includeObjectNames" in line
    assert "raise jmx_timeout_max_s (1 s)" in line


def test_a_page_slower_than_the_interval_is_ok_and_says_what_it_costs() -> None:
    cfg = CollectorConfig(kafka=K, interval_s=1.0, jmx_urls={1: "http://x"})
    with _slow_page(1.5) as url:
        lines: list[str] = []
        assert _check_endpoint(cfg, 1, url, lines.append, _read_page(cfg, url)) == 0
    assert lines[0].startswith(f"exporter of broker 1 ({url}): ok -- profile monitor")
    assert lines[1].startswith("    slow: the page takes longer than interval_s: rounds will run")


def _without(tool: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PATH holding every program of the real PATH but ``tool`` (links in ``tmp_path``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            target = bin_dir / name
            if name != tool and not target.exists():
                target.symlink_to(Path(folder, name))
    monkeypatch.setenv("PATH", str(bin_dir))


def test_a_missing_spark_kafka_source_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Not in the jar cache, no mvn to resolve it, no jars setting: FAIL with the three
    ways to get it. With mvn there, it is resolved at the first start: ok."""
    monkeypatch.setenv("MONITOR_CACHE", str(tmp_path / "empty-cache"))
    _without("mvn", monkeypatch, tmp_path)
    lines: list[str] = []
    report = Report(lines.append)
    runtime.check_kafka_source(report, None, {})
    assert report.problems == 1
    (line,) = lines
    assert line.startswith(
        "Spark Kafka source: FAIL -- not resolved, and no mvn on PATH to resolve it: "
    )
    assert "apt-get install maven" in line and "monitor assets spark-jars DIR" in line
    assert "spark.jars.packages" in line


def test_a_jars_folder_without_the_source_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "jars"
    folder.mkdir()
    (folder / "commons-pool2-2.13.1.jar").write_bytes(b"")
    lines: list[str] = []
    report = Report(lines.append)
    runtime.check_kafka_source(report, [str(folder)], {})
    assert lines == [
        f"Spark Kafka source: FAIL -- no spark-sql-kafka jar in {folder}: fill it with "
        "`monitor assets spark-jars DIR` where Maven is"
    ]
    lines.clear()
    runtime.check_kafka_source(report, [str(tmp_path / "nowhere")], {})
    assert "does not exist" in lines[0]


def test_no_java_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    lines: list[str] = []
    runtime.check_java(Report(lines.append))
    assert lines == [
        f"java: FAIL -- JAVA_HOME={tmp_path / 'no-jdk'} has no bin/java: install Java 17+ "
        "(Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME to one"
    ]
    monkeypatch.delenv("JAVA_HOME")
    lines.clear()
    runtime.check_java(Report(lines.append))
    assert lines[0].startswith("java: ok -- ") and lines[0].endswith("Java 17")
