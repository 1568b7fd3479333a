"""The Prometheus web configuration file (``--web-config-file``, alias ``--web.config.file``).

The format of node_exporter, kafka_exporter and every exporter built on Prometheus's
exporter-toolkit (its ``docs/web-configuration.md``), so the file an SRE already runs works
here unchanged::

    tls_server_config:
      cert_file: server.crt          # relative paths: from the file's own folder
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # mutual TLS (default NoClientCert)
      client_ca_file: clients-ca.crt
      min_version: TLS12
    http_server_config:
      headers: {X-Content-Type-Options: nosniff}
    basic_auth_users:
      prometheus: $2y$10$...         # bcrypt: htpasswd -nBC 10 "" | tr -d ':\\n'
    rate_limit: {interval: 100ms, burst: 10}

What differs, each refused with an error naming the key rather than silently weaker:
``RequestClientCert`` and ``RequireAnyClientCert`` (a client certificate no CA verified)
are not offered -- Python's TLS verifies what it asks for; ``curve_preferences`` applies its
first curve only; ``http2`` is accepted and ignored (HTTP/1.1, as Prometheus scrapes).

:func:`load` reads and checks a file; :class:`WebConfig` holds the result, with
:meth:`WebConfig.ssl_context` (the server's TLS) and :meth:`WebConfig.authorized` (basic
auth). :class:`monitor.web.server.WebServer` re-reads the file when it, or a certificate it
names, changes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import bcrypt
import yaml  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

ClientAuth = Literal[
    "NoClientCert",
    "RequestClientCert",
    "RequireAnyClientCert",
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
]
TLSVersion = Literal["TLS10", "TLS11", "TLS12", "TLS13"]

_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
#: Go's names of the TLS 1.2 cipher suites (crypto/tls.CipherSuites) in OpenSSL's spelling.
#: TLS 1.3's suites are not configurable, in Go as here.
CIPHER_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
}
_CURVES = {"CurveP256": "prime256v1", "CurveP384": "secp384r1", "CurveP521": "secp521r1",
           "X25519": "X25519"}  # fmt: skip
#: The response headers exporter-toolkit lets a file set, and nothing else.
HEADERS = (
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "X-XSS-Protection",
    "Strict-Transport-Security",
)
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")


class WebConfigError(ValueError):
    """The web configuration file cannot be used: the message names the file and the key."""


class _Strict(BaseModel):
    # exporter-toolkit reads the file strictly: an unknown key is an error, not a no-op.
    model_config = ConfigDict(extra="forbid", frozen=True)


class TLSServerConfig(_Strict):
    cert_file: str | None = None
    key_file: str | None = None
    cert: str | None = None
    key: SecretStr | None = None
    client_auth_type: ClientAuth = "NoClientCert"
    client_ca_file: str | None = None
    client_ca: str | None = None
    client_allowed_sans: list[str] = Field(default_factory=list)
    min_version: TLSVersion = "TLS12"
    max_version: TLSVersion = "TLS13"
    cipher_suites: list[str] = Field(default_factory=list)
    prefer_server_cipher_suites: bool = True
    curve_preferences: list[str] = Field(default_factory=list)

    @field_validator("cipher_suites")
    @classmethod
    def _suites(cls, v: list[str]) -> list[str]:
        unknown = [s for s in v if s not in CIPHER_SUITES]
        if unknown:
            raise ValueError(f"unknown cipher suites {unknown} (Go's: {sorted(CIPHER_SUITES)})")
        return v

    @field_validator("curve_preferences")
    @classmethod
    def _curves(cls, v: list[str]) -> list[str]:
        unknown = [c for c in v if c not in _CURVES]
        if unknown:
            raise ValueError(f"unknown curves {unknown} (one of {sorted(_CURVES)})")
        return v


class HTTPServerConfig(_Strict):
    http2: bool = True  # accepted for compatibility; this server speaks HTTP/1.1
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = [h for h in v if h not in HEADERS]
        if unknown:
            raise ValueError(f"headers {unknown} cannot be set (only {list(HEADERS)})")
        return v


class RateLimit(_Strict):
    interval: str = "0s"  # a Prometheus duration: 100ms, 1s, 1m30s
    burst: int = Field(0, ge=0)

    @field_validator("interval")
    @classmethod
    def _interval(cls, v: str) -> str:
        duration_s(v)
        return v


class WebConfigFile(_Strict):
    """The file's schema: exporter-toolkit's keys, each checked."""

    tls_server_config: TLSServerConfig | None = None
    http_server_config: HTTPServerConfig = Field(default_factory=HTTPServerConfig)
    basic_auth_users: dict[str, SecretStr] = Field(default_factory=dict)
    rate_limit: RateLimit | None = None


def duration_s(text: str) -> float:
    """A Prometheus duration in seconds.

    >>> duration_s("1m30s"), duration_s("100ms"), duration_s("0s")
    (90.0, 0.1, 0.0)
    >>> duration_s("soon")
    Traceback (most recent call last):
    ...
    ValueError: 'soon' is not a duration (e.g. 100ms, 1s, 1m30s)
    """
    m = _DURATION.match(text.strip())
    if not text.strip() or m is None:
        raise ValueError(f"{text!r} is not a duration (e.g. 100ms, 1s, 1m30s)")
    h, mi, s, ms = (int(g or 0) for g in m.groups())
    return h * 3600.0 + mi * 60.0 + s + ms / 1000.0


@dataclass
class WebConfig:
    """A checked web configuration: its TLS context (None: plain HTTP), its users, its
    headers and rate limit; ``files`` are what it was read from (the reload watches them)."""

    path: Path | None
    tls: ssl.SSLContext | None = None
    allowed_sans: frozenset[str] = frozenset()
    users: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    rate_interval_s: float = 0.0
    rate_burst: int = 0
    files: tuple[Path, ...] = ()
    # (user, sha256 of the password) of credentials bcrypt already accepted: bcrypt at
    # cost 10 is ~70 ms a check, and Prometheus sends the same pair every scrape.
    _accepted: set[tuple[str, bytes]] = field(default_factory=set, repr=False)

    @property
    def auth_required(self) -> bool:
        return bool(self.users)

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header holds the credentials of a configured user
        (always true with no ``basic_auth_users``). An unknown user costs a bcrypt check
        too, so the answer's time does not say which users exist."""
        if not self.users:
            return True
        if not header or header[:6].lower() != "basic ":
            return False
        try:
            user, sep, password = (
                base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
            )
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        digest = hashlib.sha256(password.encode()).digest()
        if (user, digest) in self._accepted:
            return True
        hashed = self.users.get(user, _DUMMY_HASH)
        ok = bcrypt.checkpw(password.encode(), hashed) and user in self.users
        if ok:
            self._accepted.add((user, digest))
        return ok


