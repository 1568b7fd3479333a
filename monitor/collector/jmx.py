"""Reading a broker's JMX exporter endpoint (Prometheus text format).

Only the few metric families the collector needs are parsed: a broker with 10,000
replicas exposes tens of thousands of series and the generic parser would spend most of a
collection round on ones we drop. They are read in bulk, as the exporter prints them
(:func:`parse`: a pattern over each family's block of lines, each family's values
converted at once), and any page of another shape line by line (:func:`parse_lines`),
with the same result.

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

import base64
import functools
import http.client
import io
import itertools
import math
import operator
import os
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from monitor import __version__
from monitor.connection import read_secret_file
from monitor.contract.events import INT64_MAX

#: One label of a sample, matched where it must begin (never searched for: an unclosed
#: label fails once, in time linear in its length -- a search from every position was
#: quadratic, 12 s for an unclosed 40 kB label, holding the interpreter lock). Groups: the
#: name, the value as written (escapes ``\\``, ``\"``, ``\n``), the comma after it.
_LABEL_AT = re.compile(
    r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*(,?)'
)
_ESCAPE = re.compile(r"\\(.)")
#: A timestamp after a sample's value: milliseconds, an integer (the text format's).
_TIMESTAMP = re.compile(r"-?[0-9]+")
#: Integers up to this are exactly what ``float()`` reads of their text.
_EXACT = 2**53


def _unescape(value: str) -> str:
    r"""A label value as the text format writes it, unescaped.

    >>> _unescape(r'a\"b\\c\nd')
    'a"b\\c\nd'
    """
    if "\\" not in value:
        return value
    return _ESCAPE.sub(lambda m: "\n" if m[1] == "n" else m[1], value)


def _sample(line: str) -> tuple[str, dict[str, str] | None, str] | None:
    """A sample line's metric name, labels (None: none) and value text -- the timestamp
    after it checked and let go -- or None for a line that is not one.

    >>> _sample('m{topic="t",partition="0"} 100.0 1700000000000')
    ('m', {'topic': 't', 'partition': '0'}, '100.0')
    >>> _sample('m{topic="t} 1'), _sample("m 1 x"), _sample('m{a="1",a="2"} 1')
    (None, None, None)
    """
    brace = line.find("{")
    if brace < 0:
        parts = line.split()
        labels = None
    else:
        labels = {}
        pos, n = brace + 1, len(line)
        while True:
            while pos < n and line[pos] in " \t":
                pos += 1
            if pos < n and line[pos] == "}":
                break
            m = _LABEL_AT.match(line, pos)
            if m is None or m[1] in labels:
                return None  # unclosed, malformed, or a label twice
            labels[m[1]] = _unescape(m[2])
            pos = m.end()
            if not m[3]:
                while pos < n and line[pos] in " \t":
                    pos += 1
                if pos >= n or line[pos] != "}":
                    return None
                break
        parts = [line[:brace].strip(), *line[pos + 1 :].split()]
    if len(parts) == 3 and _TIMESTAMP.fullmatch(parts[2]):
        parts.pop()
    if len(parts) != 2 or not parts[0]:
        return None
    return parts[0], labels, parts[1]


def _float(text: str) -> float:
    """``float()`` of a value as the text format writes it -- ASCII, no ``_`` and no
    spaces (Python's own ``float()`` reads ``"1_0"`` as 10 and an Arabic-Indic digit as
    its number); ValueError for anything else.

    >>> _float("1.2345678E7"), _float("+Inf")
    (12345678.0, inf)
    """
    if not text.isascii() or "_" in text or text != text.strip():
        raise ValueError(text)
    return float(text)


def _offset(text: str, lag: bool = False) -> int | str:
    """A value that must be a whole number in [0, 2^63) -- an offset, a count, a lag -- as
    an int, or why it cannot be read (a reason of :data:`DROP_REASONS`). Exact: above 2^53
    a float cannot say which integer, so only digits are read there.

    >>> _offset("226.0"), _offset("1.9"), _offset("9007199254740993"), _offset("1e17")
    (226, 'not_integer', 9007199254740993, 'imprecise')
    """
    try:
        f = _float(text)
    except ValueError:
        return "unreadable"
    if not 0.0 <= f < _EXACT:  # False for NaN too
        digits, _, zeros = text.lstrip("+").partition(".")
        if f >= _EXACT and digits.isdigit() and zeros.strip("0") == "":
            exact = int(digits)  # written in digits: exact at any size
            return exact if exact <= INT64_MAX else "out_of_range"
        if not 0.0 <= f < _BOUND:
            return _unusable(f, lag)
        return "imprecise"  # whole, as all floats this large are -- but which one?
    return int(f) if f.is_integer() else "not_integer"


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
    "not_integer",  # an offset, a count or a lag that is not a whole number (1.9)
    "imprecise",  # above 2^53 written as a float (1e17): no telling which integer it is
    "duplicate",  # a series listed twice on the page: each of its samples, none believed
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


#: A replica's readings on its broker's page: (log end, log start, fetcher lag), each None
#: when not read (not on the page, or left out).
Reading = tuple[int | None, int | None, int | None]


class BrokerScrape:
    """What one broker said about its own replicas and itself.

    The replicas whose log end is on the page are kept as columns -- their keys, log ends,
    log starts and lags, in the page's order, each reading None when not read -- as the
    bulk reading makes them (:func:`parse`) and the builders take them (``readings``);
    ``replicas`` is the same as one mapping."""

    def __init__(
        self,
        replicas: dict[tuple[str, int], Reading] | None = None,
        counters: dict[str, int] | None = None,
        started_at: int | None = None,
        dropped: Counter[str] | None = None,
    ) -> None:
        self.keys: list[tuple[str, int]] = []
        self.ends: list[int | None] = []
        self.starts: list[int | None] = []
        self.lags: list[int | None] = []
        #: The readings of partitions whose log end is not on the page (log start, lag).
        self.others: dict[tuple[str, int], Reading] = {}
        self.counters = {} if counters is None else counters
        #: When the broker's JVM started, ms since the epoch (None: not exported).
        self.started_at = started_at
        #: The samples of the needed series left out, by reason (:data:`DROP_REASONS`).
        self.dropped: Counter[str] = Counter() if dropped is None else dropped
        #: Set by :func:`parse` alone: every key is a (str, int), every reading an int in
        #: [0, 2^63) or None -- the contract's range, which the events built from them need
        #: not check again (``build.sort_samples``).
        self.checked = False
        for key, (end, start, lag) in (replicas or {}).items():
            if end is None:
                self.others[key] = (end, start, lag)
            else:
                self.keys.append(key)
                self.ends.append(end)
                self.starts.append(start)
                self.lags.append(lag)

    def readings(self) -> Iterator[tuple[tuple[str, int], int | None, int | None, int | None]]:
        """(key, log end, log start, lag) of each replica whose log end is on the page (the
        log end None: left out), in the page's order."""
        return zip(self.keys, self.ends, self.starts, self.lags, strict=True)

    @property
    def replicas(self) -> dict[tuple[str, int], Reading]:
        """(topic, partition) -> this broker's readings of its replica, in the page's order of
        the log ends, then the partitions with a log start or a lag and no log end read."""
        out = {k: r for k, *r in self.readings() if r != [None, None, None]}
        return {k: (r[0], r[1], r[2]) for k, r in out.items()} | self.others

    def _field(self, i: int) -> dict[tuple[str, int], int]:
        return {k: v for k, r in self.replicas.items() if (v := r[i]) is not None}

    @property
    def leo(self) -> dict[tuple[str, int], int]:
        """The log ends read, by (topic, partition)."""
        return self._field(0)

    @property
    def log_start(self) -> dict[tuple[str, int], int]:
        return self._field(1)

    @property
    def fetch_lag(self) -> dict[tuple[str, int], int]:
        """The followers' lags read (a leader has none)."""
        return self._field(2)

    def has_log_ends(self) -> bool:
        return self.ends.count(None) < len(self.ends)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BrokerScrape):
            return NotImplemented
        return (self.replicas, self.counters, self.started_at, self.dropped) == (
            other.replicas, other.counters, other.started_at, other.dropped
        )  # fmt: skip

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"BrokerScrape(replicas={self.replicas!r}, counters={self.counters!r}, "
            f"started_at={self.started_at!r}, dropped={self.dropped!r})"
        )


