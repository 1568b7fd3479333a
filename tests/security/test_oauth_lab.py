"""SASL OAUTHBEARER against a real broker: the lab's ``oauthbearer`` mode (Kafka 3.9.2, one
broker, a ``SECURE`` listener checking signed JWTs with Kafka's own validator; Kafka ends an
OAUTHBEARER session when its token expires, KIP-368).

* the collector (kafka-python) reads the lab and publishes its events with the lab's token
  file, kafka-python's DEBUG logs captured: no token in them;
* refresh, four collectors side by side through their first token's expiry: a token file
  rewritten with a new token (used from then on), a token file never rewritten (the
  broker ends its sessions: the control that the lab enforces expiry), a token command (run
  again before expiry) and an identity provider's token endpoint (asked again);
* a token that cannot be had, or that the broker refuses: one line naming the setting;
* the Java client -- the kafka-clients jar of Spark's Kafka source, 3.9.2, and Kafka 4.4's
  -- with the options the job renders, in a small JVM (``TokenProbe.java``): 3.9.2 reads a
  token file once per login (its sessions end with the first token) and asks an endpoint
  again; 4.4 refuses the file unless the JVM allows its URL, then reads it again when it is
  rewritten;
* the Spark job (``python -m streaming --once``) reads the events and writes its findings
  over OAUTHBEARER with the token file.

The identity provider is the lab's signing key (``monitor.dev.lab.security.sign_token``)
and, for the client-credentials grant, a stand-in token endpoint (``tests/security/idp.py``).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import secrets
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from monitor import jars
from monitor.collector import Collector, CollectorConfig
from monitor.collector.security import REDACTED, KafkaConnectError
from monitor.connection import ALLOWED_URLS_PROPERTY, KafkaConnection, OAuthTokenSource
from monitor.dev.lab import security
from monitor.dev.lab.admin import create_topic
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.ports import reserve_base_port
from tests.security.helpers import LOG4J2_INFO, ONE_BROKER, Capture, raw, read_topic
from tests.security.idp import TokenEndpoint, token_endpoint

pytestmark = [pytest.mark.lab]

HERE = Path(__file__).resolve().parent
BASE_PORT = int(os.environ.get("MONITOR_TEST_OAUTH_LAB_PORT", "25092"))
#: The short lifetime of the refresh tests' first tokens: long enough for the clients'
#: re-authentication (at 85-95 % of a session, KIP-368) to come well before the expiry.
SHORT_S = 24


@dataclass
class OAuthLab:
    lab: Lab
    dir: Path
    files: security.SecurityFiles
    settings: KafkaConnection  # the lab's token file
    topics: dict[str, str]
    #: The collector's run with the lab's token file (see ``published``).
    log_text: str = ""
    published: int = 0
    events: list[Any] = field(default_factory=list)

    def token(self, lifetime_s: float, **claims: object) -> str:
        return security.sign_token(self.files, lifetime_s=lifetime_s, claims=claims)

    def connection(self, **source: object) -> KafkaConnection:
        """The lab's SECURE listener with another token source."""
        base = self.settings.model_dump(exclude={"sasl_oauth_token_file"}, exclude_none=True)
        return KafkaConnection(**{**base, **source})

    def collector(self, kafka: KafkaConnection) -> Collector:
        return Collector(
            CollectorConfig(
                cluster="oauthlab",
                kafka=kafka,
                jmx_urls=self.lab.jmx_urls,
                events_topic=self.topics["events"],
                events_on_watched_cluster=True,  # the lab is both here
                interval_s=1.0,
                jmx_timeout_s=2.0,
            )
        )


