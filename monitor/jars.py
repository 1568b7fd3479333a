"""Resolve the jars from Maven Central into the cache, once: the lab's broker and exporter
agent, and the Spark job's Kafka source.

Three jar sets are described by ``monitor/assets/pom.xml`` (one Maven profile each) and copied by
``mvn dependency:copy-dependencies`` into ``<cache>/jars/<set>-<version>/``:

* ``kafka`` — the broker (``org.apache.kafka:kafka_2.13``) with its runtime dependencies
  and a log4j2 backend;
* ``jmx``   — the Prometheus JMX exporter java agent;
* ``spark`` — ``spark-sql-kafka-0-10`` for the installed pyspark, minus the jars pyspark
  already ships.

Why Maven and not a download by URL: Maven Central is the one artifact source this
project's machines (and CI) can reach, and ``mvn`` verifies checksums and keeps a local
repository (``<cache>/m2``) so later runs are offline. A set counts as present only when its
marker file lists every jar and all of them exist; anything less triggers a fresh resolve
into a temporary folder that is swapped in atomically, so an interrupted download never
leaves a half-populated set that looks complete.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from monitor import assets

#: The Maven POM that lists the jar sets (one profile per set), shipped as package data
#: (``monitor/assets/pom.xml``; ``deploy/pom.xml`` in a checkout links to it).
POM_ASSET = "pom.xml"


class JarError(RuntimeError):
    """Resolving a jar set failed for a reason worth showing as-is (no ``mvn``, a
    download refused, a POM missing)."""


def cache_root() -> Path:
    """The cache root: ``$MONITOR_CACHE``; else ``<repo>/.cache`` in a checkout; else
    (an installed wheel) ``$XDG_CACHE_HOME/kafka-replication-monitor``, ``~/.cache/...``.

    Created on first use, with a ``.gitignore`` holding ``*`` so that the hundreds of
    megabytes of jars and cluster data never show up in ``git status``.
    """
    env = os.environ.get("MONITOR_CACHE")
    if env:
        root = Path(env).expanduser().resolve()
    elif (checkout := assets.checkout_root()) is not None:
        root = checkout / ".cache"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = Path(xdg).expanduser() / "kafka-replication-monitor"
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return root


def java_identity(java: str | Path | None = None) -> str:
    """Which JVM ``java`` (default: ``$JAVA_HOME/bin/java``, else the one on PATH) is: its
    real path, and the size and time of its ``libjvm.so`` -- what a class-data sharing
    archive is only valid for (a JDK update in place keeps the launcher, not libjvm)."""
    if java is None:
        home = os.environ.get("JAVA_HOME")
        java = Path(home, "bin", "java") if home else shutil.which("java")
    if not java:
        return "no java"
    real = Path(java).resolve()
    libjvm = real.parent.parent / "lib" / "server" / "libjvm.so"
    stat = libjvm.stat() if libjvm.is_file() else None
    return f"{real} {stat.st_size if stat else -1} {stat.st_mtime_ns if stat else -1}"


def archive_written(log: Path) -> bool:
    """Whether a JVM writing a class-data sharing archive (``-XX:ArchiveClassesAtExit`` with
    ``-Xlog:cds+dynamic=info:file=<log>``) finished it: the JVM logs "Written dynamic
    archive" once the whole archive is on disk; one killed while writing never does."""
    return log.is_file() and "Written dynamic archive" in log.read_text(errors="replace")


def maven_repo() -> Path:
    """The private Maven repository (``-Dmaven.repo.local``), reused across runs."""
    return cache_root() / "m2"


def jars_root() -> Path:
    """Parent folder of the resolved jar sets."""
    return cache_root() / "jars"


#: Kafka broker version the lab runs by default: the newest release on Maven Central (ELR on
#: by default since 4.1). Other versions: ``monitor lab up --kafka-version V`` (docs/lab.md).
KAFKA_VERSION = "4.4.0"

#: The Kafka versions the lab is tested on (CI's version matrix, docs/collector.md's support
#: matrix): the newest 3.9 (ZooKeeper and KRaft), the first 4.x that counts unclean
#: elections correctly (4.1; the default until 4.4.0 passed the whole suite), the default.
KAFKA_VERSIONS_TESTED = ("3.9.2", "4.1.2", KAFKA_VERSION)


def kafka_major(version: str) -> int:
    """The major version of a Kafka version string.

    >>> kafka_major("3.9.2"), kafka_major("4.4.0")
    (3, 4)
    """
    head = version.split(".", 1)[0]
    if not head.isdigit():
        raise JarError(f"not a Kafka version: {version!r} (expected e.g. 3.9.2 or 4.1.2)")
    return int(head)


