"""Reading a broker's JMX exporter endpoint (Prometheus text format).

Only the few metric families the collector needs are parsed, line by line: a broker with
10,000 replicas exposes tens of thousands of series and the generic parser would spend
most of a collection round on ones we drop.

Sites name these metrics as their exporter rules say. :data:`PROFILES` holds the names of
three styles of rules (the collector's ``jmx_profile``; ``auto`` detects one from a broker's
page with :func:`detect`), and any name can be set (``jmx_names``):

* ``monitor`` -- this project's rules (``monitor/assets/jmx-exporter/kafka-replication.yaml``, the
  lab's): only the MBeans read here;
* ``strimzi`` -- the style of Strimzi's example Kafka metrics configuration: lower-cased
  ``kafka_<domain>_<type>_<name>``, meters as counters without ``PerSec``
  (``kafka_server_replicamanager_isrshrinks_total``), the fetcher's label ``clientId``;
* ``confluent`` -- the style of Confluent's jmx-monitoring-stacks: the same names, but
  meters untyped and keeping ``persec`` (``kafka_server_replicamanager_isrshrinkspersec``),
  label names lower-cased (``clientid``).

The MBeans behind each field are listed in ``docs/collector.md`` ("JMX exporter profiles").

A page is read within a deadline and a size (:func:`fetch`), and no value on it can fail
the read: :func:`parse` leaves out each sample it cannot use -- not a number, not finite,
negative, or beyond the contract's 64-bit range -- and counts it by reason
(:data:`DROP_REASONS`). A value is never clamped into range: a clamped offset or counter
would be a false reading, and a false reading can page.
"""

from __future__ import annotations

import http.client
import io
import math
import re
import socket
import ssl
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from monitor import __version__
from monitor.contract.events import INT64_MAX