#: The largest page read by default (``jmx_max_bytes``): with this project's rules a page
#: is about 220 bytes a replica (2.2 MB for 10k, ``bench.jmx_parse_bench``'s page); one
#: exporting every Kafka MBean is several times that. Far above both, and still a bound.
MAX_PAGE_BYTES = 64 * 1024 * 1024


_USER_AGENT = f"kafka-replication-monitor/{__version__}"


class PageError(Exception):
    """An exporter page that could not be read: too large, an answer other than 200, TLS
    refused, or a credential that could not be read (the message names the setting to
    check, never a secret)."""


#: Where the exporter's secured-page settings are documented, for the lines that name them.
_SECURED_DOC = "docs/collector.md, 'Scraping secured exporter pages'"


def _file_id(path: Path) -> tuple[int, int, int]:
    """What tells a rewritten file (inode, size, modification time); OSError if absent."""
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def _no_key_password() -> bytes:
    """The password callback of a client key: none is taken (as Prometheus, an unencrypted
    PEM key), and OpenSSL must never prompt on the terminal for one."""
    raise ValueError("the key is encrypted: give an unencrypted PEM key")


class PageAccess:
    """How one broker's exporter page is reached beyond a plain GET: the TLS material of an
    ``https://`` page (Prometheus's ``tls_config``: ``ca_file``, ``cert_file``,
    ``key_file``, ``server_name``, ``insecure_skip_verify``) and its credentials -- basic
    auth (``username``, ``password_file``) or an ``Authorization`` header (``auth_type``
    and ``credentials_file``: a bearer token). ``tls_setting`` and ``auth_setting`` name
    the settings they come from, for the errors.

    Holds paths and names, never a secret: each secret is read from its file when a page is
    fetched, again only when the file changed (its inode, size or modification time: a
    rotated Kubernetes secret); the TLS context is built again when one of its files
    changed (a renewed client certificate). Thread-safe: a broker's late page and its next
    one may be read at once."""

    def __init__(
        self,
        *,
        ca_file: Path | None = None,
        cert_file: Path | None = None,
        key_file: Path | None = None,
        server_name: str | None = None,
        insecure_skip_verify: bool = False,
        username: str | None = None,
        password_file: Path | None = None,
        auth_type: str = "Bearer",
        credentials_file: Path | None = None,
        tls_setting: str = "jmx_tls_config",
        auth_setting: str = "jmx_basic_auth",
    ) -> None:
        if (password_file is None) != (username is None):
            raise ValueError("basic auth needs a username and a password file")
        if password_file is not None and credentials_file is not None:
            raise ValueError("give basic auth or an authorization header, not both")
        self.ca_file, self.cert_file, self.key_file = ca_file, cert_file, key_file
        self.server_name = server_name
        self.insecure_skip_verify = insecure_skip_verify
        self.username, self.password_file = username, password_file
        self.auth_type, self.credentials_file = auth_type, credentials_file
        self.tls_setting, self.auth_setting = tls_setting, auth_setting
        self._lock = threading.Lock()
        self._context: tuple[tuple[Any, ...], ssl.SSLContext] | None = None
        self._secret: tuple[tuple[int, int, int], str] | None = None

    def __repr__(self) -> str:
        given = {
            "ca_file": self.ca_file, "cert_file": self.cert_file, "key_file": self.key_file,
            "server_name": self.server_name, "username": self.username,
            "password_file": self.password_file, "credentials_file": self.credentials_file,
        }  # fmt: skip
        shown = ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)
        skip = ", insecure_skip_verify=True" if self.insecure_skip_verify else ""
        return f"PageAccess({shown}{skip})"

    # -- TLS ---------------------------------------------------------------------------

    def _tls_files(self) -> tuple[Any, ...]:
        return tuple(
            None if p is None else _file_id(p)
            for p in (self.ca_file, self.cert_file, self.key_file)
        )

    def _new_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=None if self.ca_file is None else str(self.ca_file))
        if self.insecure_skip_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file is not None:
            ctx.load_cert_chain(self.cert_file, self.key_file, password=_no_key_password)
        return ctx

    def tls_problem(self) -> str | None:
        """Why the TLS files cannot be used (None: they can): for the settings' check."""
        try:
            self._new_context()
        except (OSError, ValueError) as e:
            return self._files_problem(e)
        return None

    def _files_problem(self, e: BaseException) -> str:
        reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or str(e)
        if isinstance(e, ValueError):  # _no_key_password's
            return f"{self.tls_setting}.key_file: {reason}"
        files = [f"{name} {path}" for name, path in
                 (("ca_file", self.ca_file), ("cert_file", self.cert_file),
                  ("key_file", self.key_file)) if path is not None]  # fmt: skip
        return f"{self.tls_setting}: cannot load {', '.join(files)} as PEM: {reason}"

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context (the same one until one of its files changes)."""
        with self._lock:
            try:
                key = self._tls_files()
                if self._context is None or self._context[0] != key:
                    self._context = (key, self._new_context())
            except (OSError, ValueError) as e:
                raise PageError(self._files_problem(e)) from None
            return self._context[1]

    def tls_rejected(self, e: ssl.SSLError) -> str:
        """What a failed TLS exchange means, and which setting to look at."""
        tls = self.tls_setting
        if isinstance(e, ssl.SSLCertVerificationError):
            said = e.verify_message or e.reason or "not trusted"
            if "mismatch" in said:
                hint = f"set {tls}.server_name to a name the certificate holds"
            elif self.ca_file is None:
                hint = f"set {tls}.ca_file to the CA that signed the exporter's certificate"
            else:
                hint = f"is {tls}.ca_file ({self.ca_file}) the CA that signed it?"
            return f"TLS: the exporter's certificate is not trusted ({said}): {hint}"
        reason = str(e.reason or e)
        # A refused client certificate is an alert, or (as Python's own server does) the
        # connection closed at the handshake's end: an EOF.
        closed = isinstance(e, ssl.SSLEOFError) or "EOF" in reason
        if "CERTIFICATE_REQUIRED" in reason or (
            self.cert_file is None and ("HANDSHAKE_FAILURE" in reason or closed)
        ):
            hint = (
                f"the exporter requires a client certificate: set {tls}.cert_file and key_file"
                if not closed
                else "the exporter closed the connection: if it requires a client certificate, "
                f"set {tls}.cert_file and key_file"
            )
        elif "WRONG_VERSION_NUMBER" in reason:
            hint = "is the page plain HTTP? use http://"
        elif self.cert_file is not None and (
            closed
            or any(w in reason for w in ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN"))
        ):
            hint = (
                f"the exporter does not accept the client certificate {tls}.cert_file "
                f"({self.cert_file})"
            )
        else:
            hint = f"check {tls}"
        return f"TLS refused: {reason}: {hint}"

    # -- credentials ---------------------------------------------------------------------

    def credentials(self) -> str | None:
        """How the credentials are given, for messages (no secret)."""
        if self.password_file is not None:
            return f"user {self.username!r}, the password in {self.password_file}"
        if self.credentials_file is not None:
            return f"{self.auth_type} credentials in {self.credentials_file}"
        return None

    def authorization(self) -> str | None:
        """The ``Authorization`` header's value (None: no credentials); :class:`PageError`
        naming the setting and the file -- never its content -- when it cannot be read."""
        path = self.password_file or self.credentials_file
        if path is None:
            return None
        setting = self.auth_setting + (
            ".password_file" if self.password_file is not None else ".credentials_file"
        )
        with self._lock:
            try:
                key = _file_id(path)
                if self._secret is None or self._secret[0] != key:
                    self._secret = (key, read_secret_file(path, setting).get_secret_value())
            except OSError as e:
                raise PageError(f"{setting}: cannot read {path}: {e.strerror or e}") from None
            except ValueError as e:  # read_secret_file's: names the setting and the file
                raise PageError(str(e)) from None
            secret = self._secret[1]
        if self.password_file is not None:
            pair = f"{self.username}:{secret}".encode()
            return "Basic " + base64.b64encode(pair).decode("ascii")
        if not (secret.isascii() and secret.isprintable()) or " " in secret:
            raise PageError(
                f"{setting}: the token in {path} holds a space or a character outside "
                "printable ASCII: a token is one word"
            )
        return f"{self.auth_type} {secret}"

    def refused(self, status: int, reason: str) -> str:
        """The line for a 401 or 403 answer: which setting to check."""
        given = self.credentials()
        if status == 401 and given is None:
            return (
                f"HTTP 401 {reason}: the exporter asks for credentials -- set jmx_basic_auth "
                f"or jmx_authorization ({_SECURED_DOC})"
            )
        if status == 401:
            return (
                f"HTTP 401 {reason}: the credentials were refused -- check {self.auth_setting} "
                f"({given})"
            )
        shown = f" ({given})" if given else ""
        return (
            f"HTTP 403 {reason}: not allowed to read the page -- check {self.auth_setting}{shown}"
        )


#: How a page without settings of its own is reached: system CAs, no credentials.
_PLAIN = PageAccess()


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


def fetch(
    url: str, timeout_s: float, max_bytes: int = MAX_PAGE_BYTES, access: PageAccess | None = None
) -> str:
    """GET an exporter page: all of it within ``timeout_s`` (connecting, the TLS handshake,
    the request, the headers and the body: a deadline, not a timeout per read; the name's
    DNS lookup aside) and at most ``max_bytes`` of it.

    ``access``: the page's TLS settings and credentials (:class:`PageAccess`); None: plain
    HTTP, or HTTPS verified against the system's CAs, no credentials. Like Prometheus: no
    proxy from the environment, no redirect followed (the credentials go to the URL given,
    nowhere else).

    Raises :class:`TimeoutError` past the deadline, :class:`PageError` for a page too large,
    an answer other than 200, a TLS exchange refused or a credential that cannot be read
    (each naming the setting to check), :class:`OSError` or
    :class:`http.client.HTTPException` for the connection.
    """
    deadline = time.monotonic() + timeout_s
    parts = urllib.parse.urlsplit(url)
    host, https = parts.hostname or "", parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    how = _PLAIN if access is None else access
    headers = {"User-Agent": _USER_AGENT}
    authorization = how.authorization()  # before connecting: a missing file costs nothing
    if authorization is not None:
        headers["Authorization"] = authorization
    guard: _DeadlineSocket | None = None
    try:
        context = how.ssl_context() if https and access is not None else None
        guard = _DeadlineSocket(
            socket.create_connection((host, port), timeout=timeout_s), deadline, timeout_s
        )
        if https:  # the handshake's timeout is one deadline for all of it (Python >= 3.5)
            guard.sock.settimeout(guard.left())
            context = context or ssl.create_default_context()
            guard.sock = context.wrap_socket(guard.sock, server_hostname=how.server_name or host)
        conn = http.client.HTTPConnection(host, port)  # speaks HTTP over the guarded socket
        conn.sock = guard
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        if resp.status in (401, 403):
            raise PageError(how.refused(resp.status, resp.reason))
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
    except ssl.SSLError as e:  # the handshake's, or (TLS 1.3) a client certificate refused
        raise PageError(how.tls_rejected(e)) from None
    finally:
        if guard is not None:
            guard.sock.close()
    return body.decode("utf-8", errors="replace")


class _Lines:
    """The reading of one line of a page, as :func:`parse_lines` reads every line (the
    reference :func:`parse` agrees with); :meth:`scrape` gives what they read."""

    def __init__(self, names: JmxNames, out: BrokerScrape) -> None:
        self.out = out
        self.leo: dict[tuple[str, int], int] = {}
        self.log_start: dict[tuple[str, int], int] = {}
        self.fetch_lag: dict[tuple[str, int], int] = {}
        self.per_partition = {
            names.log_end_offset: self.leo,
            names.log_start_offset: self.log_start,
            names.fetcher_lag: self.fetch_lag,
        }
        self.scalars = {
            names.isr_shrinks: "isr_shrinks_total",
            names.isr_expands: "isr_expands_total",
            names.under_replicated: "under_replicated_partitions",
            names.active_controller: "active_controller",
            names.unclean_elections: "unclean_elections_total",
        }
        self.process_start = names.process_start
        self.counters: dict[str, int] = {}
        self.starts: dict[str, int] = {}
        #: Keys read twice, and keys whose one value could not be read, by family.
        self.twice: dict[int, set[Any]] = {}
        self.unread: dict[int, set[Any]] = {}

    def read(self, line: str) -> None:
        if not line or line[0] == "#":
            return
        # The family: the name up to "{" or a space (as the bulk reading finds its lines).
        brace, space = line.find("{"), line.find(" ")
        cut = brace if brace > 0 and (space < 0 or brace < space) else space
        head = line[:cut] if cut > 0 else ""
        target = self.per_partition.get(head)
        scalar = self.scalars.get(head)
        if target is None and scalar is None and head != self.process_start:
            return  # a family nobody reads (or no value at all): not parsed
        dropped = self.out.dropped
        sample = _sample(line)
        if sample is None:
            if target is self.fetch_lag and _NOT_A_FOLLOWER in line:
                return  # a log-directory move's fetcher, whatever its value: not read
            dropped["unreadable"] += 1
            return
        name, labels, text = sample
        if target is not None and labels is not None:
            lag = target is self.fetch_lag
            if lag and any(labels.get(c, "").startswith(_NOT_A_FOLLOWER) for c in _CLIENT_LABELS):
                return
            partition = labels.get("partition", "")
            if "topic" not in labels or not (partition.isascii() and partition.isdigit()):
                dropped["unreadable"] += 1
                return
            self._take(target, (labels["topic"], int(partition)), _offset(text, lag))
        elif scalar is not None:
            self._take(self.counters, scalar, _offset(text))
        elif name == self.process_start:
            try:
                value = _float(text) * 1000
            except ValueError:
                dropped["unreadable"] += 1
                return
            if 0.0 <= value < _BOUND:
                self._take(self.starts, name, round(value))
            else:
                dropped[_unusable(value, False)] += 1
        # else: a per-partition family's series without labels -- no replica's: not read

    def _take(self, into: dict[Any, int], key: Any, value: int | str) -> None:
        """``value`` (or why it cannot be read) for ``key``; a key read twice is a series
        listed twice -- both dropped, counted, and any later one too: never last-wins."""
        dropped = self.out.dropped
        if key in self.twice.get(id(into), ()):
            dropped["duplicate"] += 1
            return
        if key in into or key in self.unread.get(id(into), ()):
            dropped["duplicate"] += 2 if key in into else 1
            into.pop(key, None)
            self.twice.setdefault(id(into), set()).add(key)
            return
        if isinstance(value, str):
            dropped[value] += 1
            self.unread.setdefault(id(into), set()).add(key)
            return
        into[key] = value

    def scalars_read(self) -> None:
        """Into the scrape: the counters and the JVM's start read (once all lines are)."""
        self.out.counters.update(self.counters)
        if self.process_start in self.starts:
            self.out.started_at = self.starts[self.process_start]

    def scrape(self) -> BrokerScrape:
        """The scrape, its replicas' readings gathered from the families read."""
        leo, start, lag, out = self.leo, self.log_start, self.fetch_lag, self.out
        self.scalars_read()
        out.keys, out.ends = list(leo), list(leo.values())
        out.starts = list(map(start.get, leo))
        out.lags = list(map(lag.get, leo))
        for key in [*start, *lag]:
            if key not in leo:
                out.others[key] = (None, start.get(key), lag.get(key))
        out.checked = True  # keys (str, int(...)), values int() of floats in range
        return out