_DUMMY_HASH = bcrypt.hashpw(b"no such user", bcrypt.gensalt(10))


def load(path: Path | None) -> WebConfig:
    """Read and check the file (None: plain HTTP, no users). Raises :class:`WebConfigError`
    naming the file and what is wrong with it -- never a secret's value."""
    if path is None:
        return WebConfig(path=None)
    where = f"web configuration {path}"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise WebConfigError(f"{where}: cannot be read ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        raise WebConfigError(f"{where}: not YAML ({e})") from None
    try:
        parsed = WebConfigFile.model_validate(raw if raw is not None else {})
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in e.errors(include_input=False, include_url=False)
        )
        raise WebConfigError(f"{where}: {problems}") from None
    base = path.parent
    files = [path]
    users: dict[str, bytes] = {}
    for user, secret in parsed.basic_auth_users.items():
        hashed = secret.get_secret_value().encode()
        try:
            bcrypt.checkpw(b"", hashed)
        except ValueError:
            raise WebConfigError(
                f"{where}: basic_auth_users.{user}: not a bcrypt hash "
                "(make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n')"
            ) from None
        users[user] = hashed
    config = WebConfig(
        path=path,
        users=users,
        headers=dict(parsed.http_server_config.headers),
    )
    if parsed.rate_limit is not None:
        config.rate_interval_s = duration_s(parsed.rate_limit.interval)
        config.rate_burst = parsed.rate_limit.burst
    if parsed.tls_server_config is not None:
        config.tls, used = _tls_context(parsed.tls_server_config, base, where)
        config.allowed_sans = frozenset(parsed.tls_server_config.client_allowed_sans)
        files.extend(used)
    config.files = tuple(files)
    return config


