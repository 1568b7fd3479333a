"""What the job needs of the machine it runs on, checked before Spark starts: pyspark (the
``spark`` extra), a Java 17+, Spark's Kafka source, and a checkpoint and store it can write.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from monitor import jars
from monitor.preflight.report import Report

#: The oldest Java Spark 4 runs on.
JAVA_MIN = 17


def java_command(environ: Mapping[str, str] | None = None) -> str | None:
    """The ``java`` Spark will start: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME")
    if home:
        candidate = Path(home, "bin", "java")
        return str(candidate) if candidate.is_file() else None
    return shutil.which("java")


def java_major(version_text: str) -> int | None:
    """The major version in ``java -version``'s output.

    >>> java_major('openjdk version "17.0.15" 2025-04-15')
    17
    >>> java_major('java version "1.8.0_402"'), java_major("nothing")
    (8, None)
    """
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def check_java(report: Report) -> None:
    java = java_command()
    if java is None:
        home = os.environ.get("JAVA_HOME")
        report.fail(
            "java",
            f"JAVA_HOME={home} has no bin/java" if home else "no java on PATH",
            f"install Java {JAVA_MIN}+ (Debian: apt-get install openjdk-17-jre-headless) or set "
            "JAVA_HOME to one",
        )
        return
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        report.fail("java", f"{java} -version: {e}", f"install Java {JAVA_MIN}+")
        return
    major = java_major(out.stderr + out.stdout)
    if major is None or major < JAVA_MIN:
        report.fail(
            "java",
            f"{java} is Java {major or 'of unknown version'}",
            f"Spark 4 needs Java {JAVA_MIN}+: install it, or set JAVA_HOME to one",
        )
        return
    report.ok("java", f"{java}, Java {major}")


def check_pyspark(report: Report) -> bool:
    if importlib.util.find_spec("pyspark") is None:
        report.fail(
            "pyspark",
            "not installed",
            "install the 'spark' extra where the job runs: pip install '.[spark]' from a "
            "clone (README.md)",
        )
        return False
    report.ok("pyspark", f"{jars.pyspark_version()}")
    return True


def check_kafka_source(
    report: Report, configured: Sequence[str] | None, spark_conf: Mapping[str, str]
) -> None:
    """Spark's Kafka source (spark-sql-kafka and its dependencies): from the ``jars``
    setting, from ``spark.jars.packages``, or resolved with Maven into the cache --
    present there already, or ``mvn`` on PATH to resolve it at the job's first start."""
    what = "Spark Kafka source"
    if configured is not None:
        if not configured:
            own = jars.pyspark_jars_dir()
            on_classpath = own is not None and any(own.glob("spark-sql-kafka-0-10_*.jar"))
            if "spark.jars.packages" in spark_conf or "spark.jars" in spark_conf:
                report.ok(what, "from spark_conf (spark.jars / spark.jars.packages)")
            elif on_classpath:
                report.ok(what, f"on Spark's own classpath ({own})")  # the container image
            else:
                report.ok(what, "jars = [] (--no-jars): the cluster or spark-submit supplies it")
            return
        found: list[str] = []
        for entry in configured:
            if "://" in entry:
                found.append(entry)  # a URI: Spark fetches it; not checked here
                continue
            path = Path(entry)
            if path.is_dir():
                found += [p.name for p in path.glob("*.jar")]
            elif path.is_file():
                found.append(path.name)
            else:
                report.fail(
                    what,
                    f"jars names {entry}, which does not exist",
                    "make it where Maven is (`monitor assets spark-jars DIR`), or unset jars "
                    "to resolve it with Maven here",
                )
                return
        if not any("spark-sql-kafka" in name or "://" in name for name in found):
            report.fail(
                what,
                f"no spark-sql-kafka jar in {', '.join(configured)}",
                "fill it with `monitor assets spark-jars DIR` where Maven is",
            )
            return
        report.ok(what, f"{len(found)} jar(s) from the jars setting")
        return
    if "spark.jars.packages" in spark_conf:
        report.ok(what, "spark.jars.packages: Spark fetches it at start (Maven Central)")
        return
    cached = jars.cached_spark_kafka()
    if cached is not None:
        report.ok(what, f"resolved in {cached}")
        return
    if shutil.which("mvn") is not None:
        report.ok(what, "not resolved yet: Maven (on PATH) fetches it at the first start")
        return
    report.fail(
        what,
        "not resolved, and no mvn on PATH to resolve it",
        "install Maven (apt-get install maven), or name a folder of its jars made where Maven "
        "is (`monitor assets spark-jars DIR`, then MONITOR_STREAMING_JARS='[\"DIR\"]'), or set "
        'spark_conf."spark.jars.packages" (docs/deploy.md)',
    )


def check_writable(report: Report, what: str, location: str) -> None:
    """A local folder the job must write (its checkpoint, its store): made if missing."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", location):
        report.ok(what, f"{location} (a Hadoop URI: not checked here)")
        return
    path = Path(location)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".monitor-check"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        report.fail(what, f"cannot write {path}: {e.strerror or e}", "give a writable folder")
        return
    report.ok(what, str(path))