def parse_lines(text: str, names: JmxNames) -> BrokerScrape:
    """:func:`parse`, one line at a time: the reference (what :func:`parse` must give for
    every page), and how a page that cannot be read in bulk is read."""
    lines = _Lines(names, BrokerScrape())
    for line in _lines_of(text):
        lines.read(line)
    return lines.scrape()


#: The text split into lines a piece of about this many characters at a time: one call of
#: ``splitlines`` on a 50 MB page held the interpreter 60 ms (the round loop with it).
_PIECE = 256 * 1024


def _lines_of(text: str) -> Iterator[str]:
    """``text.splitlines()``, a piece at a time (each piece ends after a ``\n``), so that
    a page reader's thread lets the round loop run between pieces."""
    at, n = 0, len(text)
    while at < n:
        end = text.find("\n", at + _PIECE)
        end = n if end < 0 else end + 1
        yield from text[at:end].splitlines()
        at = end


#: Line breaks ``str.splitlines`` knows besides ``\n``: a page holding one is read line by
#: line (:func:`parse_lines`), as the bulk reading splits at ``\n`` only.
_OTHER_BREAKS_ASCII = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")
_OTHER_BREAKS = ("\x85", "\u2028", "\u2029")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
#: A log end's line as the exporter prints it: labels sorted (as the Prometheus Java client
#: writes them; a trailing comma, as its 0.x versions did), ``partition`` in digits without a
#: leading zero (one way to write a partition), ``topic`` without quotes, backslashes or
#: line breaks; then the value, nothing after it. Groups: the labels' text (which the log
#: start's and the lag's lines of the replica share), the partition, the topic, the value.
_LOG_END = r'(partition="(0|[1-9][0-9]*)",topic="([^"\\\n]*)",?)\} ([^ \n]*)$'
#: The other two families' lines: the labels' text (a lag's after its client id), the
#: value -- what follows the last "} " (a value with a space in it: line by line). Loose,
#: as their labels count only as a log end's (else :data:`_KEY` reads them).
_OTHER = r"(.*)\} (.*)"
#: The same, but the value alone.
_VALUE = r".*\} (.*)"
_CLIENT = "(?:" + "|".join(_CLIENT_LABELS) + ")="
_KEY = re.compile(r'partition="(0|[1-9][0-9]*)",topic="([^"\\\n]*)",?')


