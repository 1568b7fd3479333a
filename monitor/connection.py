"""How the monitor connects to a Kafka cluster: one settings model for every client.

The collector talks to Kafka with kafka-python; the Spark job with the Java client (Spark's
Kafka source and sink). Both read the same :class:`KafkaConnection` -- the same keys in a
config file, the same environment variables, the same validation -- and each renders it
for its client: :meth:`KafkaConnection.client_kwargs` (kafka-python) and
:meth:`KafkaConnection.java_options` (``kafka.*`` options of the Java client).

Secrets are :class:`~pydantic.SecretStr` (they print as ``**********``; a validation error
never echoes them) or come from a file (``*_file``: its first line, e.g. a mounted
Kubernetes secret), which keeps them out of the environment and the config file. They are
revealed only in the two renderings, which go straight to a client. A connection that sends
its credentials in clear (SASL PLAIN's password or an OAUTHBEARER token over
SASL_PLAINTEXT) is warned of once in a process, when first rendered
(:meth:`KafkaConnection.warn_in_clear`).

TLS material: PEM files (``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``) work for both
clients. Java key and trust stores (PKCS12, JKS: ``ssl_keystore_*``, ``ssl_truststore_*``)
work for the job only -- kafka-python cannot read them, and the collector refuses them
with a message saying so.

SASL OAUTHBEARER takes its token from a file (``sasl_oauth_token_file``, re-read when it
changes or its token nears expiry: a sidecar or a Kubernetes projected token rewrites it),
from a command (``sasl_oauth_token_command``, run without a shell, its stdout the token;
the collector only: the Java client cannot run one) or from an identity provider's token
endpoint with the OAuth client-credentials grant (``sasl_oauth_token_endpoint_url``,
``sasl_oauth_client_id``, ``sasl_oauth_client_secret``). :class:`OAuthTokenSource` is the
collector's token provider (kafka-python's ``sasl_oauth_token_provider``); the job's Java
client gets its tokens itself (``OAuthBearerLoginCallbackHandler``, KIP-768: the endpoint,
or the file as a ``file:`` endpoint). AWS_MSK_IAM (AWS's SASL signer) needs ``botocore`` for
the collector and the ``aws-msk-iam-auth`` jar for the job.

>>> KafkaConnection(bootstrap_servers="b:9092").java_options()
{'kafka.bootstrap.servers': 'b:9092'}
"""

from __future__ import annotations

import base64
import binascii
import collections
import importlib
import ipaddress
import json
import logging
import re
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal
from urllib.error import HTTPError, URLError
from urllib.parse import quote, quote_plus, urlencode, urlsplit
from urllib.request import Request, urlopen

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

log = logging.getLogger(__name__)

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"]
StoreType = Literal["PKCS12", "JKS"]

#: The mechanisms that log in with ``sasl_username`` and ``sasl_password``.
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: The OAUTHBEARER settings (``sasl_mechanism = "OAUTHBEARER"`` only).
OAUTH_SETTINGS = (
    "sasl_oauth_token_file",
    "sasl_oauth_token_command",
    "sasl_oauth_token_endpoint_url",
    "sasl_oauth_client_id",
    "sasl_oauth_client_secret",
    "sasl_oauth_scope",
    "sasl_oauth_extensions",
)
#: Where an OAUTHBEARER token comes from: exactly one of these.
TOKEN_SOURCES = (
    "sasl_oauth_token_file",
    "sasl_oauth_token_command",
    "sasl_oauth_token_endpoint_url",
)
#: A token is used until this share of its lifetime has passed (the Java client's default,
#: ``sasl.login.refresh.window.factor``), then read or fetched again.
TOKEN_REFRESH_FACTOR = 0.8
#: How long ``sasl_oauth_token_command`` may run or the token endpoint take to answer
#: (kafka-python waits on its network thread) and, after a failure, how long a still valid
#: token is used before the next try.
TOKEN_COMMAND_TIMEOUT_S = 10.0
TOKEN_RETRY_S = 10.0
#: RFC 6750's b64token: what may follow ``auth=Bearer`` in the OAUTHBEARER message.
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
#: KIP-342 / RFC 7628 extension keys and values (``auth`` is the token's own key).
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")