@pytest.fixture(scope="module")
def olab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthLab]:
    tmp = tmp_path_factory.mktemp("oauth-lab")
    with reserve_base_port(BASE_PORT, brokers=1, secure=True) as base:
        lab = Lab(
            LabConfig(
                dir=tmp / "lab",
                base_port=base,
                brokers=1,
                heap="256m",
                security="oauthbearer",
                kafka_version=security.OAUTH_KAFKA_VERSION,
                extra_broker_config=ONE_BROKER,
            ),
            progress=None,
        )
        try:
            lab.up()
            tag = uuid.uuid4().hex[:6]
            topics = {r: f"{r}-{tag}" for r in ("events", "findings", "deadletter", "payments")}
            for name in topics.values():
                # Made over the lab's PLAINTEXT listener (its own tooling); payments (RF 1)
                # is what the job must find a durability risk in.
                create_topic(lab.bootstrap_servers, name, replication_factor=1,
                             min_insync_replicas=1)  # fmt: skip
            settings = KafkaConnection(
                **security.kafka_settings(  # type: ignore[arg-type]
                    lab.config.dir, "oauthbearer", lab.config.secure_bootstrap_servers
                )
            )
            yield OAuthLab(
                lab, lab.config.dir, security.files_for(lab.config.dir), settings, topics
            )
        finally:
            lab.down()


@pytest.fixture(scope="module")
def published(olab: OAuthLab) -> OAuthLab:
    """Two collector rounds published over OAUTHBEARER with the lab's token file, every log
    record (kafka-python's DEBUG too) captured."""
    capture = Capture()
    root, kafka_logger = logging.getLogger(), logging.getLogger("kafka")
    levels = root.level, kafka_logger.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    kafka_logger.setLevel(logging.DEBUG)
    try:
        collector = olab.collector(olab.settings)
        collector.start()
        try:
            results: list[Any] = []
            collector.run(rounds=2, on_round=results.append)
            olab.published = sum(len(r.events) for r in results)
        finally:
            collector.stop()
    finally:
        root.removeHandler(capture)
        root.setLevel(levels[0])
        kafka_logger.setLevel(levels[1])
    olab.log_text = "\n".join(capture.lines)
    olab.events = read_topic(olab.settings, olab.topics["events"])
    return olab


def test_collector_reads_and_publishes_with_a_token_file(published: OAuthLab) -> None:
    events = [json.loads(m.value) for m in published.events]
    assert published.published > 0 and len(events) == published.published
    assert {"partition", "broker", "topic_config"} <= {e["kind"] for e in events}
    payments = published.topics["payments"]
    assert any(e["kind"] == "partition" and e["topic"] == payments for e in events)


def test_no_token_in_the_collectors_logs_or_events(published: OAuthLab) -> None:
    token = published.files.read(published.files.oauth_token)
    assert len(token) > 200 and token.count(".") == 2  # a signed JWT, as the clients sent it
    # Positive controls: kafka-python logged its configuration (the provider, by its file)
    # and its SASL requests, the token in them redacted.
    assert f"OAuthTokenSource(token from file {published.files.oauth_token})" in published.log_text
    assert f"auth=Bearer {REDACTED}" in published.log_text
    assert token not in published.log_text
    for part in token.split("."):
        assert part not in published.log_text
    for record in published.events:
        assert token.encode() not in raw(record)


# --- refresh: four collectors through their first token's expiry --------------------------------


@dataclass
class Refreshing:
    name: str
    collector: Collector
    provider: OAuthTokenSource
    first_exp: float
    #: (seconds past the first token's expiry, None if the round worked else the error)
    rounds: list[tuple[float, str | None]] = field(default_factory=list)

    def failures(self) -> list[tuple[float, str | None]]:
        return [r for r in self.rounds if r[1] is not None]