def _tls_context(tls: TLSServerConfig, base: Path, where: str) -> tuple[ssl.SSLContext, list[Path]]:
    def resolve(name: str) -> Path:
        p = Path(name)
        return p if p.is_absolute() else base / p

    used: list[Path] = []
    if (tls.cert_file is None) == (tls.cert is None):
        raise WebConfigError(f"{where}: tls_server_config: give cert_file or cert (one)")
    if (tls.key_file is None) == (tls.key is None):
        raise WebConfigError(f"{where}: tls_server_config: give key_file or key (one)")
    if tls.client_auth_type in ("RequestClientCert", "RequireAnyClientCert"):
        raise WebConfigError(
            f"{where}: tls_server_config.client_auth_type {tls.client_auth_type} accepts a "
            "client certificate no CA verified: not offered here; use "
            "RequireAndVerifyClientCert (or VerifyClientCertIfGiven) with client_ca_file"
        )
    has_ca = tls.client_ca_file is not None or tls.client_ca is not None
    verifies = tls.client_auth_type in ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert")
    if verifies and not has_ca:
        raise WebConfigError(
            f"{where}: tls_server_config.client_auth_type {tls.client_auth_type} needs "
            "client_ca_file (the CA that signs the clients' certificates)"
        )
    if has_ca and not verifies:
        raise WebConfigError(
            f"{where}: tls_server_config: a client CA without a client_auth_type that "
            "verifies (RequireAndVerifyClientCert) would check nothing"
        )
    if tls.client_allowed_sans and tls.client_auth_type != "RequireAndVerifyClientCert":
        raise WebConfigError(
            f"{where}: tls_server_config.client_allowed_sans needs client_auth_type "
            "RequireAndVerifyClientCert (a client without a certificate has no SAN to match)"
        )
    if _VERSIONS[tls.min_version] > _VERSIONS[tls.max_version]:
        raise WebConfigError(f"{where}: tls_server_config: min_version above max_version")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _VERSIONS[tls.min_version]
    ctx.maximum_version = _VERSIONS[tls.max_version]
    if tls.cipher_suites:
        ctx.set_ciphers(":".join(CIPHER_SUITES[s] for s in tls.cipher_suites))
    if tls.prefer_server_cipher_suites:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    if tls.curve_preferences:
        ctx.set_ecdh_curve(_CURVES[tls.curve_preferences[0]])
    try:
        _load_chain(ctx, tls, resolve, used)
    except (OSError, ssl.SSLError) as e:
        raise WebConfigError(
            f"{where}: tls_server_config: the certificate and key cannot be loaded ({e})"
        ) from None
    if has_ca:
        try:
            if tls.client_ca_file is not None:
                ca = resolve(tls.client_ca_file)
                used.append(ca)
                ctx.load_verify_locations(cafile=str(ca))
            else:
                ctx.load_verify_locations(cadata=tls.client_ca)
        except (OSError, ssl.SSLError) as e:
            raise WebConfigError(
                f"{where}: tls_server_config: client CA cannot be loaded ({e})"
            ) from None
        ctx.verify_mode = (
            ssl.CERT_REQUIRED
            if tls.client_auth_type == "RequireAndVerifyClientCert"
            else ssl.CERT_OPTIONAL
        )
    return ctx, used


def _load_chain(ctx: ssl.SSLContext, tls: TLSServerConfig, resolve: Any, used: list[Path]) -> None:
    # load_cert_chain reads files only: an inline cert or key goes through a private
    # temporary file, removed at once.
    with tempfile.TemporaryDirectory(prefix="monitor-tls-") as tmp:
        os.chmod(tmp, 0o700)

        def path_of(name: str | None, inline: str | None, label: str) -> str:
            if name is not None:
                p = resolve(name)
                used.append(p)
                return str(p)
            target = Path(tmp) / label
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(inline or "")
            return str(target)

        cert = path_of(tls.cert_file, tls.cert, "cert.pem")
        key = path_of(
            tls.key_file, tls.key.get_secret_value() if tls.key is not None else None, "key.pem"
        )
        ctx.load_cert_chain(cert, key)


def fingerprint(files: tuple[Path, ...]) -> tuple[tuple[str, int, int, int], ...]:
    """What says a file changed: each file's inode, size and modification time (a
    Kubernetes Secret's update swaps a symlink: a new inode)."""
    out = []
    for p in files:
        try:
            st = p.stat()
            out.append((str(p), st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((str(p), -1, -1, -1))
    return tuple(out)
