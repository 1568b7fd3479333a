"""The container image (deploy/image/Containerfile, issue 19), built and run without a daemon.

``scripts/image.sh build`` builds it with buildah (chroot isolation, vfs storage) on a Debian
12 base it makes with debootstrap (cached under ``.cache/image``: about 2 minutes for the
base the first time, then 2-3 for the image) -- in the background from the session's start
when the session holds these tests (``tests/background.py``, at the lowest CPU
and I/O priority), so the rest of the suite runs meanwhile. The image is then run with
``buildah from`` + ``buildah run`` (one working container), as its own user with its own
environment.

Needs root, buildah and debootstrap (scripts/bootstrap.sh installs them), Debian's mirror,
PyPI and Maven Central; without them it fails. ``MONITOR_IMAGE_TEST=0`` leaves it out
(explicitly: never by default).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import background

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "image.sh"
IMAGE = "localhost/kafka-replication-monitor:latest"
UID = 10001
KAFKA_JARS = "/opt/monitor/spark-kafka-jars"

pytestmark = [
    pytest.mark.skipif(os.environ.get("MONITOR_IMAGE_TEST") == "0", reason="MONITOR_IMAGE_TEST=0"),
    pytest.mark.timeout(1800),
]


def _lock_pins() -> list[tuple[str, str]]:
    """requirements.lock's ``(name, version)`` pins (its hash lines left out)."""
    import re

    text = (ROOT / "requirements.lock").read_text()
    return re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, flags=re.M)