_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class JmxNames(BaseModel):
    """The exported metric name of each MBean the collector reads (defaults: ``monitor``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    log_end_offset: str = "kafka_log_log_end_offset"
    log_start_offset: str = "kafka_log_log_start_offset"
    fetcher_lag: str = "kafka_server_replica_fetcher_lag"
    isr_shrinks: str = "kafka_server_replica_manager_isrshrinkspersec_total"
    isr_expands: str = "kafka_server_replica_manager_isrexpandspersec_total"
    under_replicated: str = "kafka_server_replica_manager_underreplicatedpartitions"
    active_controller: str = "kafka_controller_activecontrollercount"
    unclean_elections: str = "kafka_controller_stats_uncleanleaderelectionspersec_total"
    #: The JVM's start (the agent's standard process metrics): tells a restart that
    #: happened between two scrapes, which the counters alone cannot.
    process_start: str = "process_start_time_seconds"


_STRIMZI = JmxNames(
    log_end_offset="kafka_log_log_logendoffset",
    log_start_offset="kafka_log_log_logstartoffset",
    fetcher_lag="kafka_server_fetcherlagmetrics_consumerlag",
    isr_shrinks="kafka_server_replicamanager_isrshrinks_total",
    isr_expands="kafka_server_replicamanager_isrexpands_total",
    under_replicated="kafka_server_replicamanager_underreplicatedpartitions",
    active_controller="kafka_controller_kafkacontroller_activecontrollercount",
    unclean_elections="kafka_controller_controllerstats_uncleanleaderelections_total",
)
PROFILES: dict[str, JmxNames] = {
    "monitor": JmxNames(),
    "strimzi": _STRIMZI,
    # The same names but for the meters: untyped, ``persec`` kept, no ``_total``.
    "confluent": _STRIMZI.model_copy(
        update={
            "isr_shrinks": "kafka_server_replicamanager_isrshrinkspersec",
            "isr_expands": "kafka_server_replicamanager_isrexpandspersec",
            "unclean_elections": "kafka_controller_controllerstats_uncleanleaderelectionspersec",
        }
    ),
}

#: The fetcher-lag series' client id label, as each style spells it.
_CLIENT_LABELS = ("client_id", "clientId", "clientid")
#: A fetcher whose lag is not a follower's: while ``kafka-reassign-partitions`` moves a
#: replica between a broker's log directories, ConsumerLag is also published for the same
#: partition by this thread.
_NOT_A_FOLLOWER = "ReplicaAlterLogDirsThread"


def metric_names(text: str) -> set[str]:
    """The metric names on an exposition-format page."""
    names = set()
    for line in text.splitlines():
        if line and line[0] != "#":
            brace = line.find("{")
            names.add(line[:brace] if brace > 0 else line.split(" ", 1)[0])
    return names


def detect(text: str) -> str | None:
    """The profile whose names a broker's page carries most of (None: none of any).

    >>> detect("kafka_server_replicamanager_isrshrinkspersec 0.0\\n")
    'confluent'
    >>> detect("jvm_threads_current 40.0\\n") is None
    True
    """
    present = metric_names(text)
    best, score = None, 0
    for name, names in PROFILES.items():
        n = len(present & set(names.model_dump().values()) - {names.process_start})
        if n > score:
            best, score = name, n
    return best


def profile_for(text: str, configured: str) -> str | None:
    """The profile to read a page with: ``configured``, or for ``"auto"`` the one
    :func:`detect` finds on it (None: none)."""
    return detect(text) if configured == "auto" else configured


def missing(text: str, names: JmxNames) -> list[str]:
    """The fields of ``names`` whose metric is not on the page (``process_start`` included)."""
    present = metric_names(text)
    return [field for field, name in names.model_dump().items() if name not in present]


#: Why :func:`parse` left a sample out (the label values of
#: ``kafka_replication_collector_samples_dropped_total{reason}``):
DROP_REASONS = (
    "unreadable",  # no number, or a per-partition series without topic or partition
    "not_finite",  # NaN, +Inf, -Inf
    "negative",  # below 0, where an offset, a count or a lag cannot be
    "unknown_lag",  # ConsumerLag's -1: a fetcher that has not fetched yet (Kafka's "unknown")
    "out_of_range",  # at or beyond 2^63: no offset or count of the contract is that large
)
#: Every value read must be in [0, 2^63): the contract's offsets and counts are 64-bit
#: (a float compares exactly with it; the largest float below is 2^63 - 1024).
_BOUND = float(INT64_MAX + 1)


def _unusable(value: float, lag: bool) -> str:
    """Why ``value`` (outside [0, 2^63)) cannot be read; ``lag``: a fetcher's lag.

    >>> _unusable(float("inf"), False), _unusable(-1.0, True), _unusable(2.0**64, False)
    ('not_finite', 'unknown_lag', 'out_of_range')
    """
    if not math.isfinite(value):
        return "not_finite"
    if value < 0:
        return "unknown_lag" if lag and value == -1 else "negative"
    return "out_of_range"


@dataclass
class BrokerScrape:
    """What one broker said about its own replicas and itself."""

    leo: dict[tuple[str, int], int] = field(default_factory=dict)
    log_start: dict[tuple[str, int], int] = field(default_factory=dict)
    fetch_lag: dict[tuple[str, int], int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    #: When the broker's JVM started, ms since the epoch (None: not exported).
    started_at: int | None = None
    #: The samples of the needed series left out, by reason (:data:`DROP_REASONS`).
    dropped: Counter[str] = field(default_factory=Counter)


#: The largest page read by default (``jmx_max_bytes``): with this project's rules a page
#: is about 220 bytes a replica (2.2 MB for 10k, ``bench.jmx_parse_bench``'s page); one
#: exporting every Kafka MBean is several times that. Far above both, and still a bound.
MAX_PAGE_BYTES = 64 * 1024 * 1024


_USER_AGENT = f"kafka-replication-monitor/{__version__}"


class PageError(Exception):
    """An exporter page that could not be read: too large, or an answer other than 200."""


class _DeadlineSocket:
    """A connected socket whose every send and receive gets only the time left before
    ``deadline`` (``time.monotonic()``): a peer sending a byte at a time, each well within
    a per-read timeout, cannot stretch the exchange past it. Holds what
    :class:`http.client.HTTPConnection` calls on its socket."""

    def __init__(self, sock: socket.socket, deadline: float, timeout_s: float) -> None:
        self.sock = sock
        self._deadline = deadline
        self._timeout_s = timeout_s

    def left(self) -> float:
        """The seconds left; :class:`TimeoutError` when none are."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"page not read within {self._timeout_s:g} s")
        return left

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(self.left())
        self.sock.sendall(data)

    def recv_into(self, buffer: memoryview) -> int:
        self.sock.settimeout(self.left())
        return self.sock.recv_into(buffer)

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self))

    def close(self) -> None:
        """Nothing: http.client closes its socket as soon as an answer's headers say the
        connection ends, handing it to the response, which still reads the body;
        :func:`fetch` closes it after."""


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: _DeadlineSocket) -> None:
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        return self._sock.recv_into(buffer)