#: A token command as an identity provider's CLI is one: prints a new token signed by the
#: lab's key (``SHORT_S`` seconds, then an hour) and counts its runs.
TOKEN_COMMAND = """\
import base64, json, pathlib, secrets, subprocess, sys, time
key, runs = sys.argv[1], pathlib.Path(sys.argv[2])
n = len(runs.read_text().splitlines()) if runs.exists() else 0
b = lambda data: base64.urlsafe_b64encode(data).rstrip(b"=").decode()
now = int(time.time())
claims = {{"sub": "monitor", "iss": "{issuer}", "iat": now, "jti": secrets.token_hex(8),
          "exp": now + ({short} if n == 0 else 3600)}}
head = {{"alg": "RS256", "typ": "JWT", "kid": "{kid}"}}
signing = b(json.dumps(head).encode()) + "." + b(json.dumps(claims).encode())
sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing.encode(),
                     capture_output=True, check=True).stdout
with runs.open("a") as out:
    out.write(str(now) + "\\n")
print(signing + "." + b(sig))
"""


@dataclass
class RefreshRun:
    clients: dict[str, Refreshing]
    rewritten_to: str
    stale_file: Path
    command_runs: Path
    idp: TokenEndpoint


@pytest.fixture(scope="module")
def refresh(
    olab: OAuthLab,
    tmp_path_factory: pytest.TempPathFactory,
    probes: dict[str, Future[ProbeRun]],  # started first: their waits overlap this one's
) -> Iterator[RefreshRun]:
    tmp = tmp_path_factory.mktemp("oauth-refresh")
    f = olab.files
    rewritten, stale = tmp / "rewritten.token", tmp / "stale.token"
    first = olab.token(SHORT_S)
    security.write_token(f, first, rewritten)
    security.write_token(f, olab.token(SHORT_S), stale)
    script = tmp / "get-token.py"
    script.write_text(
        TOKEN_COMMAND.format(issuer=security.OAUTH_ISSUER, kid=security.OAUTH_KEY_ID, short=SHORT_S)
    )
    runs = tmp / "command-runs"
    minted = 0

    def mint(lifetime_s: float) -> str:  # the endpoint: SHORT_S first, then an hour
        nonlocal minted
        minted += 1
        return olab.token(SHORT_S if minted == 1 else 3600)

    client_secret = "idp-secret-" + secrets.token_hex(8)
    with token_endpoint(mint, "monitor", client_secret, lifetime_s=SHORT_S) as idp:
        sources: dict[str, dict[str, object]] = {
            "rewritten file": {"sasl_oauth_token_file": rewritten},
            "stale file": {"sasl_oauth_token_file": stale},
            "command": {
                "sasl_oauth_token_command": [
                    sys.executable,
                    str(script),
                    str(f.oauth_signing_key),
                    str(runs),
                ],
            },
            "endpoint": {
                "sasl_oauth_token_endpoint_url": idp.url,
                "sasl_oauth_client_id": "monitor",
                "sasl_oauth_client_secret": client_secret,
                "sasl_oauth_scope": "kafka",
            },
        }
        clients: dict[str, Refreshing] = {}
        try:
            for name, source in sources.items():
                collector = olab.collector(olab.connection(**source))
                collector.start(produce=False)
                provider = collector._admin.config["sasl_oauth_token_provider"]  # type: ignore[union-attr]
                exp = security.token_expiry(provider.token())
                assert exp is not None
                clients[name] = Refreshing(name, collector, provider, exp)
            deadline = max(c.first_exp for c in clients.values()) + 10
            rewritten_to = ""
            while time.time() < deadline:
                for c in clients.values():
                    try:
                        c.collector.round()
                        error = None
                    except Exception as e:  # what a round of the collector's loop would log
                        error = f"{type(e).__name__}: {e}"
                    c.rounds.append((time.time() - c.first_exp, error))
                if not rewritten_to:  # after the first round: the sidecar writes a new token
                    rewritten_to = olab.token(3600)
                    security.write_token(f, rewritten_to, rewritten)
                time.sleep(0.5)
            yield RefreshRun(clients, rewritten_to, stale, runs, idp)
        finally:
            for c in clients.values():
                c.collector.stop()


def _worked_throughout(c: Refreshing) -> None:
    assert c.failures() == [], c.failures()
    assert c.rounds[-1][0] > 8, c.rounds  # ran well past the first token's expiry