def _script(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


#: The working container the tests run their commands in (one: with vfs storage, each
#: ``buildah from`` copies the whole image).
CONTAINER = "krm-image-test"


@pytest.fixture(scope="module")
def image() -> Iterator[dict[str, object]]:
    """Build the image (the base from the cache when there), make a working container of
    it, and return the image's configuration; the container is removed at the end."""
    # A missing builder FAILS (a skipped image test looks like a passing one).
    if os.geteuid() != 0 or not (shutil.which("buildah") and shutil.which("debootstrap")):
        pytest.fail(
            "building the image needs root, buildah and debootstrap (scripts/bootstrap.sh "
            "installs them); MONITOR_IMAGE_TEST=0 leaves the image out explicitly",
            pytrace=False,
        )
    # Started in the background at the session's start (tests/background.py), or here when
    # it was not.
    build = background.wait("image", timeout=1500) or _script("build", timeout=1500)
    assert build.returncode == 0, f"scripts/image.sh build failed:\n{build.stderr[-6000:]}"
    inspect = _script("buildah", "inspect", "--type", "image", IMAGE)
    assert inspect.returncode == 0, inspect.stderr
    config: dict[str, object] = json.loads(inspect.stdout)["OCIv1"]["config"]
    _script("buildah", "rm", CONTAINER)  # one a killed run left
    made = _script("buildah", "from", "--quiet", "--pull=never", "--name", CONTAINER, IMAGE)
    assert made.returncode == 0, made.stderr
    try:
        yield config
    finally:
        _script("buildah", "rm", CONTAINER)


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    """``cmd`` in the working container: the image's user, environment and folder."""
    return _script("buildah", "run", "--isolation", "chroot", CONTAINER, "--", *cmd)


def _ok(*cmd: str) -> str:
    proc = _run(*cmd)
    assert proc.returncode == 0, f"{' '.join(cmd)}: rc {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def test_monitor_version(image: dict[str, object]) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _ok("monitor", "--version").split()[:2] == ["monitor", version]


def test_the_model_runs_compiled(image: dict[str, object]) -> None:
    """The image's build stage compiled the model with mypyc, from the sources installed;
    the runtime loads that build (monitor.model._native), no compiler in it."""
    note = _ok("python", "-c", "import monitor.model as m; print(m.NATIVE_NOTE)")
    assert "runs compiled (mypyc), from /opt/monitor/native-model" in note, note
    assert "no gcc" in _ok("sh", "-c", "command -v gcc || echo no gcc")


def test_runs_as_a_fixed_non_root_user(image: dict[str, object]) -> None:
    assert image.get("User") == f"{UID}:{UID}"
    assert _ok("id", "-u").strip() == str(UID)
    assert _ok("sh", "-c", "echo $HOME; pwd").split() == ["/var/lib/monitor"] * 2


def test_one_image_for_both_commands(image: dict[str, object]) -> None:
    assert image["Entrypoint"] == ["monitor"]
    assert "usage: monitor collect" in _ok("monitor", "collect", "--help")
    assert "usage: monitor stream" in _ok("monitor", "stream", "--help")


def test_spark_on_java_17(image: dict[str, object]) -> None:
    lock = dict(_lock_pins())
    pyspark = _ok("python", "-c", "import pyspark; print(pyspark.__version__)")
    assert pyspark.strip() == lock["pyspark"]
    java = _ok("java", "-version")
    assert re.search(r'version "17\.', java), java
    # Spark's Kafka source, in the folder the job's jars setting names (PROBE below).
    jars = _ok("ls", KAFKA_JARS)
    assert re.search(r"^spark-sql-kafka-0-10_2\.13-[\d.]+\.jar$", jars, re.M), jars


#: Run in the image: a local Spark with the jars the job's settings name finds the Kafka
#: source (a streaming read is planned, not started: no broker is needed).
SPARK_KAFKA = """
from pyspark.sql import SparkSession
from streaming.config import StreamingConfig
from streaming.session import expand_jars
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.jars", ",".join(expand_jars(StreamingConfig().jars))).getOrCreate())
events = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:1")
          .option("subscribe", "events").load())
print("kafka source", events.isStreaming, spark.version)
spark.stop()
"""


def test_spark_starts_with_the_kafka_source(image: dict[str, object]) -> None:
    # buildah run's chroot keeps the host's name, which its /etc/hosts does not resolve (a
    # container runtime's does): Spark is told where it is.
    proc = _script(
        "buildah", "run", "--isolation", "chroot", "--env", "SPARK_LOCAL_IP=127.0.0.1",
        "--env", "SPARK_LOCAL_HOSTNAME=localhost", CONTAINER, "--", "python", "-c", SPARK_KAFKA,
    )  # fmt: skip
    assert proc.returncode == 0 and "kafka source True" in proc.stdout, proc.stderr[-3000:]


#: Run in the image: the settings both commands would start with, and what is installed.
PROBE = """
import json, os, shutil
from importlib import metadata
from monitor.collector import config as c
from streaming import config as s
cc, sc = c.CollectorConfig(), s.StreamingConfig()
print(json.dumps({
    "collector": [cc.metrics_host, cc.metrics_port, c.unknown_env_keys()],
    "stream": [sc.metrics_host, sc.metrics_port, sc.jars, s.unknown_env_keys(),
               sc.checkpoint_location, sc.store_location],
    "dists": {d.metadata["Name"]: d.version for d in metadata.distributions()},
    "build": [p for p in ("/opt/monitor/bin/pip", "/opt/build", "/src", shutil.which("mvn"))
              if p and os.path.exists(p)],
}))
"""


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_settings_listen_on_every_address_and_nothing_unpinned(
    image: dict[str, object],
) -> None:
    assert set(image["ExposedPorts"]) == {"9478/tcp", "9479/tcp"}  # type: ignore[arg-type]
    out = json.loads(_ok("python", "-c", PROBE).strip().splitlines()[-1])
    assert out["collector"] == ["0.0.0.0", 9479, []]
    assert out["stream"] == [
        "0.0.0.0", 9478, [KAFKA_JARS], [], "/var/lib/monitor/checkpoint", "/var/lib/monitor/store",
    ]  # fmt: skip
    # Every installed distribution is the lock's version (but the project's own).
    lock = {_norm(name): version for name, version in _lock_pins()}
    dists = {_norm(n): v for n, v in out["dists"].items()}
    assert dists.pop("kafka-replication-monitor")
    unpinned = {n: v for n, v in dists.items() if lock.get(n) != v}
    assert unpinned == {}, f"not requirements.lock's versions: {unpinned}"
    assert out["build"] == [], f"the build's tools in the runtime image: {out['build']}"