def fetch(url: str, timeout_s: float, max_bytes: int = MAX_PAGE_BYTES) -> str:
    """GET an exporter page: all of it within ``timeout_s`` (connecting, the TLS handshake,
    the request, the headers and the body: a deadline, not a timeout per read; the name's
    DNS lookup aside) and at most ``max_bytes`` of it.

    Raises :class:`TimeoutError` past the deadline, :class:`PageError` for a page too large
    or an answer other than 200, :class:`OSError` or :class:`http.client.HTTPException`
    for the connection. Plain HTTP, or HTTPS verified against the system's CAs; like
    Prometheus, no proxy from the environment.
    """
    deadline = time.monotonic() + timeout_s
    parts = urllib.parse.urlsplit(url)
    host, https = parts.hostname or "", parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    guard: _DeadlineSocket | None = None
    try:
        guard = _DeadlineSocket(
            socket.create_connection((host, port), timeout=timeout_s), deadline, timeout_s
        )
        if https:  # the handshake's timeout is one deadline for all of it (Python >= 3.5)
            guard.sock.settimeout(guard.left())
            guard.sock = ssl.create_default_context().wrap_socket(guard.sock, server_hostname=host)
        conn = http.client.HTTPConnection(host, port)  # speaks HTTP over the guarded socket
        conn.sock = guard
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("GET", path, headers={"User-Agent": _USER_AGENT})
        resp = conn.getresponse()
        if resp.status != 200:
            raise PageError(f"HTTP {resp.status} {resp.reason}")
        declared = resp.getheader("Content-Length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise PageError(f"a page of {declared} bytes: over jmx_max_bytes ({max_bytes})")
        body = bytearray()
        while chunk := resp.read(64 * 1024):
            body += chunk
            if len(body) > max_bytes:
                raise PageError(f"a page over jmx_max_bytes ({max_bytes} bytes)")
    except TimeoutError:  # the guard's, or a socket operation's that outlived the time left
        raise TimeoutError(f"page not read within {timeout_s:g} s") from None
    finally:
        if guard is not None:
            guard.sock.close()
    return body.decode("utf-8", errors="replace")


def parse(text: str, names: JmxNames) -> BrokerScrape:
    """Pick the needed series out of an exposition-format page.

    Never raises on a value: a sample that is not a number, not finite, negative or at or
    beyond 2^63 is left out (never clamped) and counted in ``dropped``.

    >>> s = parse('kafka_log_log_end_offset{topic="t",partition="0"} +Inf\\n', JmxNames())
    >>> s.leo, dict(s.dropped)
    ({}, {'not_finite': 1})
    """
    out = BrokerScrape()
    dropped, fetch_lag, bound = out.dropped, out.fetch_lag, _BOUND  # locals: the hot loop
    per_partition = {
        names.log_end_offset: out.leo,
        names.log_start_offset: out.log_start,
        names.fetcher_lag: fetch_lag,
    }
    scalars = {
        names.isr_shrinks: "isr_shrinks_total",
        names.isr_expands: "isr_expands_total",
        names.under_replicated: "under_replicated_partitions",
        names.active_controller: "active_controller",
        names.unclean_elections: "unclean_elections_total",
    }
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        space = line.rfind(" ")
        name = line[:brace] if brace > 0 else line[:space]
        target = per_partition.get(name)
        if target is not None and brace > 0:
            labels = dict(_LABEL.findall(line[brace : line.rfind("}")]))
            lag = target is fetch_lag
            if lag and any(labels.get(c, "").startswith(_NOT_A_FOLLOWER) for c in _CLIENT_LABELS):
                continue
            try:
                key = (labels["topic"], int(labels["partition"]))
                value = float(line[space + 1 :])
            except (KeyError, ValueError):
                dropped["unreadable"] += 1
                continue
            if 0.0 <= value < bound:  # False for NaN too
                target[key] = int(value)
            else:
                dropped[_unusable(value, lag)] += 1
        elif name in scalars:
            try:
                value = float(line[space + 1 :])
            except ValueError:
                dropped["unreadable"] += 1
                continue
            if 0.0 <= value < bound:
                out.counters[scalars[name]] = int(value)
            else:
                dropped[_unusable(value, False)] += 1
        elif name == names.process_start:
            try:
                value = float(line[space + 1 :]) * 1000
            except ValueError:
                dropped["unreadable"] += 1
                continue
            if 0.0 <= value < bound:
                out.started_at = round(value)
            else:
                dropped[_unusable(value, False)] += 1
    return out