def test_a_rewritten_token_file_is_used_before_the_old_token_expires(refresh: RefreshRun) -> None:
    c = refresh.clients["rewritten file"]
    _worked_throughout(c)
    assert c.provider.fetches >= 2
    assert c.provider.token() == refresh.rewritten_to


def test_a_token_file_never_rewritten_loses_its_sessions(refresh: RefreshRun) -> None:
    """The control: the broker really ends a session whose token expired (so the other
    clients' rounds past the expiry did use new tokens), and the collector says why."""
    c = refresh.clients["stale file"]
    before = [r for r in c.rounds if r[0] < -2]
    after = [r for r in c.rounds if r[0] > 3]
    assert before and all(error is None for _, error in before), before
    expected = f"sasl_oauth_token_file: the token in {refresh.stale_file} expired at "
    assert after and all(error is not None and expected in error for _, error in after), after


def test_a_token_command_is_run_again_before_expiry(refresh: RefreshRun) -> None:
    c = refresh.clients["command"]
    _worked_throughout(c)
    runs = [int(t) for t in refresh.command_runs.read_text().splitlines()]
    assert len(runs) >= 2
    assert runs[1] < c.first_exp  # run again before its first token expired


def test_a_token_endpoint_is_asked_again_before_expiry(refresh: RefreshRun) -> None:
    c = refresh.clients["endpoint"]
    _worked_throughout(c)
    assert len(refresh.idp.issued) >= 2 and refresh.idp.refused == []
    assert set(refresh.idp.scopes) == {"kafka"}
    assert c.provider.token() == refresh.idp.issued[-1]


# --- what cannot be had, or is refused ------------------------------------------------------------


def test_token_problems_are_one_line_naming_the_setting(olab: OAuthLab, tmp_path: Path) -> None:
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    foreign = tmp_path / "foreign.token"
    foreign_token = olab.token(3600, iss="someone-else")
    foreign.write_text(foreign_token)
    failing = tmp_path / "fail.sh"
    failing.write_text("#!/bin/sh\necho 'no credentials for kafka' >&2\nexit 3\n")
    failing.chmod(0o700)
    where = f"cannot use Kafka at {olab.lab.config.secure_bootstrap_servers} over SASL_SSL"
    cases: list[tuple[dict[str, object], str]] = [
        (
            {"sasl_oauth_token_file": tmp_path / "missing.token"},
            f"(OAUTHBEARER with the token from file {tmp_path}/missing.token): "
            f"sasl_oauth_token_file: cannot read {tmp_path}/missing.token: No such file or "
            "directory",
        ),
        ({"sasl_oauth_token_file": empty}, f"sasl_oauth_token_file: {empty} is empty"),
        (
            {"sasl_oauth_token_command": [str(failing)]},
            f"(OAUTHBEARER with the token from command {failing}): sasl_oauth_token_command: "
            f"{failing} exited with 3: no credentials for kafka",
        ),
        (
            {"sasl_oauth_token_file": foreign, "bootstrap_timeout_ms": 3000},
            f"(OAUTHBEARER with the token from file {foreign}): SASL authentication failed: the "
            "brokers accepted the connection but rejected OAUTHBEARER with the token from file "
            f"{foreign} (expired, for another issuer or audience, or signed by a key the "
            "brokers do not trust?)",
        ),
    ]
    log = olab.lab.config.server_log(olab.lab.node_ids[0])
    for source, expected in cases:
        collector = olab.collector(olab.connection(**source))
        with pytest.raises(KafkaConnectError) as err:
            collector.start(produce=False)
        message = str(err.value)
        assert message.startswith(where) and message.endswith(expected), message
        assert "\n" not in message and foreign_token not in message
    # The broker did refuse the foreign token, for its issuer.
    assert "Could not validate the access token" in log.read_text(errors="replace")