#: JMX exporter java agent. 1.0.1 is the newest *agent* on Maven Central: from 1.1.0 on the
#: project publishes the agent jar only as a GitHub release asset (only its ``collector``
#: library still goes to Central), and GitHub is not reachable from this project's machines.
JMX_EXPORTER_VERSION = "1.0.1"

#: Used only when Maven Central has no ``spark-sql-kafka-0-10`` for the installed pyspark
#: version (pyspark 4.3.0 is on PyPI but Spark 4.3.0 is not on Central as mirrored here):
#: the newest release on Central. A loud warning is printed when it is used.
SPARK_KAFKA_FALLBACK_VERSION = "4.2.0"

_MARKER = ".complete.json"
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


class JarSet(StrEnum):
    """The jar sets the POM knows, named after their Maven profiles."""

    KAFKA = "kafka"
    JMX = "jmx"
    SPARK = "spark"


@dataclass(frozen=True)
class Paths:
    """Folders of the resolved jar sets (``None`` for a set that was not asked for)."""

    kafka: Path | None = None
    jmx: Path | None = None
    spark: Path | None = None


def _require_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise JarError(
            "resolving the jars needs "
            + " and ".join(f"`{t}`" for t in missing)
            + " on PATH (Java 17+ and Maven 3.8+; on Debian: "
            "apt-get install openjdk-17-jdk-headless maven)"
        )


def pyspark_version() -> str | None:
    """Version of the installed pyspark, or ``None`` when pyspark is not installed."""
    try:
        import pyspark
    except ImportError:
        return None
    version: str = pyspark.__version__
    return version


def pyspark_jars_dir() -> Path | None:
    """pyspark's bundled ``jars/`` folder (what Spark itself already puts on the classpath)."""
    try:
        import pyspark
    except ImportError:
        return None
    folder = Path(pyspark.__file__).parent / "jars"
    return folder if folder.is_dir() else None


def _set_version(jar_set: JarSet, spark_version: str | None) -> str:
    if jar_set is JarSet.KAFKA:
        return KAFKA_VERSION
    if jar_set is JarSet.JMX:
        return JMX_EXPORTER_VERSION
    version = spark_version or os.environ.get("MONITOR_SPARK_KAFKA_VERSION") or pyspark_version()
    if version is None:
        raise JarError(
            "cannot choose a spark-sql-kafka version: pyspark is not installed; install the "
            "'spark' extra or pass --spark-version / set MONITOR_SPARK_KAFKA_VERSION"
        )
    return version


def _set_dir(jar_set: JarSet, version: str) -> Path:
    return jars_root() / f"{jar_set.value}-{version}"


def _is_complete(folder: Path) -> bool:
    marker = folder / _MARKER
    if not marker.is_file():
        return False
    try:
        data = json.loads(marker.read_text())
        jars = [str(j) for j in data["jars"]]
    except (ValueError, KeyError, TypeError):
        return False
    return bool(jars) and all((folder / j).is_file() for j in jars)


def _find_complete(jar_set: JarSet, versions: Iterable[str]) -> Path | None:
    for version in versions:
        folder = _set_dir(jar_set, version)
        if _is_complete(folder):
            return folder
    return None


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    """Serialise resolves across processes (a test session and a CLI call, say)."""
    root = jars_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_VERSION_PROPERTY = {
    JarSet.KAFKA: "kafka.version",
    JarSet.JMX: "jmx.exporter.version",
    JarSet.SPARK: "spark.version",
}


def _profile(jar_set: JarSet, version: str) -> str:
    """The POM profile of a set: Kafka 3.x has its own (log4j 1 through reload4j)."""
    if jar_set is JarSet.KAFKA and kafka_major(version) < 4:
        return "kafka3"
    return jar_set.value


def _pom_file() -> Path:
    """The shipped POM, written into the cache: Maven wants a file it may write beside."""
    pom = jars_root() / "pom.xml"
    text = assets.read_text(POM_ASSET)
    if not pom.is_file() or pom.read_text() != text:
        pom.parent.mkdir(parents=True, exist_ok=True)
        pom.write_text(text)
    return pom


def maven_command(jar_set: JarSet, version: str, out_dir: Path) -> list[str]:
    """The ``mvn`` command resolving one jar set. ``--strict-checksums``: an artifact whose
    checksum does not match the repository's fails the build (Maven's default only warns)."""
    return [
        "mvn",
        "-B",
        "--strict-checksums",
        "-Dstyle.color=never",
        "-f",
        str(_pom_file()),
        "-P",
        _profile(jar_set, version),
        f"-Dmaven.repo.local={maven_repo()}",
        f"-D{_VERSION_PROPERTY[jar_set]}={version}",
        "dependency:copy-dependencies",
        f"-DoutputDirectory={out_dir}",
        "-DincludeScope=runtime",
    ]


