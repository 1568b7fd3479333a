"""The jar sets resolve from Maven Central into the cache and have the expected contents."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from monitor import jars

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]


def test_kafka_classpath_has_the_broker_and_a_log4j2_slf4j2_backend() -> None:
    names = {p.name for p in jars.kafka_jars()}
    assert f"kafka_2.13-{jars.KAFKA_VERSION}.jar" in names
    assert f"kafka-clients-{jars.KAFKA_VERSION}.jar" in names
    assert any(n.startswith("log4j-core-2.") for n in names)
    assert any(n.startswith("log4j-slf4j2-impl-2.") for n in names)
    # slf4j 1.7 cannot see an slf4j2 provider: the broker would log nothing.
    slf4j = [n for n in names if n.startswith("slf4j-api-")]
    assert len(slf4j) == 1 and slf4j[0].startswith("slf4j-api-2."), slf4j
    assert all(p.is_file() for p in jars.kafka_jars())


def test_jmx_agent_is_a_single_jar() -> None:
    agent = jars.jmx_agent_jar()
    assert agent.name == f"jmx_prometheus_javaagent-{jars.JMX_EXPORTER_VERSION}.jar"
    assert agent.stat().st_size > 100_000


def test_spark_kafka_jars_do_not_duplicate_what_pyspark_ships() -> None:
    spark_version = None if jars.pyspark_version() else jars.SPARK_KAFKA_FALLBACK_VERSION
    found = jars.spark_kafka_jars(spark_version)
    artifacts = {jars.artifact_name(p.name) for p in found}
    assert {
        "spark-sql-kafka-0-10_2.13",
        "spark-token-provider-kafka-0-10_2.13",
        "kafka-clients",
        "commons-pool2",
    } <= artifacts
    shipped_dir = jars.pyspark_jars_dir()
    if shipped_dir is not None:
        shipped = {jars.artifact_name(p.name) for p in shipped_dir.glob("*.jar")}
        assert not (artifacts & shipped)


def test_kafka_3_resolves_with_a_log4j_1_backend_and_zookeeper() -> None:
    """Kafka 3.x: its own POM profile (kafka3): reload4j behind slf4j 1.7, not the log4j2
    backend 4.x gets; ZooKeeper from kafka_2.13's own dependencies."""
    names = {p.name for p in jars.kafka_jars("3.9.2")}
    assert "kafka_2.13-3.9.2.jar" in names
    assert {"reload4j-1.2.25.jar", "slf4j-reload4j-1.7.36.jar"} <= names
    assert any(n.startswith("zookeeper-3.") for n in names)
    assert not any(n.startswith("log4j-slf4j2-impl") for n in names)


def test_maven_refuses_an_artifact_whose_checksum_does_not_match(tmp_path: Path) -> None:
    """Jars are resolved with ``--strict-checksums`` (issue 20): Maven's default only warns
    on a mismatch. Shown with the real ``mvn`` on a repository (a folder) serving a jar
    whose SHA-1 file does not match it: refused with the flag, taken without."""
    import hashlib
    import subprocess

    repo = tmp_path / "repo" / "test" / "tampered" / "tampered" / "1.0"
    repo.mkdir(parents=True)
    jar = repo / "tampered-1.0.jar"
    jar.write_bytes(b"PK\x05\x06" + b"\x00" * 18)  # an empty zip
    pom = repo / "tampered-1.0.pom"
    pom.write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>test.tampered</groupId><artifactId>tampered</artifactId>"
        "<version>1.0</version></project>"
    )
    (repo / "tampered-1.0.pom.sha1").write_text(hashlib.sha1(pom.read_bytes()).hexdigest())
    (repo / "tampered-1.0.jar.sha1").write_text("0" * 40)  # not the jar's

    strict = [
        a
        for a in jars.maven_command(jars.JarSet.KAFKA, "4.1.2", tmp_path)
        if a == "--strict-checksums"
    ]
    assert strict, "jars are resolved with --strict-checksums"

    cached = jars.maven_repo() / "test" / "tampered"  # the plugins are in that repository

    def get(*flags: str) -> subprocess.CompletedProcess[str]:
        shutil.rmtree(cached, ignore_errors=True)
        try:
            return subprocess.run(
                ["mvn", "-B", *flags, f"-Dmaven.repo.local={jars.maven_repo()}",
                 "dependency:get", "-Dartifact=test.tampered:tampered:1.0",
                 f"-DremoteRepositories=tampered::default::file://{tmp_path / 'repo'}"],
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        finally:
            shutil.rmtree(cached, ignore_errors=True)

    refused = get(*strict)
    assert refused.returncode != 0 and "checksum" in refused.stdout.lower(), refused.stdout[-2000:]
    taken = get()
    assert taken.returncode == 0, taken.stdout[-2000:]