def exposed_in_clear(url: str) -> bool:
    """Whether what is sent to ``url`` crosses a network unencrypted: an ``http://`` URL
    whose host is not this machine's loopback (``localhost``, 127.0.0.0/8, ``::1``: traffic
    that never leaves the host). What refuses a password or token over plain HTTP asks this.

    >>> exposed_in_clear("http://grafana:3000"), exposed_in_clear("https://grafana:3000")
    (True, False)
    >>> exposed_in_clear("http://127.0.0.1:3000"), exposed_in_clear("http://[::1]:3000/")
    (False, False)
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "http":
        return False
    host = (parts.hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve anywhere
        return True


def read_secret_file(path: Path | str, what: str) -> SecretStr:
    """The first line of a secret file (a trailing newline is not part of the secret).

    Errors name the file and the setting, never the content.
    """
    try:
        text = Path(path).expanduser().read_text()
    except OSError as e:
        raise ValueError(f"{what}: cannot read {path}: {e.strerror or e}") from None
    value = text.splitlines()[0] if text.strip() else ""
    if not value:
        raise ValueError(f"{what}: {path} is empty")
    return SecretStr(value)


def secrets_from_files(data: Any, pairs: dict[str, str]) -> Any:
    """``pairs``: secret field -> its ``*_file`` field. Fills the secret from the file;
    giving both is an error (which one would win is not obvious)."""
    if not isinstance(data, dict):
        return data
    for name, file_field in pairs.items():
        path = data.get(file_field)
        if path is None:
            continue
        if data.get(name) is not None:
            raise ValueError(f"give {name} or {file_field}, not both")
        data = {**data, name: read_secret_file(path, file_field)}
    return data


#: Each secret and the file that may hold it instead.
SECRETS = {
    "sasl_password": "sasl_password_file",
    "ssl_key_password": "ssl_key_password_file",
    "ssl_truststore_password": "ssl_truststore_password_file",
    "ssl_keystore_password": "ssl_keystore_password_file",
    "sasl_oauth_client_secret": "sasl_oauth_client_secret_file",
}


class TokenError(ValueError):
    """An OAUTHBEARER token could not be had: one line naming the setting, never a token."""


#: The tokens handed to kafka-python in this process (the newest few): the collector's log
#: redaction hides them (kafka-python logs its SASL requests, the token in them, at DEBUG).
_ISSUED: collections.deque[str] = collections.deque(maxlen=16)
_ISSUED_LOCK = threading.Lock()


def issued_tokens() -> tuple[str, ...]:
    """The OAUTHBEARER tokens this process handed to a client lately (for log redaction)."""
    with _ISSUED_LOCK:
        return tuple(_ISSUED)


def jwt_expiry(token: str) -> float | None:
    """A JWT's ``exp`` claim (seconds since the epoch); None for an opaque token (not a
    signed JWT, or without ``exp``). The signature is not checked: the brokers do that.

    >>> jwt_expiry("eyJhbGciOiJub25lIn0.eyJleHAiOjE3MDAwMDAwMDB9.")
    1700000000.0
    >>> jwt_expiry("an-opaque-token") is None
    True
    """
    parts = token.split(".")
    if len(parts) != 3:  # JWS compact form; a JWE's payload is encrypted: opaque
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        exp = json.loads(payload).get("exp")
    except (binascii.Error, ValueError, AttributeError):
        return None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class _Token:
    value: str
    expires_at: float | None  # the JWT's exp; None: opaque
    refresh_at: float  # wall clock: read or fetch again from then on

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def left(self, now: float) -> str:
        return "" if self.expires_at is None else f" (expires in {self.expires_at - now:.0f} s)"


class OAuthTokenSource:
    """The collector's OAUTHBEARER token provider (kafka-python calls :meth:`token` at each
    connection's authentication and re-authentication, KIP-368, and :meth:`extensions`).

    The token comes from a file, a command or a token endpoint (:class:`ClientCredentials`).
    It is kept until :data:`TOKEN_REFRESH_FACTOR` of its lifetime (from when it was got to
    its JWT ``exp``, or the endpoint's ``expires_in``) has passed, an opaque token
    ``refresh_s``; a file is also read again as soon as it changes (another inode, size or
    modification time: a rewrite). When a new try fails while the current token is still
    valid, it is used on (with a warning) and tried again :data:`TOKEN_RETRY_S` later; with
    no valid token, :class:`TokenError` (one line naming the setting). Thread-safe.
    """

    def __init__(
        self,
        *,
        file: Path | None = None,
        command: list[str] | None = None,
        endpoint: ClientCredentials | None = None,
        refresh_s: float = 300.0,
        extensions: dict[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if sum(x is not None for x in (file, command, endpoint)) != 1:
            raise ValueError("give one of a token file, a token command or a token endpoint")
        self._file = None if file is None else Path(file).expanduser()
        self._command = command
        self._endpoint = endpoint
        self._refresh_s = refresh_s
        self._extensions = dict(extensions or {})
        self._clock = clock
        self._lock = threading.Lock()
        self._token: _Token | None = None
        self._file_id: tuple[int, int, int] | None = None
        self._retry_at = 0.0
        self._warned: str | None = None
        #: How many times a token was read, run for or asked for (for tests and logs).
        self.fetches = 0

    @property
    def setting(self) -> str:
        if self._file is not None:
            return "sasl_oauth_token_file"
        return "sasl_oauth_token_command" if self._command else "sasl_oauth_token_endpoint_url"

    def describe(self) -> str:
        if self._file is not None:
            return f"token from file {self._file}"
        if self._endpoint is not None:
            return f"token from {self._endpoint.url} for client {self._endpoint.client_id!r}"
        assert self._command is not None
        return f"token from command {self._command[0]}"

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    def token(self) -> str:
        with self._lock:
            now = self._clock()
            current = self._token
            if current is not None and not self._due(current, now):
                return current.value
            try:
                fresh = self._fetch(now)
            except TokenError as e:
                if current is None or current.expired(now):
                    raise
                log.warning("%s; using the current token on%s", e, current.left(now))
                self._retry_at = now + TOKEN_RETRY_S
                return current.value
            if current is not None and fresh.value == current.value:
                self._stale_warning(fresh, now)
            self._token = fresh
            with _ISSUED_LOCK:
                if fresh.value not in _ISSUED:
                    _ISSUED.append(fresh.value)
            return fresh.value

    # -- internals --------------------------------------------------------------------------

    def _due(self, current: _Token, now: float) -> bool:
        if now < self._retry_at:
            return False
        if now >= current.refresh_at:
            return True
        return self._file is not None and self._file_signature() != self._file_id

    def _file_signature(self) -> tuple[int, int, int] | None:
        assert self._file is not None
        try:
            st = self._file.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _fetch(self, now: float) -> _Token:
        self.fetches += 1
        lifetime: float | None = None  # the endpoint's expires_in (opaque tokens)
        if self._file is not None:
            signature = self._file_signature()
            value = self._read_file()
            self._file_id = signature
            where = f"the token in {self._file}"
        elif self._endpoint is not None:
            value, lifetime = self._endpoint.fetch()
            where = f"the access_token from {self._endpoint.url}"
        else:
            value = self._run()
            where = f"the token {self._command_name} printed"
        if not _BEARER_TOKEN.fullmatch(value):
            raise TokenError(
                f"{self.setting}: {where} is not a bearer token (RFC 6750 characters only: "
                "letters, digits, -._~+/ and trailing =)"
            )
        exp = jwt_expiry(value)
        if exp is None and lifetime is not None:
            exp = now + lifetime
        if exp is None:
            return _Token(value, None, now + self._refresh_s)
        if exp <= now:
            hint = " (is whatever writes it still running?)" if self._file is not None else ""
            raise TokenError(f"{self.setting}: {where} expired at {_utc(exp)}{hint}")
        return _Token(value, exp, now + TOKEN_REFRESH_FACTOR * (exp - now))

    def _read_file(self) -> str:
        assert self._file is not None
        try:
            text = self._file.read_text()
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise TokenError(f"sasl_oauth_token_file: cannot read {self._file}: {why}") from None
        value = text.strip()
        if not value:
            raise TokenError(f"sasl_oauth_token_file: {self._file} is empty")
        return value

    @property
    def _command_name(self) -> str:
        assert self._command is not None
        return self._command[0]

    def _run(self) -> str:
        assert self._command is not None
        name = self._command_name
        try:
            proc = subprocess.run(
                self._command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=TOKEN_COMMAND_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise TokenError(
                f"sasl_oauth_token_command: {name} did not finish within "
                f"{TOKEN_COMMAND_TIMEOUT_S:.0f} s"
            ) from None
        except OSError as e:
            raise TokenError(
                f"sasl_oauth_token_command: cannot run {name}: {e.strerror or e}"
            ) from None
        if proc.returncode != 0:
            # stderr's last line, to say why (stdout, where a token would be, never).
            lines = proc.stderr.decode(errors="replace").strip().splitlines()
            why = f": {lines[-1][:200]}" if lines else ""
            raise TokenError(f"sasl_oauth_token_command: {name} exited with {proc.returncode}{why}")
        value = proc.stdout.decode(errors="replace").strip()
        if not value:
            raise TokenError(f"sasl_oauth_token_command: {name} printed no token")
        return value

    def _stale_warning(self, token: _Token, now: float) -> None:
        """The file was read again near the token's expiry and holds the same token."""
        if self._warned == token.value or token.expires_at is None or self._file is None:
            return
        self._warned = token.value
        log.warning(
            "sasl_oauth_token_file: the token in %s expires in %.0f s and the file has not "
            "been rewritten",
            self._file, token.expires_at - now,
        )  # fmt: skip

    def __repr__(self) -> str:  # kafka-python logs its configuration: no token in it
        return f"OAuthTokenSource({self.describe()})"


@dataclass(frozen=True)
class ClientCredentials:
    """An identity provider's token endpoint and the client that asks it for tokens (the
    OAuth 2.0 client-credentials grant, RFC 6749 4.4), as the Java client's
    ``OAuthBearerLoginCallbackHandler`` asks: a form POST with ``grant_type`` and ``scope``,
    the client's id and secret in HTTP Basic authentication, each form-encoded first (RFC
    6749 2.3.1; the Java client too, told so: ``sasl.oauthbearer.header.urlencode``); the
    answer's ``access_token``. HTTPS is checked against the system's CAs (the Java client:
    the JVM's), not ``ssl_cafile``: the identity provider is not the cluster."""

    url: str
    client_id: str
    client_secret: SecretStr
    scope: str | None = None

    def fetch(self) -> tuple[str, float | None]:
        """The access token and its ``expires_in`` (None if the answer has none)."""
        where = f"sasl_oauth_token_endpoint_url: {self.url}"
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        secret = self.client_secret.get_secret_value()
        basic = f"{quote_plus(self.client_id, safe='')}:{quote_plus(secret, safe='')}"
        request = Request(
            self.url,
            data=urlencode(form).encode(),
            headers={
                "Authorization": "Basic " + base64.b64encode(basic.encode()).decode(),
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            method="POST",
        )
        context = ssl.create_default_context() if self.url.startswith("https:") else None
        try:
            with urlopen(request, timeout=TOKEN_COMMAND_TIMEOUT_S, context=context) as answer:
                body = answer.read(1 << 20)
        except HTTPError as e:
            raise TokenError(f"{where} answered {e.code}{_oauth_error(e)}") from None
        except (URLError, OSError) as e:
            reason = getattr(e, "reason", None) or e
            raise TokenError(f"{where}: cannot ask it for a token: {reason}") from None
        try:
            answer_json = json.loads(body)
            token = answer_json["access_token"]
        except (ValueError, KeyError, TypeError):
            raise TokenError(f"{where} answered without an access_token") from None
        if not isinstance(token, str) or not token:
            raise TokenError(f"{where} answered without an access_token")
        expires_in = answer_json.get("expires_in")
        lifetime = float(expires_in) if isinstance(expires_in, int | float) else None
        return token, lifetime


def _oauth_error(e: HTTPError) -> str:
    """An OAuth error answer's ``error`` and ``error_description`` (RFC 6749 5.2), short."""
    try:
        body = json.loads(e.read(4096))
        words = [str(body.get("error", "")), str(body.get("error_description", ""))]
    except (ValueError, AttributeError, OSError):
        return f" ({e.reason})" if e.reason else ""
    text = ": ".join(w for w in words if w)[:200]
    return f": {text}" if text else ""


#: The connections whose credentials in clear were warned of (once in a process each).
_WARNED_IN_CLEAR: set[str] = set()
_WARNED_LOCK = threading.Lock()
#: What each mechanism sends in clear over SASL_PLAINTEXT (SCRAM sends no password).
_SENT_IN_CLEAR = {
    "PLAIN": "the password",
    "OAUTHBEARER": "the token (anyone on the path can use it until it expires)",
}


class KafkaConnection(BaseModel):
    """Where a Kafka cluster is and how to authenticate to it."""

    # hide_input_in_errors: a validation error must not echo the input (it holds secrets).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)

    #: Required: no address is a safe guess (docs/configuration.md).
    bootstrap_servers: str = Field(min_length=1)
    security_protocol: Protocol = "PLAINTEXT"
    sasl_mechanism: Mechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_password_file: Path | None = Field(None, description="first line: the SASL password")
    #: OAUTHBEARER: the token's file, re-read when it changes or its token nears expiry.
    sasl_oauth_token_file: Path | None = None
    #: OAUTHBEARER: a command (its arguments, no shell) whose stdout is the token; the
    #: collector only.
    sasl_oauth_token_command: list[str] | None = None
    #: OAUTHBEARER: an identity provider's token endpoint (the client-credentials grant),
    #: the client's id and secret, and the scope to ask for (optional).
    sasl_oauth_token_endpoint_url: str | None = None
    sasl_oauth_client_id: str | None = None
    sasl_oauth_client_secret: SecretStr | None = None
    sasl_oauth_client_secret_file: Path | None = None
    sasl_oauth_scope: str | None = None
    #: OAUTHBEARER: how long an opaque token (no JWT ``exp``, no ``expires_in``) is used
    #: before it is read or fetched again.
    sasl_oauth_token_refresh_s: float = Field(300.0, ge=1)
    #: OAUTHBEARER: SASL extensions sent with the token (KIP-342), e.g. Confluent Cloud's
    #: ``logicalCluster`` and ``identityPoolId``.
    sasl_oauth_extensions: dict[str, str] = Field(default_factory=dict)
    #: PEM CA bundle the brokers' certificates are checked against.
    ssl_cafile: str | None = None
    #: PEM client certificate (chain) for mutual TLS; may also hold the private key.
    ssl_certfile: str | None = None
    #: PEM private key, when not in ``ssl_certfile``.
    ssl_keyfile: str | None = None
    #: Password of an encrypted private key (the Java client needs the key encrypted).
    ssl_key_password: SecretStr | None = None
    ssl_key_password_file: Path | None = None
    #: Java trust and key stores, PKCS12 or JKS (the Spark job only).
    ssl_truststore_location: str | None = None
    ssl_truststore_type: StoreType = "PKCS12"
    ssl_truststore_password: SecretStr | None = None
    ssl_truststore_password_file: Path | None = None
    ssl_keystore_location: str | None = None
    ssl_keystore_type: StoreType = "PKCS12"
    ssl_keystore_password: SecretStr | None = None
    ssl_keystore_password_file: Path | None = None
    #: kafka-python's request timeout, and how long a new connection to a broker may take to
    #: set up (TCP, TLS, SASL and the version handshake: kafka-python's own default, 10 s
    #: doubling to 30 s, let one hung broker stall a collector round 23 s -- every broker
    #: looked silent; found by the CI short soak with a paused broker);
    #: ``bootstrap_timeout_ms``: how long starting its clients waits for a first broker
    #: connection: wrong credentials fail after this long.
    request_timeout_ms: int = Field(5_000, ge=500)
    bootstrap_timeout_ms: int = Field(30_000, ge=500)

    @model_validator(mode="before")
    @classmethod
    def _secret_files(cls, data: Any) -> Any:
        return secrets_from_files(data, SECRETS)

    @field_validator("sasl_oauth_token_command")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not value[0].strip()):
            raise ValueError("sasl_oauth_token_command: give the program and its arguments")
        return value

    @field_validator("sasl_oauth_token_endpoint_url")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^/\s]+", value):
            raise ValueError("sasl_oauth_token_endpoint_url: give an https:// (or http://) URL")
        return value

    @field_validator("sasl_oauth_extensions")
    @classmethod
    def _extensions(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not _EXTENSION_KEY.fullmatch(key) or key == "auth":
                raise ValueError(
                    f"sasl_oauth_extensions: key {key!r} must be letters only (and not 'auth')"
                )
            if not _EXTENSION_VALUE.fullmatch(text):
                raise ValueError(
                    f"sasl_oauth_extensions: the value of {key!r} must be printable ASCII"
                )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KafkaConnection:
        protocol = self.security_protocol
        mechanism = self.sasl_mechanism
        oauth_given = [n for n in OAUTH_SETTINGS if getattr(self, n) not in (None, {})]
        if oauth_given and mechanism != "OAUTHBEARER":
            raise ValueError(f"{', '.join(oauth_given)}: for sasl_mechanism OAUTHBEARER only")
        password_given = [
            n for n in ("sasl_username", "sasl_password") if getattr(self, n) is not None
        ]
        if password_given and mechanism not in (None, *PASSWORD_MECHANISMS):
            raise ValueError(
                f"{', '.join(password_given)}: not used with sasl_mechanism {mechanism} "
                "(PLAIN and SCRAM only)"
            )
        if protocol.startswith("SASL_"):
            if mechanism is None:
                raise ValueError(f"security_protocol {protocol} needs sasl_mechanism")
            if mechanism in PASSWORD_MECHANISMS and (
                not self.sasl_username or self.sasl_password is None
            ):
                raise ValueError(
                    f"sasl_mechanism {mechanism} needs sasl_username and "
                    "sasl_password (or sasl_password_file)"
                )
            if mechanism == "OAUTHBEARER":
                self._one_token_source()
            if mechanism == "AWS_MSK_IAM" and protocol != "SASL_SSL":
                raise ValueError("sasl_mechanism AWS_MSK_IAM needs security_protocol SASL_SSL")
        tls_files = [
            name
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_truststore_location",
                         "ssl_keystore_location")
            if getattr(self, name)
        ]  # fmt: skip
        if tls_files and not protocol.endswith("SSL"):
            raise ValueError(
                f"{', '.join(tls_files)} set but security_protocol is {protocol} "
                "(SSL or SASL_SSL uses them)"
            )
        if self.ssl_cafile and self.ssl_truststore_location:
            raise ValueError("give ssl_cafile (PEM) or ssl_truststore_location, not both")
        if self.ssl_certfile and self.ssl_keystore_location:
            raise ValueError("give ssl_certfile (PEM) or ssl_keystore_location, not both")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ValueError("ssl_keyfile needs ssl_certfile (the certificate of that key)")
        return self

    def _one_token_source(self) -> None:
        given = [n for n in TOKEN_SOURCES if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(
                "sasl_mechanism OAUTHBEARER needs exactly one of sasl_oauth_token_file, "
                "sasl_oauth_token_command and sasl_oauth_token_endpoint_url"
                + (f" (given: {', '.join(given)})" if given else "")
            )
        client = ("sasl_oauth_client_id", "sasl_oauth_client_secret", "sasl_oauth_scope")
        if given[0] == "sasl_oauth_token_endpoint_url":
            if not self.sasl_oauth_client_id or self.sasl_oauth_client_secret is None:
                raise ValueError(
                    "sasl_oauth_token_endpoint_url needs sasl_oauth_client_id and "
                    "sasl_oauth_client_secret (or sasl_oauth_client_secret_file)"
                )
        elif stray := [n for n in client if getattr(self, n) is not None]:
            raise ValueError(f"{', '.join(stray)}: for sasl_oauth_token_endpoint_url only")

    # -- what it says about itself ------------------------------------------------------------

    def secret_values(self) -> list[str]:
        """The revealed secrets (for log redaction)."""
        values = (getattr(self, name) for name in SECRETS)
        return [v.get_secret_value() for v in values if v is not None and v.get_secret_value()]

    def describe(self) -> str:
        """Where and how this connects, for messages (no secrets)."""
        text = f"{self.bootstrap_servers} over {self.security_protocol}"
        if self.security_protocol.startswith("SASL_"):
            text += f" ({self.sasl_mechanism} {self.sasl_identity()})"
        if self.ssl_certfile or self.ssl_keystore_location:
            text += f" with client certificate {self.ssl_certfile or self.ssl_keystore_location}"
        return text

    def sasl_identity(self) -> str:
        """Who logs in, in words (no secret): the user, the token's source, AWS's chain."""
        if self.sasl_mechanism == "OAUTHBEARER":
            if self.sasl_oauth_token_file is not None:
                return f"with the token from file {self.sasl_oauth_token_file}"
            if self.sasl_oauth_token_endpoint_url is not None:
                return (
                    f"with a token from {self.sasl_oauth_token_endpoint_url} for client "
                    f"{self.sasl_oauth_client_id!r}"
                )
            command = self.sasl_oauth_token_command or ["?"]
            return f"with the token from command {command[0]}"
        if self.sasl_mechanism == "AWS_MSK_IAM":
            return "with the AWS default credentials"
        return f"as user {self.sasl_username!r}"

    def in_clear(self) -> str | None:
        """The warning for credentials this connection sends in clear -- SASL PLAIN's
        password or an OAUTHBEARER token over SASL_PLAINTEXT -- or None."""
        sent = _SENT_IN_CLEAR.get(self.sasl_mechanism or "")
        if self.security_protocol != "SASL_PLAINTEXT" or sent is None:
            return None
        return (
            f"kafka at {self.describe()}: SASL {self.sasl_mechanism} over SASL_PLAINTEXT sends "
            f"{sent} in clear; use SASL_SSL"
        )

    def warn_in_clear(self) -> None:
        """Log :meth:`in_clear`'s warning, once in a process for each connection (the
        renderings call it: every client of the collector, the job, ``monitor run`` and the
        checks is made from one)."""
        warning = self.in_clear()
        if warning is None:
            return
        with _WARNED_LOCK:
            if warning in _WARNED_IN_CLEAR:
                return
            _WARNED_IN_CLEAR.add(warning)
        log.warning("%s", warning)

    def java_only(self) -> list[str]:
        """The settings kafka-python cannot use (Java key and trust stores)."""
        return [n for n in ("ssl_truststore_location", "ssl_keystore_location") if getattr(self, n)]

    def token_source(self) -> OAuthTokenSource:
        """A new token provider for one kafka-python client (OAUTHBEARER only)."""
        if self.sasl_mechanism != "OAUTHBEARER":
            raise ValueError(f"sasl_mechanism is {self.sasl_mechanism}, not OAUTHBEARER")
        endpoint = None
        if self.sasl_oauth_token_endpoint_url is not None:
            assert self.sasl_oauth_client_id and self.sasl_oauth_client_secret is not None
            endpoint = ClientCredentials(
                url=self.sasl_oauth_token_endpoint_url,
                client_id=self.sasl_oauth_client_id,
                client_secret=self.sasl_oauth_client_secret,
                scope=self.sasl_oauth_scope,
            )
        return OAuthTokenSource(
            file=self.sasl_oauth_token_file,
            command=self.sasl_oauth_token_command,
            endpoint=endpoint,
            refresh_s=self.sasl_oauth_token_refresh_s,
            extensions=self.sasl_oauth_extensions,
        )

    # -- renderings ---------------------------------------------------------------------------

    def client_kwargs(self) -> dict[str, object]:
        """Keyword arguments for kafka-python's clients (secrets revealed here only).

        OAUTHBEARER: a new :class:`OAuthTokenSource` as ``sasl_oauth_token_provider``, which
        gets its first token here (a missing file or a failing command fails now, not in
        kafka-python's network thread); AWS_MSK_IAM: checks that botocore is there. Those
        failures raise kafka-python's ``KafkaConfigurationError`` (a ``KafkaError``, as the
        clients' own failures are), one line naming the setting."""
        if self.java_only():
            raise ValueError(
                f"{', '.join(self.java_only())}: kafka-python reads PEM files only -- give "
                "ssl_cafile / ssl_certfile (and ssl_keyfile) instead"
            )
        self.warn_in_clear()
        # kafka-python only where its clients are made (the collector): the Spark job reads
        # these settings too, for its Java client.
        from kafka.errors import KafkaConfigurationError
        from kafka.net.compat import KafkaNetClient
        from kafka.net.sasl.oauth import AbstractTokenProvider

        kw: dict[str, object] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
            "bootstrap_timeout_ms": self.bootstrap_timeout_ms,
            # The connection setup timeout is a setting of the network client only: its
            # documented hook, a callable building that client.
            "kafka_client": partial(
                KafkaNetClient,
                socket_connection_setup_timeout_ms=self.request_timeout_ms,
                socket_connection_setup_timeout_max_ms=self.request_timeout_ms,
            ),
        }
        sasl = self.security_protocol.startswith("SASL_")
        provider: OAuthTokenSource | None = None
        if sasl and self.sasl_mechanism == "OAUTHBEARER":
            # kafka-python checks isinstance(provider, AbstractTokenProvider): the source is
            # registered as one (a virtual subclass) so that this module imports kafka-python
            # only here.
            AbstractTokenProvider.register(OAuthTokenSource)
            provider = self.token_source()
            try:
                provider.token()
            except TokenError as e:
                raise KafkaConfigurationError(str(e)) from None
        if sasl and self.sasl_mechanism == "AWS_MSK_IAM":
            try:
                importlib.import_module("botocore")  # kafka-python's AWS_MSK_IAM signs with it
            except ImportError:
                raise KafkaConfigurationError(
                    "sasl_mechanism AWS_MSK_IAM needs botocore for the collector: install "
                    "the package's msk extra (pip install '.[msk]') or botocore"
                ) from None
        optional = {
            "sasl_mechanism": self.sasl_mechanism if sasl else None,
            "sasl_plain_username": self.sasl_username if sasl else None,
            "sasl_plain_password": _reveal(self.sasl_password) if sasl else None,
            "sasl_oauth_token_provider": provider,
            "ssl_cafile": self.ssl_cafile,
            "ssl_certfile": self.ssl_certfile,
            "ssl_keyfile": self.ssl_keyfile,
            "ssl_password": _reveal(self.ssl_key_password),
        }
        kw.update({k: v for k, v in optional.items() if v is not None})
        return kw

    def java_options(self, prefix: str = "kafka.") -> dict[str, str]:
        """The Java client's settings (``prefix`` + name: Spark's Kafka source and sink take
        ``kafka.*``), secrets revealed: pass them straight to the client, never log them.

        A PEM client certificate with its key in the same file is a PEM key store; with the
        key in its own file, both go inline (``ssl.keystore.certificate.chain`` and
        ``ssl.keystore.key``). The Java client reads an encrypted PEM key only.
        """
        self.warn_in_clear()
        o: dict[str, str] = {"bootstrap.servers": self.bootstrap_servers}
        if self.security_protocol != "PLAINTEXT":
            o["security.protocol"] = self.security_protocol
        if self.sasl_mechanism and self.security_protocol.startswith("SASL_"):
            o["sasl.mechanism"] = self.sasl_mechanism
            if self.sasl_mechanism == "OAUTHBEARER":
                o |= self._java_oauth()
            elif self.sasl_mechanism == "AWS_MSK_IAM":
                # AWS's aws-msk-iam-auth jar (not in Kafka's client): its login module signs
                # with the AWS default credentials chain.
                handler = f"{MSK_IAM_PACKAGE}.IAMClientCallbackHandler"
                o["sasl.jaas.config"] = f"{MSK_IAM_PACKAGE}.IAMLoginModule required;"
                o["sasl.client.callback.handler.class"] = handler
            else:
                module = (
                    "org.apache.kafka.common.security.plain.PlainLoginModule"
                    if self.sasl_mechanism == "PLAIN"
                    else "org.apache.kafka.common.security.scram.ScramLoginModule"
                )
                user = _jaas_quote(self.sasl_username or "")
                password = _jaas_quote(_reveal(self.sasl_password) or "")
                o["sasl.jaas.config"] = f"{module} required username={user} password={password};"
        if self.ssl_cafile:
            o["ssl.truststore.type"] = "PEM"
            o["ssl.truststore.location"] = _abs(self.ssl_cafile)
        if self.ssl_truststore_location:
            o["ssl.truststore.type"] = self.ssl_truststore_type
            o["ssl.truststore.location"] = _abs(self.ssl_truststore_location)
            if self.ssl_truststore_password is not None:
                o["ssl.truststore.password"] = _reveal(self.ssl_truststore_password) or ""
        if self.ssl_certfile:
            if self.ssl_key_password is None:
                raise ValueError(
                    "ssl_certfile for the Java client needs ssl_key_password "
                    "(it reads an encrypted PEM key only)"
                )
            o["ssl.keystore.type"] = "PEM"
            if self.ssl_keyfile:
                o["ssl.keystore.certificate.chain"] = Path(self.ssl_certfile).read_text()
                o["ssl.keystore.key"] = Path(self.ssl_keyfile).read_text()
            else:
                o["ssl.keystore.location"] = _abs(self.ssl_certfile)
        if self.ssl_keystore_location:
            o["ssl.keystore.type"] = self.ssl_keystore_type
            o["ssl.keystore.location"] = _abs(self.ssl_keystore_location)
            if self.ssl_keystore_password is not None:
                o["ssl.keystore.password"] = _reveal(self.ssl_keystore_password) or ""
        if self.ssl_key_password is not None:
            o["ssl.key.password"] = _reveal(self.ssl_key_password) or ""
        return {prefix + k: v for k, v in o.items()}

    def token_file_url(self) -> str:
        """``sasl_oauth_token_file`` as the Java client's ``file:`` URL (absolute)."""
        assert self.sasl_oauth_token_file is not None
        path = str(self.sasl_oauth_token_file.expanduser().resolve())
        if quote(path) != path:  # Kafka reads the URL's raw path: %-escapes would stay
            raise ValueError(
                f"sasl_oauth_token_file: the Java client cannot read {path} (a path with "
                "characters a file: URL escapes); use a path of letters, digits and -._/"
            )
        return "file://" + path

    def java_system_properties(self) -> dict[str, str]:
        """JVM system properties the Java client needs for these settings: the token URL
        (the endpoint, or the file's ``file:`` URL) in
        ``org.apache.kafka.sasl.oauthbearer.allowed.urls``, which kafka-clients 4.x requires
        (empty by default: no URL allowed) and 3.9 checks only when it is set. Give them to
        the driver and executors (``spark.driver.extraJavaOptions``,
        ``spark.executor.extraJavaOptions``)."""
        if self.sasl_mechanism != "OAUTHBEARER":
            return {}
        if self.sasl_oauth_token_endpoint_url is not None:
            return {ALLOWED_URLS_PROPERTY: self.sasl_oauth_token_endpoint_url}
        if self.sasl_oauth_token_file is not None:
            return {ALLOWED_URLS_PROPERTY: self.token_file_url()}
        return {}

    def _java_oauth(self) -> dict[str, str]:
        """OAUTHBEARER for the Java client: Kafka's login callback handler (KIP-768) asking
        the token endpoint (client id and secret in the JAAS options), or reading the token
        file as its endpoint (``file:``)."""
        if self.sasl_oauth_token_command is not None:
            raise ValueError(
                "sasl_oauth_token_command: the Spark job's Java client cannot run a command; "
                "give it sasl_oauth_token_file (a file a sidecar keeps fresh) or the "
                "identity provider's sasl_oauth_token_endpoint_url, sasl_oauth_client_id and "
                "sasl_oauth_client_secret_file instead"
            )
        options: dict[str, str] = {}
        extra: dict[str, str] = {}
        if self.sasl_oauth_token_endpoint_url is not None:
            url = self.sasl_oauth_token_endpoint_url
            # RFC 6749 2.3.1, as the collector sends them (kafka-clients 3.8+; off by default)
            extra["sasl.oauthbearer.header.urlencode"] = "true"
            options["clientId"] = self.sasl_oauth_client_id or ""
            options["clientSecret"] = _reveal(self.sasl_oauth_client_secret) or ""
            if self.sasl_oauth_scope:
                options["scope"] = self.sasl_oauth_scope
        else:
            assert self.sasl_oauth_token_file is not None
            url = self.token_file_url()  # checked before the file: says which path is wrong
            read_secret_file(self.sasl_oauth_token_file, "sasl_oauth_token_file")  # not empty
        options |= {f"extension_{k}": v for k, v in self.sasl_oauth_extensions.items()}
        jaas = "".join(f" {k}={_jaas_quote(v)}" for k, v in options.items())
        return {
            "sasl.jaas.config": f"{OAUTH_PACKAGE}.OAuthBearerLoginModule required{jaas};",
            "sasl.login.callback.handler.class": f"{OAUTH_PACKAGE}.OAuthBearerLoginCallbackHandler",
            "sasl.oauthbearer.token.endpoint.url": url,
            **extra,
        }


#: Kafka's OAUTHBEARER classes (the login module; KIP-768's login callback handler).
OAUTH_PACKAGE = "org.apache.kafka.common.security.oauthbearer"
#: The JVM system property kafka-clients 4.x checks every OAuth URL against (3.9.1+ too,
#: when set).
ALLOWED_URLS_PROPERTY = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
#: AWS's MSK IAM classes (software.amazon.msk:aws-msk-iam-auth).
MSK_IAM_PACKAGE = "software.amazon.msk.auth.iam"


def _reveal(secret: SecretStr | None) -> str | None:
    return secret.get_secret_value() if secret is not None else None


def _abs(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def _jaas_quote(value: str) -> str:
    """A JAAS option value: double-quoted, with backslashes and quotes escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