def _run_maven(jar_set: JarSet, version: str, out_dir: Path) -> tuple[int, str]:
    """Run ``copy-dependencies`` for one profile, echoing Maven's progress; return (rc, output)."""
    cmd = maven_command(jar_set, version, out_dir)
    print(f"[lab jars] resolving {jar_set.value} {version}: {' '.join(cmd)}", flush=True)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        line = _ANSI_RE.sub("", line)  # Debian's mvn emits colour resets even with -B
        lines.append(line)
        # Maven's own progress lines, indented so they read as a sub-step.
        sys.stdout.write("    " + line)
        sys.stdout.flush()
    return proc.wait(), "".join(lines)


_ARTIFACT_RE = re.compile(r"^(?P<name>.+)-\d+(?:\.\d+)+(?:[-.][A-Za-z0-9]+)*\.jar$")


def artifact_name(jar: str) -> str:
    """Maven artifact id from a copied jar name (`kafka-clients-3.9.2.jar` -> `kafka-clients`)."""
    match = _ARTIFACT_RE.match(jar)
    return match.group("name") if match else jar


def _drop_pyspark_duplicates(folder: Path) -> list[str]:
    """Remove jars that pyspark already ships (by artifact name, any version).

    The POM already excludes the known overlaps (hadoop, slf4j, compression codecs, scala,
    spark-tags ...); this is the safety net for whatever a new spark-sql-kafka release drags
    in, because two versions of one library on Spark's classpath fail in confusing ways.
    """
    shipped_dir = pyspark_jars_dir()
    if shipped_dir is None:
        return []
    shipped = {artifact_name(j.name) for j in shipped_dir.glob("*.jar")}
    dropped: list[str] = []
    for jar in sorted(folder.glob("*.jar")):
        if artifact_name(jar.name) in shipped:
            jar.unlink()
            dropped.append(jar.name)
    return dropped


class _MavenFailure(JarError):
    def __init__(self, jar_set: JarSet, version: str, missing: bool) -> None:
        self.missing = missing
        reason = "not found on Maven Central" if missing else "mvn failed (see output above)"
        super().__init__(f"could not resolve jar set {jar_set.value} {version}: {reason}")


def _resolve_one(jar_set: JarSet, version: str) -> Path:
    final = _set_dir(jar_set, version)
    if _is_complete(final):
        return final
    _require_tools("mvn", "java")
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    rc, output = _run_maven(jar_set, version, partial)
    if rc != 0:
        shutil.rmtree(partial, ignore_errors=True)
        missing = "Could not find artifact" in output or "is missing" in output
        raise _MavenFailure(jar_set, version, missing)
    dropped = _drop_pyspark_duplicates(partial) if jar_set is JarSet.SPARK else []
    jars = sorted(j.name for j in partial.glob("*.jar"))
    if not jars:
        shutil.rmtree(partial, ignore_errors=True)
        raise JarError(
            f"mvn resolved no jars for {jar_set.value} {version} "
            "(the artifact may not exist on Maven Central)"
        )
    (partial / _MARKER).write_text(
        json.dumps(
            {"set": jar_set.value, "version": version, "jars": jars, "dropped": dropped},
            indent=2,
        )
    )
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    print(f"[lab jars] {jar_set.value} {version}: {len(jars)} jars in {final}", flush=True)
    if dropped:
        print(f"[lab jars] dropped (already in pyspark/jars): {', '.join(dropped)}", flush=True)
    return final


def _resolve_spark(version: str, explicit: bool) -> Path:
    found = _find_complete(JarSet.SPARK, [version])
    if found is not None:
        return found
    # A previous run found `version` missing on Central and fell back: don't ask Maven again.
    alias = jars_root() / f"spark-{version}.fallback"
    if not explicit and alias.is_file():
        fallback = _find_complete(JarSet.SPARK, [alias.read_text().strip()])
        if fallback is not None:
            return fallback
    try:
        return _resolve_one(JarSet.SPARK, version)
    except _MavenFailure as exc:
        if not exc.missing or explicit or version == SPARK_KAFKA_FALLBACK_VERSION:
            raise
    alias.write_text(SPARK_KAFKA_FALLBACK_VERSION + "\n")
    print(
        f"[lab jars] WARNING: spark-sql-kafka-0-10_2.13:{version} (the installed pyspark's "
        f"version) is not on Maven Central; using {SPARK_KAFKA_FALLBACK_VERSION} instead. "
        "Pin pyspark to a version published on Central to get an exact match.",
        flush=True,
    )
    return _resolve_one(JarSet.SPARK, SPARK_KAFKA_FALLBACK_VERSION)