# --- the Java client: Spark's kafka-clients (3.9.2) and Kafka 4.4's ------------------------------


def _java_properties(options: dict[str, str]) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace("\n", "\\n")

    return "".join(f"{k}={escape(v)}\n" for k, v in options.items())


#: The Java client's own refresh of its login (ExpiringCredentialRefreshingLogin), scaled
#: down to the tests' short tokens (its defaults: at 80 % of a token's life, no sooner than
#: 60 s after the last and 300 s before the expiry).
SHORT_LOGIN_REFRESH = {
    "sasl.login.refresh.window.factor": "0.5",
    "sasl.login.refresh.window.jitter": "0",
    "sasl.login.refresh.min.period.seconds": "1",
    "sasl.login.refresh.buffer.seconds": "1",
}


class Probe:
    """``TokenProbe.java`` in a JVM on ``classpath``, one Admin client per properties file."""

    def __init__(self, classes: Path, classpath: str, clients: dict[str, Path], log: Path):
        log4j = log.with_suffix(".log4j2.properties")
        log4j.write_text(
            "rootLogger.level = warn\nrootLogger.appenderRef.f.ref = f\n"
            "appender.f.type = File\nappender.f.name = f\n"
            f"appender.f.fileName = {log}\nappender.f.layout.type = PatternLayout\n"
            "appender.f.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
        )
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
             f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{classes}:{classpath}",
             "TokenProbe", *(f"{n}={p}" for n, p in clients.items())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def expect(self, done: Callable[[str], bool], timeout_s: float = 120) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            assert left > 0 and self.proc.poll() is None, "\n".join(self.seen[-40:])
            try:
                line = self.lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            self.seen.append(line)
            if done(line):
                return line

    def results(self, name: str) -> list[tuple[int, str | None]]:
        """(epoch second, None if ok else the error) of each call of client ``name``."""
        out: list[tuple[int, str | None]] = []
        for line in self.seen:
            who, _, rest = line.partition(f"{name} ")
            if who or not rest.startswith(("ok ", "FAIL ")):
                continue
            word, at, *error = rest.split(" ", 2)
            out.append((int(at), None if word == "ok" else " ".join(error)))
        return out

    def finish(self, timeout_s: float) -> None:
        try:
            self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
        while not self.lines.empty():
            self.seen.append(self.lines.get())