@dataclass(frozen=True)
class _Bulk:
    """How to read a profile's page in bulk: per family, the start of its lines and the
    pattern of its samples (the log starts': also their values alone; the fetcher's lag:
    with the client id, and without); the start of the lines of the broker's counters and
    of the JVM's start."""

    heads: tuple[str, str, str]
    leo: re.Pattern[str]
    log_start: re.Pattern[str]
    log_start_values: re.Pattern[str]
    lag: re.Pattern[str]
    lag_clients: re.Pattern[str]
    #: "\n" and the name of each counter and of the JVM's start, grouped by what they
    #: begin with (:func:`_by_prefix`): one search of the page per group, not per name.
    others: tuple[tuple[str, tuple[str, ...]], ...]


def _by_prefix(heads: Iterable[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    r"""``heads`` grouped by their first two ``_``-separated parts (``"\nkafka_server_..."``),
    each group with what all its heads begin with, and its heads.

    A page is searched once for each group's prefix instead of once for each name: a
    broker's counters share few prefixes, and each search walks the megabytes of the
    families read by no one (the lab's page at 10k partitions, every Kafka MBean: 8.4 MB, 5
    MB of it before the log ends). ``jmx.parse`` of that page: 3.75 -> 3.40 µs a replica
    (``bench.jmx_parse_bench --page``, docs/collector.md). The prefix is the group's
    longest common one, so that it matches as few other families' lines as may be; each
    line it matches is still checked against each head of the group (``_parse_bulk``).

    >>> _by_prefix(["\nkafka_server_rm_a", "\nkafka_server_rm_b", "\nup"])
    (('\nkafka_server_rm_', ('\nkafka_server_rm_a', '\nkafka_server_rm_b')), ('\nup', ('\nup',)))
    """
    groups: dict[str, list[str]] = {}
    for head in heads:
        groups.setdefault("_".join(head.split("_")[:2]), []).append(head)
    # commonprefix: the characters all of a group's heads begin with (not a path's parts).
    prefixes = [os.path.commonprefix(group) for group in groups.values()]  # noqa: RUF071
    return tuple(zip(prefixes, map(tuple, groups.values()), strict=True))


@functools.lru_cache(maxsize=64)
def _bulk(names: JmxNames) -> _Bulk | None:
    """How to read a page of ``names`` in bulk; None when its names do not allow it (not
    metric names, or one name for two fields: then line by line)."""
    every = list(names.model_dump().values())
    if len(set(every)) != len(every) or not all(_METRIC_NAME.fullmatch(n) for n in every):
        return None
    heads = tuple(
        "\n" + n + "{" for n in (names.log_end_offset, names.log_start_offset, names.fetcher_lag)
    )
    leo, start, lag = (re.escape(h) for h in heads)
    others = (
        names.isr_shrinks,
        names.isr_expands,
        names.under_replicated,
        names.active_controller,
        names.unclean_elections,
        names.process_start,
    )
    return _Bulk(
        heads=heads,  # type: ignore[arg-type]
        leo=re.compile(leo + _LOG_END, re.M),
        log_start=re.compile(start + _OTHER),
        log_start_values=re.compile(start + _VALUE),
        lag=re.compile(lag + _CLIENT + r'"[^"\\\n]*",' + _OTHER),
        lag_clients=re.compile(lag + _CLIENT + r'"([^"\\\n]*)",' + _OTHER),
        others=_by_prefix("\n" + name for name in others),
    )


class _Irregular(Exception):
    """A page :func:`parse` does not read in bulk."""


def parse(text: str, names: JmxNames) -> BrokerScrape:
    """Pick the needed series out of an exposition-format page.

    Never raises on a value: a sample that is not a number, not finite, negative or at or
    beyond 2^63 is left out (never clamped) and counted in ``dropped``.

    Read in bulk, as the exporter prints a page: each per-partition family's lines (one
    block: the exposition format groups a family's lines) with one pattern, the three
    series of a replica joined by their labels' text, the counters' lines by text search.
    A page with a line of another shape in those families (labels in another order or with
    others beside them, a partition written another way, escapes, a timestamp, a series
    twice...) or with line breaks other than ``\\n`` is read line by line
    (:func:`parse_lines`): the result is always the same as :func:`parse_lines`'s.

    >>> s = parse('kafka_log_log_end_offset{topic="t",partition="0"} +Inf\\n', JmxNames())
    >>> s.leo, dict(s.dropped)
    ({}, {'not_finite': 1})
    """
    bulk = _bulk(names)
    if (
        bulk is None
        or any(c in text for c in _OTHER_BREAKS_ASCII)
        or (not text.isascii() and any(c in text for c in _OTHER_BREAKS))
    ):
        return parse_lines(text, names)
    # Every line read after a line break: a page whose first line is a sample of a family
    # read gets one before it (a copy of the page).
    # (Prepended only when the first line is a sample of a family read: a copy of a 50 MB
    # page held the interpreter 23 ms.)
    first = text[: text.find("\n") + 1 or len(text)]
    ours = (h[1:] for h in (*bulk.heads, *(n for _, g in bulk.others for n in g)))
    page = "\n" + text if any(first.startswith(h) for h in ours) else text
    try:
        return _parse_bulk(page, names, bulk)
    except _Irregular:
        return parse_lines(text, names)


#: Partition numbers as a page writes them (digits, no leading zero) and their ints: read
#: once, the same int objects round after round. Bounded: a page may write any number.
_PARTITIONS: dict[str, int] = {}


def _partitions(texts: list[str]) -> list[int]:
    """``int()`` of each text (of digits)."""
    ints = list(map(_PARTITIONS.get, texts))
    if None in ints:
        if len(_PARTITIONS) > 100_000:
            _PARTITIONS.clear()
        for text in set(texts).difference(_PARTITIONS):
            _PARTITIONS[text] = int(text)
        return list(map(int, texts))
    return ints  # type: ignore[return-value]  # no None in it


def _findall(pattern: re.Pattern[str], page: str, start: int, end: int) -> list[Any]:
    """``pattern.findall(page, start, end)`` a piece at a time (:data:`_PIECE`; each piece
    ends before a ``\n``, where a family's line begins): one search of a 50 MB family block
    held the interpreter -- and the round loop -- for the whole of it."""
    if end - start <= _PIECE:
        return pattern.findall(page, start, end)
    out: list[Any] = []
    while start < end:
        cut = page.find("\n", start + _PIECE, end)
        cut = end if cut < 0 else cut
        out += pattern.findall(page, start, cut)
        start = cut
    return out


def _count(page: str, sub: str, start: int, end: int) -> int:
    """``page.count(sub, start, end)`` a piece at a time (``sub`` begins with ``\n``, so a
    piece ending before a ``\n`` cuts none of its occurrences)."""
    n = 0
    while end - start > _PIECE:
        cut = page.find("\n", start + _PIECE, end)
        if cut < 0:
            break
        n += page.count(sub, start, cut)
        start = cut
    return n + page.count(sub, start, end)


def _find(page: str, sub: str, last: bool = False) -> int:
    """``page.find(sub)`` (``rfind`` with ``last``) a piece at a time: a family not on a
    50 MB page was looked for in one call of 27 ms, the round loop held all along."""
    n, step = len(page), _PIECE
    if n <= step:
        return page.rfind(sub) if last else page.find(sub)
    overlap = len(sub) - 1
    if last:
        for end in range(n, 0, -step):
            at = page.rfind(sub, max(0, end - step - overlap), end)
            if at >= 0:
                return at
        return -1
    for start in range(0, n, step):
        at = page.find(sub, start, start + step + overlap)
        if at >= 0:
            return at
    return -1


def _block(page: str, head: str) -> tuple[int, int, int]:
    """Where a family's lines are -- from its first to the end of its last -- and how many
    lines that is, the family's and any other's (0, 0, 0: none of the family's)."""
    first = _find(page, head)
    if first < 0:
        return 0, 0, 0
    end = page.find("\n", _find(page, head, last=True) + 1)
    end = len(page) if end < 0 else end
    return first, end, _count(page, "\n", first, end)


def _all_read(page: str, head: str, block: tuple[int, int, int], read: int) -> bool:
    """Whether ``read`` lines are all the family's in ``block`` (its lines, and others'
    amid them: a page whose families are not each one block)."""
    first, end, lines = block
    return read == lines or read == _count(page, head, first, end)


#: A value's text without its last two characters (its ".0").
_DIGITS = operator.itemgetter(slice(None, -2))
#: Where a replica's series is not on the page (a leader's lag), in a joined column.
_ABSENT = object()


def _values(texts: list[str], lag: bool, dropped: Counter[str]) -> tuple[list[int | None], bool]:
    """Each text's value as :meth:`_Lines.read` reads it -- None for one left out (counted
    in ``dropped``) -- and whether any was. All at once (C loops) when every one is a
    number in [0, 2^63); else one at a time."""
    if not texts:
        return [], False
    joined = "\n".join(texts)
    strict = joined.isascii() and "_" not in joined  # what _float reads as float() does
    if strict and joined.count(".0\n") == len(texts) - 1 and joined.endswith(".0"):
        # Each ends with ".0" -- as Java prints an integral double under 10^7: a log start,
        # a lag. int() of the digits is float()'s value while under 2^53 (exactly
        # represented), and takes half the time.
        try:
            ints = list(map(int, map(_DIGITS, texts)))
        except ValueError:
            ints = None
        if ints is not None and min(ints) >= 0 and max(ints) < _EXACT:
            return ints, False  # type: ignore[return-value]  # list[int] is list[int | None]
    try:
        floats = list(map(float, texts)) if strict else None
    except ValueError:
        floats = None
    if floats is not None:
        total = sum(floats)  # NaN if one is
        if total == total and min(floats) >= 0.0 and max(floats) < _EXACT:
            ints = list(map(int, floats))
            if ints == floats:  # each a whole number (int == float compares the value)
                return ints, False  # type: ignore[return-value]  # list[int | None]
    values: list[int | None] = []
    for text in texts:
        value = _offset(text, lag)
        if isinstance(value, str):
            dropped[value] += 1
            values.append(None)
        else:
            values.append(value)
    return values, True


def _joined(
    rows: list[tuple[str, str]], labels: list[str], lag: bool, dropped: Counter[str]
) -> tuple[list[Any], int]:
    """The values of ``rows`` (labels' text, value) in the order of ``labels`` (None: left
    out, :data:`_ABSENT`: not on the page), and how many rows that took."""
    values, _ = _values(list(map(operator.itemgetter(1), rows)), lag, dropped)
    by_labels = dict(zip(map(operator.itemgetter(0), rows), values, strict=True))
    if len(by_labels) != len(rows):  # a series twice
        raise _Irregular
    column = list(map(by_labels.get, labels, itertools.repeat(_ABSENT)))
    taken = len(column) - column.count(_ABSENT)
    return column, taken


def _rebuilt(page: str, head: str, labels: list[str], texts: list[str], at: int, end: int) -> bool:
    """Whether the lines from ``at`` to ``end`` are ``head``, the labels, ``"} "`` and the
    value, in turn: the family's series in the order of ``labels``, one each."""
    parts: list[str] = [""] * (4 * len(texts))
    parts[0::4] = itertools.repeat(head, len(texts))
    parts[1::4] = labels
    parts[2::4] = itertools.repeat("} ", len(texts))
    parts[3::4] = texts
    rebuilt = "".join(parts)
    return len(rebuilt) == end - at and page.startswith(rebuilt, at)


def _parse_bulk(page: str, names: JmxNames, bulk: _Bulk) -> BrokerScrape:
    """:func:`parse` of ``page`` (every line after a line break: its first a comment, or
    none); raises :class:`_Irregular` for a page it cannot read so.

    A replica's three series are joined by their labels' text, each family's values read at
    once. The exporter lists a family's series sorted by their labels: the log starts come
    in the log ends' order when every replica has both -- then their block is the log ends'
    labels with their values, and their values are taken in turn; else they are looked up,
    as the lags (sorted by client id first) are. Each family in turn, its matches let go as
    soon as read: the next one's reuse their memory (fresh memory costs page faults)."""
    out = BrokerScrape()
    dropped = out.dropped
    blocks = [_block(page, head) for head in bulk.heads]
    (leo_at, leo_end, _), (ls_at, ls_end, _), (lag_at, lag_end, _) = blocks
    first, second = operator.itemgetter(0), operator.itemgetter(1)
    # The log ends: every line of the family of the one shape read here.
    ends = _findall(bulk.leo, page, leo_at, leo_end)
    if not _all_read(page, bulk.heads[0], blocks[0], len(ends)):
        raise _Irregular
    labels = list(map(first, ends))
    # Each topic interned: the same object as the metadata's (admin._from_dict), whose
    # partitions' samples are looked up by these keys.
    topics = map(sys.intern, map(operator.itemgetter(2), ends))
    keys = list(zip(topics, _partitions(list(map(second, ends))), strict=True))
    end_values, _ = _values(list(map(operator.itemgetter(3), ends)), False, dropped)
    del ends
    # The log starts.
    start_texts = _findall(bulk.log_start_values, page, ls_at, ls_end)
    if not _all_read(page, bulk.heads[1], blocks[1], len(start_texts)) or " " in "\n".join(
        start_texts
    ):
        raise _Irregular
    starts: list[Any]
    start_rows: list[tuple[str, str]] = []
    if len(start_texts) == len(labels) and _rebuilt(
        page, bulk.heads[1], labels, start_texts, ls_at, ls_end
    ):
        starts, _ = _values(start_texts, False, dropped)
        taken = len(starts)
    else:
        start_rows = _findall(bulk.log_start, page, ls_at, ls_end)
        starts, taken = _joined(start_rows, labels, False, dropped)
    n_starts = len(start_texts)
    del start_texts
    # The followers' lags.
    if page.find(_NOT_A_FOLLOWER, lag_at, lag_end) >= 0:  # a move between log directories
        with_clients = _findall(bulk.lag_clients, page, lag_at, lag_end)
        n = len(with_clients)
        lag_rows = [(k, v) for c, k, v in with_clients if not c.startswith(_NOT_A_FOLLOWER)]
        del with_clients
    else:
        lag_rows = _findall(bulk.lag, page, lag_at, lag_end)
        n = len(lag_rows)
    if not _all_read(page, bulk.heads[2], blocks[2], n) or " " in "".join(map(second, lag_rows)):
        raise _Irregular
    lags, lags_taken = _joined(lag_rows, labels, True, dropped)
    if taken != len(starts):
        starts = [None if v is _ABSENT else v for v in starts]
    if lags_taken != len(lags):
        lags = [None if v is _ABSENT else v for v in lags]
    # No partition twice: the exporter's series sorted by their labels, as they are read
    # here (else a set of them tells).
    if not all(map(operator.lt, labels, itertools.islice(labels, 1, None))) and len(
        set(labels)
    ) != len(labels):
        raise _Irregular
    out.keys, out.ends, out.starts, out.lags = keys, end_values, starts, lags
    if taken != n_starts or lags_taken != len(lag_rows):
        _without_log_end(start_rows, lag_rows, set(labels), out)
    # The counters and the JVM's start: each line that starts with one's name and "{" or " "
    # (a few: found by text search, no pattern tried on every line), outside the blocks that
    # hold only their family's lines.
    gaps, at = [], 0
    for (block_at, end_at, in_block), read in sorted(
        zip(blocks, (len(labels), n_starts, n), strict=True)
    ):
        if in_block and read == in_block and block_at >= at:
            gaps.append((at, block_at))
            at = end_at
    gaps.append((at, len(page)))
    lines = _Lines(names, out)
    for prefix, heads in bulk.others:
        for start, stop in gaps:
            at = page.find(prefix, start, stop)
            while at >= 0:
                end = page.find("\n", at + 1)
                end = len(page) if end < 0 else end
                for head in heads:
                    after = at + len(head)
                    if page.startswith(head, at) and page[after : after + 1] in ("{", " "):
                        lines.read(page[at + 1 : end])
                at = page.find(prefix, end, stop)
    lines.scalars_read()
    out.checked = True  # keys (interned str, int), values from _values or int() of digits
    return out


def _without_log_end(
    start_rows: list[tuple[str, str]],
    lag_rows: list[tuple[str, str]],
    ends: set[str],
    out: BrokerScrape,
) -> None:
    """Into ``out.others``: the log starts and lags of partitions whose log end is not on
    the page (their values were counted with their columns'); :class:`_Irregular` for
    labels that are no partition's and topic's, or another way of writing a log end's."""
    replicas = set(out.keys)
    found: dict[tuple[str, int], list[int | None]] = {}
    for i, rows in enumerate((start_rows, lag_rows)):
        for labels, text in rows:
            if labels in ends:
                continue
            m = _KEY.fullmatch(labels)
            if m is None:
                raise _Irregular
            key = (m[2], int(m[1]))
            if key in replicas:
                raise _Irregular
            reading = found.setdefault(key, [None, None, None])
            value = _offset(text, lag=i == 1)
            reading[i + 1] = None if isinstance(value, str) else value
    for key, (end, start, lag) in found.items():
        if start is not None or lag is not None:
            out.others[key] = (end, start, lag)
