"""A class-data sharing (CDS) archive for the Spark driver's JVM.

A Spark driver loads ~15k classes from pyspark's jars at start, and the JVM parses and
verifies each one. A dynamic CDS archive (JDK 13+, ``-XX:ArchiveClassesAtExit`` at a clean
exit, ``-XX:SharedArchiveFile`` after) holds those classes parsed and verified, mapped into
every later driver: measured with ``bench.spark_start_bench`` on a quiet 2-core machine, a
local session's start and first aggregation cost the driver JVM 27.8 CPU-s without and
16.7 with (16.9 -> 10.0 s wall). The job restarts sooner after a crash, and the test
suite's drivers each start for ~40 % less CPU.

Off unless ``MONITOR_SPARK_CDS_ARCHIVE`` names an archive built by
``python -m streaming.cds build PATH`` for this interpreter's pyspark and this ``java``
(``make setup`` builds ``.cache/cds/spark-driver.jsa``; ``make test`` and ``make demo`` use
it). The archive records the JVM and the classpath it was built with; a sidecar file
(``PATH.key``) holds their fingerprint, and a driver whose fingerprint differs (another
pyspark, another JDK, a ``SPARK_CONF_DIR`` that changes the classpath) runs without the
archive rather than with the JVM's mismatch warning. Only classes of the JVM's own class
loaders are archived: the Kafka connector (``spark.jars``) loads as before.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

#: The environment variable naming the archive (unset: no archive).
ENV = "MONITOR_SPARK_CDS_ARCHIVE"

#: What Spark's launcher reads from the environment into the driver's classpath.
CLASSPATH_ENV = (
    "SPARK_HOME",
    "SPARK_CONF_DIR",
    "HADOOP_CONF_DIR",
    "YARN_CONF_DIR",
    "SPARK_DIST_CLASSPATH",
)


def fingerprint() -> str:
    """What the archive must have been built with: the JVM (:func:`monitor.jars.java_identity`),
    pyspark's jars (their folder, names and sizes: the classpath and its content) and what
    else Spark's launcher puts on the classpath (``SPARK_HOME``, ``SPARK_CONF_DIR``,
    ``HADOOP_CONF_DIR``, ``YARN_CONF_DIR``, ``SPARK_DIST_CLASSPATH``)."""
    import pyspark

    from monitor.jars import java_identity

    parts = [f"java {java_identity()}"]
    jars = Path(pyspark.__file__).parent / "jars"
    parts.append(f"jars {jars.resolve()}")
    parts.extend(f"{p.name} {p.stat().st_size}" for p in sorted(jars.glob("*.jar")))
    for name in CLASSPATH_ENV:
        parts.append(f"{name} {os.environ.get(name, '')}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def driver_java_options() -> str | None:
    """``-XX:SharedArchiveFile=...`` when ``MONITOR_SPARK_CDS_ARCHIVE`` names an archive built
    for this pyspark and this JVM, else None (no archive: the driver starts as without; so
    does a path with white space, which Spark's java options cannot carry)."""
    path = os.environ.get(ENV)
    if not path or any(c.isspace() for c in path):
        return None
    archive = Path(path)
    key = archive.with_name(archive.name + ".key")
    if not archive.is_file() or not key.is_file():
        return None
    if key.read_text().strip() != fingerprint():
        return None
    return f"-XX:SharedArchiveFile={archive}"


def _gone(pid: int) -> bool:
    """The process has exited (a zombie counts: an orphan's parent may never reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def build(path: Path, timeout_s: float = 600) -> Path:
    """Build the archive at ``path`` (and its ``.key``): a driver runs the warm-up
    (``streaming.cds_warmup``) with ``-XX:ArchiveClassesAtExit`` in a child process; the
    archive is moved into place once the JVM has exited (it writes the archive as it exits)."""
    path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    log = path.with_name(f"{path.name}.{os.getpid()}.log")
    env = {
        **os.environ,
        # The JVM logs "Written dynamic archive" once the whole archive is on disk: a JVM
        # killed while writing (the OOM killer) leaves a file without that line.
        "MONITOR_SPARK_CDS_DUMP_OPTIONS": (
            f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds+dynamic=info:file={log}"
        ),
        "MONITOR_SPARK_LOG_LEVEL": "ERROR",
    }
    env.pop(ENV, None)
    proc = subprocess.run(
        [sys.executable, "-m", "streaming.cds_warmup"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("jvm ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"building the CDS archive {path}: the warm-up driver failed "
            f"(exit {proc.returncode}): {proc.stderr[-2000:]}"
        )
    jvm = int(lines[-1].split()[1])
    deadline = time.monotonic() + timeout_s
    while not _gone(jvm):  # still writing the archive
        if time.monotonic() > deadline:
            raise RuntimeError(f"building the CDS archive {path}: the JVM {jvm} did not exit")
        time.sleep(0.2)
    from monitor.jars import archive_written

    written = archive_written(log)
    log.unlink(missing_ok=True)
    if not written or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"building the CDS archive {path}: the JVM wrote no whole archive")
    partial.replace(path)
    path.with_name(path.name + ".key").write_text(fingerprint() + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streaming.cds",
        description="Build the Spark driver's class-data sharing archive (see the module).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build PATH unless it is already built for this setup")
    b.add_argument("path", type=Path)
    b.add_argument("--force", action="store_true", help="build even if up to date")
    args = parser.parse_args(argv)
    key = args.path.with_name(args.path.name + ".key")
    if (
        not args.force
        and args.path.is_file()
        and key.is_file()
        and key.read_text().strip() == fingerprint()
    ):
        print(f"{args.path}: up to date")
        return 0
    started = time.monotonic()
    build(args.path)
    size = args.path.stat().st_size / 1e6
    print(f"{args.path}: built in {time.monotonic() - started:.0f} s ({size:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