@pytest.fixture(scope="module")
def probe_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``TokenProbe.java`` compiled against Spark's kafka-clients (the same source runs on
    Kafka 4.4's: it uses the Admin API only)."""
    out = tmp_path_factory.mktemp("token-probe")
    javac = shutil.which("javac")
    assert javac is not None, "the Java tests need a JDK's javac (Java 17)"
    subprocess.run(
        [javac, "-d", str(out), "-cp", spark_client_classpath(), str(HERE / "TokenProbe.java")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return out


def spark_client_classpath() -> str:
    """The Java Kafka client as Spark's Kafka source runs it: pyspark's jars (logging and
    all) and the source's own jars (its kafka-clients)."""
    pyspark = jars.pyspark_jars_dir()
    assert pyspark is not None
    return ":".join([f"{pyspark}/*", *map(str, jars.spark_kafka_jars())])


def _client_file(tmp: Path, name: str, options: dict[str, str]) -> Path:
    path = tmp / f"{name}.properties"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(_java_properties({**options, **SHORT_LOGIN_REFRESH}))
    return path


@dataclass
class ProbeRun:
    """What one Java client did through its first token's expiry."""

    probe: Probe
    first_exp: float
    #: Tokens the identity provider issued (the endpoint client's run), else 0.
    issued: int = 0
    #: The client's answer before the JVM allowed the token file's URL (Kafka 4), else "".
    refused: str = ""


def _spark_client_run(olab: OAuthLab, classes: Path, tmp: Path) -> ProbeRun:
    """kafka-clients 3.9.2 with a token file and an endpoint client, through the expiry of
    the file's first token (a sidecar writes a new one after the first call)."""
    f = olab.files
    token_file = tmp / "job.token"
    # Characters HTTP Basic's id:secret needs form-encoded (sasl.oauthbearer.header.urlencode).
    secret = "idp-secret-%41+:" + secrets.token_hex(8)
    with token_endpoint(lambda s: olab.token(s), "monitor", secret, lifetime_s=SHORT_S) as idp:
        endpoint_client = olab.connection(
            sasl_oauth_token_endpoint_url=idp.url,
            sasl_oauth_client_id="monitor",
            sasl_oauth_client_secret=secret,
        )
        security.write_token(f, olab.token(3600), token_file)
        file_client = olab.connection(sasl_oauth_token_file=token_file)
        clients = {
            "file": _client_file(tmp, "file", file_client.java_options(prefix="")),
            "endpoint": _client_file(tmp, "endpoint", endpoint_client.java_options(prefix="")),
        }
        probe = Probe(classes, spark_client_classpath(), clients, tmp / "probe.log")
        probe.expect(lambda line: line == "ready")
        first = olab.token(SHORT_S)
        first_exp = security.token_expiry(first)
        assert first_exp is not None
        security.write_token(f, first, token_file)  # the file's token when the client logs in
        probe.send(f"run {SHORT_S + 12}")
        probe.expect(lambda line: line.startswith("file ok"))
        security.write_token(f, olab.token(3600), token_file)  # a sidecar's new token
        probe.finish(SHORT_S + 60)
        return ProbeRun(probe, first_exp, issued=len(idp.issued))


def _kafka_4_client_run(olab: OAuthLab, classes: Path, tmp: Path) -> ProbeRun:
    """kafka-clients 4.4 with a token file: tried before its URL is allowed, then through the
    expiry of its first token (rewritten after the first call)."""
    f = olab.files
    token_file = tmp / "job.token"
    security.write_token(f, olab.token(3600), token_file)
    k = olab.connection(sasl_oauth_token_file=token_file)
    clients = {"file": _client_file(tmp, "file", k.java_options(prefix=""))}
    classpath = ":".join(map(str, jars.kafka_jars(jars.KAFKA_VERSION)))
    probe = Probe(classes, classpath, clients, tmp / "probe.log")
    probe.expect(lambda line: line == "ready")
    probe.send("try file")
    refused = probe.expect(lambda line: line.startswith(("refused", "created")))
    url = k.java_system_properties()[ALLOWED_URLS_PROPERTY]
    probe.send(f"allow {url}")
    probe.expect(lambda line: line == "allowed")
    first = olab.token(SHORT_S)
    first_exp = security.token_expiry(first)
    assert first_exp is not None
    security.write_token(f, first, token_file)
    probe.send(f"run {SHORT_S + 12}")
    probe.expect(lambda line: line.startswith("file ok"))
    security.write_token(f, olab.token(3600), token_file)
    probe.finish(SHORT_S + 60)
    return ProbeRun(probe, first_exp, refused=refused)


@pytest.fixture(scope="module")
def probes(
    olab: OAuthLab, probe_classes: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[ProbeRun]]]:
    """Both Java clients' runs, started together in threads: each waits out a short token's
    life (~40 s), so they overlap each other and the collectors' refresh run (which asks for
    this fixture first) instead of following one another."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {
            "spark": pool.submit(
                _spark_client_run, olab, probe_classes, tmp_path_factory.mktemp("probe-spark")
            ),
            "kafka4": pool.submit(
                _kafka_4_client_run, olab, probe_classes, tmp_path_factory.mktemp("probe-kafka4")
            ),
        }


def test_spark_kafka_client_reads_a_token_file_once_and_asks_an_endpoint_again(
    probes: dict[str, Future[ProbeRun]],
) -> None:
    """kafka-clients 3.9.2 (Spark's Kafka source) with the rendered options: both log in;
    the endpoint client's sessions outlive its first token, the file client's do not -- its
    login reads the file once (FileTokenRetriever.init): the rewritten token is never read.
    This is why docs/deploy.md gives the job the endpoint with this client."""
    client = [p for p in jars.spark_kafka_jars() if p.name.startswith("kafka-clients-")]
    assert [p.name for p in client] == ["kafka-clients-3.9.2.jar"], client
    run = probes["spark"].result(timeout=300)
    probe, first_exp = run.probe, run.first_exp
    endpoint, file = probe.results("endpoint"), probe.results("file")
    assert endpoint and all(error is None for _, error in endpoint), probe.seen[-30:]
    assert endpoint[-1][0] > first_exp + 8 and run.issued >= 2
    assert file[0][1] is None
    after = [error for at, error in file if at > first_exp + 3]
    assert after and all(error is not None and "invalid_token" in error for error in after), file


def test_kafka_4_client_needs_the_file_allowed_and_reads_it_again(
    probes: dict[str, Future[ProbeRun]],
) -> None:
    """kafka-clients 4.4: no OAuth URL unless the JVM allows it
    (``java_system_properties``); then a rewritten token file is read again, and the
    client's sessions outlive its first token."""
    run = probes["kafka4"].result(timeout=300)
    assert run.refused.startswith("refused file ") and ALLOWED_URLS_PROPERTY in run.refused, (
        run.refused
    )
    file = run.probe.results("file")
    assert file and all(error is None for _, error in file), run.probe.seen[-30:]
    assert file[-1][0] > run.first_exp + 8


# --- the Spark job --------------------------------------------------------------------------------


@pytest.mark.spark
def test_the_job_reads_and_writes_over_oauthbearer(published: OAuthLab, tmp_path: Path) -> None:
    """``python -m streaming --once`` with ``MONITOR_STREAMING_KAFKA__*`` from the lab's
    settings (the token file): it reads the collector's events and writes a durability-risk
    finding for the RF-1 topic, over OAUTHBEARER."""
    olab = published
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MONITOR_STREAMING_") and k != "MONITOR_SPARK_LOG_LEVEL"
    }
    settings = security.kafka_settings(
        olab.dir, "oauthbearer", olab.lab.config.secure_bootstrap_servers
    )
    env |= {f"MONITOR_STREAMING_KAFKA__{k.upper()}": str(v) for k, v in settings.items()}
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "log4j2.properties").write_text(LOG4J2_INFO.format(log=tmp_path / "job.log"))
    env |= {
        "SPARK_CONF_DIR": str(conf_dir),
        "MONITOR_SPARK_LOG_LEVEL": "INFO",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    cmd = [
        sys.executable, "-m", "streaming", "--once",
        "--events-topic", olab.topics["events"],
        "--findings-topic", olab.topics["findings"],
        "--deadletter-topic", olab.topics["deadletter"],
        "--checkpoint", str(tmp_path / "checkpoint"),
        "--store", str(tmp_path / "store"),
        "--tick-ms", "3600000", "--buckets", "2", "--shuffle-partitions", "1",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", "spark.driver.host=127.0.0.1",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    findings = [json.loads(m.value) for m in read_topic(olab.settings, olab.topics["findings"])]
    assert any(
        f["kind"] == "durability_risk" and f["topic"] == olab.topics["payments"] for f in findings
    ), findings
    job_log = (tmp_path / "job.log").read_text(errors="replace")
    # Its Kafka clients were configured with the rendered options (the source's consumer,
    # the sink's producer), and no token is in anything the job printed or logged.
    assert "sasl.mechanism = OAUTHBEARER" in job_log
    assert f"sasl.oauthbearer.token.endpoint.url = file://{olab.files.oauth_token}" in job_log
    assert "sasl.jaas.config = [hidden]" in job_log
    token = olab.files.read(olab.files.oauth_token)
    for text in (output, job_log):
        assert token not in text