def resolve(
    sets: Iterable[JarSet | str] = (JarSet.KAFKA, JarSet.JMX),
    *,
    spark_version: str | None = None,
    kafka_version: str | None = None,
) -> Paths:
    """Make sure the requested jar sets are in the cache; run ``mvn`` only for missing ones.

    Returns the folders. Raises :class:`JarError` with a readable reason when ``mvn`` or
    ``java`` is missing, or Maven fails. ``kafka_version``: the broker's (default
    :data:`KAFKA_VERSION`).
    """
    wanted = {JarSet(s) for s in sets}
    result: dict[str, Path] = {}
    with _lock():
        for jar_set in (JarSet.KAFKA, JarSet.JMX, JarSet.SPARK):
            if jar_set not in wanted:
                continue
            if jar_set is JarSet.SPARK:
                explicit = bool(spark_version or os.environ.get("MONITOR_SPARK_KAFKA_VERSION"))
                version = _set_version(jar_set, spark_version)
                result[jar_set.value] = _resolve_spark(version, explicit)
            elif jar_set is JarSet.KAFKA and kafka_version is not None:
                kafka_major(kafka_version)  # a readable error before Maven's
                result[jar_set.value] = _resolve_one(jar_set, kafka_version)
            else:
                result[jar_set.value] = _resolve_one(jar_set, _set_version(jar_set, None))
    return Paths(**result)


def _jars_in(folder: Path) -> list[Path]:
    data = json.loads((folder / _MARKER).read_text())
    return [folder / str(j) for j in data["jars"]]


def kafka_jars(version: str | None = None) -> list[Path]:
    """The broker's classpath entries (resolving them first if needed)."""
    folder = resolve([JarSet.KAFKA], kafka_version=version).kafka
    assert folder is not None
    return _jars_in(folder)


def kafka_classpath(version: str | None = None) -> str:
    """The broker's classpath as one ``-cp`` string (ZooKeeper's too, for Kafka 3.x)."""
    return os.pathsep.join(str(j) for j in kafka_jars(version))


def jmx_agent_jar() -> Path:
    """The JMX exporter java agent jar (resolving it first if needed)."""
    folder = resolve([JarSet.JMX]).jmx
    assert folder is not None
    jars = [j for j in _jars_in(folder) if j.name.startswith("jmx_prometheus_javaagent")]
    if len(jars) != 1:
        raise JarError(f"expected one jmx_prometheus_javaagent jar in {folder}, found {jars}")
    return jars[0]


def jmx_httpserver_jar() -> Path:
    """The JMX exporter's standalone HTTP server jar (``java -jar``; reads a remote JMX).

    A jar folder resolved before the POM listed it lacks it: that folder is resolved again.
    """
    for attempt in range(2):
        folder = resolve([JarSet.JMX]).jmx
        assert folder is not None
        jars = [j for j in _jars_in(folder) if j.name.startswith("jmx_prometheus_httpserver")]
        if len(jars) == 1:
            return jars[0]
        if attempt == 0 and not jars:
            shutil.rmtree(folder)
    raise JarError(f"expected one jmx_prometheus_httpserver jar in {folder}, found {jars}")


def spark_kafka_jars(spark_version: str | None = None) -> list[Path]:
    """Jars to add to Spark (``spark.jars``) for the Kafka source/sink, minus pyspark's own."""
    folder = resolve([JarSet.SPARK], spark_version=spark_version).spark
    assert folder is not None
    return _jars_in(folder)


def cached_kafka() -> Path | None:
    """The folder of the Kafka broker's jars (:data:`KAFKA_VERSION`) already resolved into
    the cache, without running Maven; None if not there."""
    return _find_complete(JarSet.KAFKA, [KAFKA_VERSION])


def cached_spark_kafka() -> Path | None:
    """The folder of Spark's Kafka source already resolved into the cache for the installed
    pyspark (or the version it fell back to), without running Maven; None if not there."""
    try:
        version = _set_version(JarSet.SPARK, None)
    except JarError:
        return None
    found = _find_complete(JarSet.SPARK, [version])
    alias = jars_root() / f"spark-{version}.fallback"
    if found is None and alias.is_file():
        found = _find_complete(JarSet.SPARK, [alias.read_text().strip()])
    return found


def export_spark_kafka_jars(dest: Path) -> list[Path]:
    """Spark's Kafka source jars (resolved first if needed) copied into ``dest``: the local
    jars folder the job's ``jars`` setting names on a machine without Maven (the container
    image, a VM: docs/deploy.md). Returns the files written."""
    dest.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(jar, dest)) for jar in spark_kafka_jars()]


def resolved_versions() -> dict[str, str]:
    """Versions recorded by the marker files of every complete set in the cache."""
    out: dict[str, str] = {}
    root = jars_root()
    if not root.is_dir():
        return out
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and _is_complete(folder):
            data = json.loads((folder / _MARKER).read_text())
            out[str(data["set"])] = str(data["version"])
    return out
