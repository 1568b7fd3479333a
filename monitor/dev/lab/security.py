"""Secured listeners for the lab: a throwaway CA, broker and client certificates, SCRAM, and
OAUTHBEARER with a signing key of its own.

A lab with ``security="sasl_ssl"``, ``"mtls"`` or ``"oauthbearer"`` gets one more listener per node,
``SECURE`` on ``base_port + 300 + n - 1``, next to the unchanged ``PLAINTEXT`` client
listener (which the lab's own tooling keeps using: readiness checks, topic creation, fault
injection) and the ``CONTROLLER`` listener:

* ``sasl_ssl``: ``SECURE`` is SASL_SSL with SCRAM-SHA-512 only; the SCRAM user
  :data:`SCRAM_USER` is written into the metadata log at format time (``StorageTool format
  --add-scram`` with a salted password, so the password itself is on no command line);
* ``mtls``: ``SECURE`` is SSL with ``ssl.client.auth=required``; a client must present a
  certificate signed by the lab CA (its principal is ``User:CN=monitor``);
* ``oauthbearer``: ``SECURE`` is SASL_SSL with OAUTHBEARER only, checked by Kafka's own
  JWT validator (``OAuthBearerValidatorCallbackHandler``: signature against the lab's JWKS
  file, ``exp``, issuer) -- the lab plays the identity provider: :func:`write_token` signs a
  token (RS256, ``sub`` = :data:`SCRAM_USER`) into ``oauth.token``. Kafka ends an OAUTHBEARER
  session when its token expires (KIP-368: the session lives what the token has left), so a
  client that does not re-authenticate with a new token before loses its connections; the
  listener also caps a session at :data:`OAUTH_MAX_REAUTH_MS` (``connections.max.reauth.ms``:
  the lab's day-long token re-authenticates too). Kafka's *unsecured* validator
  (which accepts unsigned tokens, fine on 127.0.0.1) is not used: the Java client's
  ``OAuthBearerLoginCallbackHandler`` refuses a token without a signature, and the unsecured
  validator refuses one with a signature -- no token passes both.

Everything is generated once with the ``openssl`` CLI into ``<dir>/security/`` (mode 0700,
files 0600)::

    ca.pem                 the lab CA certificate (clients' trust store, PEM)
    broker.p12             broker key + certificate (PKCS12, SAN IP:<host>, DNS:localhost)
    broker-store.password  broker.p12's password (read by the broker's FileConfigProvider)
    client.pem             client certificate + its PKCS#8 *encrypted* key, CA appended
    client-key.password    client.pem's key password
    scram.password         SCRAM-SHA-512 password of user ``monitor`` (sasl_ssl only)
    oauth-signing.key      the lab identity provider's RSA key (tokens' signatures)
    jwks.json              its public key as a JWKS (what the brokers check signatures with)
    oauth.token            a signed token for ``monitor`` (oauthbearer; :func:`ensure_token`)

``client.pem`` serves both client stacks: kafka-python (``ssl_certfile`` with the key in it,
``ssl_password``) and the Java client in Spark (``ssl.keystore.type=PEM``,
``ssl.key.password``). :func:`kafka_settings` returns the one
:class:`~monitor.connection.KafkaConnection` both read, naming the password *files*, never
the passwords.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from monitor.dev.lab.errors import LabError

#: The SCRAM user of a ``sasl_ssl`` lab; with ``mtls`` the client certificate's CN.
SCRAM_USER = "monitor"
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 4096
#: Name of the extra listener (lower-cased in ``listener.name.secure.*`` settings).
SECURE_LISTENER = "SECURE"
_CERT_DAYS = 30
#: The Kafka version an ``oauthbearer`` lab runs (LabConfig refuses 4.x: see there).
OAUTH_KAFKA_VERSION = "3.9.2"
#: The lab identity provider's issuer (``iss``, checked by the brokers) and key id (``kid``).
OAUTH_ISSUER = "monitor-lab"
OAUTH_KEY_ID = "monitor-lab-1"
#: How long a token :func:`ensure_token` writes is valid; rewritten past half of it.
OAUTH_TOKEN_LIFETIME_S = 24 * 3600
#: How long the brokers let an OAUTHBEARER session live at most before the client must
#: re-authenticate (``connections.max.reauth.ms``; a token expiring sooner: its ``exp``,
#: which Kafka enforces by itself).
OAUTH_MAX_REAUTH_MS = 600_000


@dataclass(frozen=True)
class SecurityFiles:
    """Where a lab's key material lives (see the module docstring)."""

    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        return self.dir / "broker.p12"

    @property
    def broker_store_password(self) -> Path:
        return self.dir / "broker-store.password"

    @property
    def broker_secrets(self) -> Path:
        """``key=value`` file the broker's FileConfigProvider reads its store password from."""
        return self.dir / "broker-secrets.properties"

    @property
    def client_pem(self) -> Path:
        return self.dir / "client.pem"

    @property
    def client_key_password(self) -> Path:
        return self.dir / "client-key.password"

    @property
    def scram_password(self) -> Path:
        return self.dir / "scram.password"

    @property
    def oauth_signing_key(self) -> Path:
        return self.dir / "oauth-signing.key"

    @property
    def jwks(self) -> Path:
        return self.dir / "jwks.json"

    @property
    def oauth_token(self) -> Path:
        return self.dir / "oauth.token"

    def read(self, path: Path) -> str:
        return path.read_text().strip()


def files_for(lab_dir: Path) -> SecurityFiles:
    return SecurityFiles(lab_dir / "security")


def _openssl(args: list[str], cwd: Path) -> None:
    if shutil.which("openssl") is None:
        raise LabError("a secured lab needs the `openssl` CLI on PATH (apt-get install openssl)")
    proc = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        raise LabError(f"openssl {args[0]} failed: {proc.stderr.strip()[-2000:]}")


def _secret_file(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(value + "\n")


def _new_password(prefix: str) -> str:
    # URL-safe and quote-free: the JAAS string and properties files need no escaping.
    return f"{prefix}-{secrets.token_hex(16)}"


def ensure_material(lab_dir: Path, host: str, *, scram: bool) -> SecurityFiles:
    """Generate the lab's CA, keys and passwords once (idempotent: kept across `up`s)."""
    f = files_for(lab_dir)
    f.dir.mkdir(parents=True, exist_ok=True)
    f.dir.chmod(0o700)
    if scram and not f.scram_password.is_file():
        _secret_file(f.scram_password, _new_password("lab-scram"))
    old = os.umask(0o077)
    try:
        # The identity provider's key for every secured lab (one RSA key, made once): the
        # callers do not say which mode they start.
        if not (f.oauth_signing_key.is_file() and f.jwks.is_file()):
            _generate_signing_key(f)
        wanted = [f.ca, f.broker_keystore, f.broker_secrets, f.client_pem, f.client_key_password]
        if not all(p.is_file() for p in wanted):
            _generate(f, host)
    finally:
        os.umask(old)
    return f


def _generate_signing_key(f: SecurityFiles) -> None:
    """The lab identity provider's RSA key and its public half as a JWKS (RFC 7517)."""
    tmp = f.dir / "oauth-signing.key.tmp"
    _openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
              "-out", tmp.name], f.dir)  # fmt: skip
    tmp.chmod(0o600)
    proc = subprocess.run(
        ["openssl", "rsa", "-in", str(tmp), "-noout", "-modulus"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    if proc.returncode != 0 or not proc.stdout.startswith("Modulus="):
        raise LabError(f"openssl rsa -modulus failed: {proc.stderr.strip()[-2000:]}")
    modulus = bytes.fromhex(proc.stdout.strip().removeprefix("Modulus="))
    key = {
        "kty": "RSA", "use": "sig", "alg": "RS256", "kid": OAUTH_KEY_ID,
        "n": _b64url(modulus), "e": _b64url((65537).to_bytes(3, "big")),  # genpkey's exponent
    }  # fmt: skip
    f.jwks.write_text(json.dumps({"keys": [key]}, indent=2) + "\n")
    tmp.replace(f.oauth_signing_key)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign_token(
    f: SecurityFiles,
    *,
    lifetime_s: float,
    subject: str = SCRAM_USER,
    now: float | None = None,
    claims: dict[str, object] | None = None,
) -> str:
    """A JWT (RS256) signed with the lab's key: ``sub``, ``iss``, ``iat``, ``exp`` (``now +
    lifetime_s``), a fresh ``jti`` and ``claims``. Signed by ``openssl dgst`` (the key stays
    in its file)."""
    issued = time.time() if now is None else now
    header = {"alg": "RS256", "typ": "JWT", "kid": OAUTH_KEY_ID}
    payload = {
        "sub": subject, "iss": OAUTH_ISSUER, "iat": int(issued),
        "exp": int(issued + lifetime_s), "jti": secrets.token_hex(8), **(claims or {}),
    }  # fmt: skip
    signing_input = ".".join(
        _b64url(json.dumps(part, separators=(",", ":")).encode()) for part in (header, payload)
    )
    proc = subprocess.run(
        ["openssl", "dgst", "-sha256", "-sign", str(f.oauth_signing_key)],
        input=signing_input.encode(), capture_output=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise LabError(f"openssl dgst -sign failed: {proc.stderr.decode(errors='replace')[-2000:]}")
    return f"{signing_input}.{_b64url(proc.stdout)}"


def write_token(f: SecurityFiles, token: str, path: Path | None = None) -> Path:
    """Replace ``path`` (default ``oauth.token``) with ``token`` at once (a new file renamed
    over it, as a sidecar or the kubelet does), mode 0600."""
    target = f.oauth_token if path is None else path
    tmp = target.with_name(target.name + ".tmp")
    _secret_file(tmp, token)
    tmp.replace(target)
    return target


def token_expiry(token: str) -> float | None:
    """A JWT's ``exp`` (seconds since the epoch), None if it has none."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, ValueError, KeyError, TypeError):
        return None


def ensure_token(lab_dir: Path) -> Path:
    """``oauth.token``, (re)written with a token valid :data:`OAUTH_TOKEN_LIFETIME_S` when
    it is missing or past half of its life."""
    f = files_for(lab_dir)
    if f.oauth_token.is_file():
        exp = token_expiry(f.read(f.oauth_token))
        if exp is not None and exp - time.time() > OAUTH_TOKEN_LIFETIME_S / 2:
            return f.oauth_token
    return write_token(f, sign_token(f, lifetime_s=OAUTH_TOKEN_LIFETIME_S))


def _generate(f: SecurityFiles, host: str) -> None:
    d = f.dir
    work = d / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    try:
        store_pw = _new_password("lab-store")
        _secret_file(f.broker_store_password, store_pw)
        _secret_file(f.broker_secrets, f"keystore.password={store_pw}")
        if not f.client_key_password.is_file():
            _secret_file(f.client_key_password, _new_password("lab-key"))
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        # The CA.
        _openssl(
            [
                "req", "-x509", *ec, "-keyout", "work/ca.key", "-out", "ca.pem",
                "-days", str(_CERT_DAYS), "-subj", "/CN=monitor-lab-ca",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ],
            d,
        )  # fmt: skip
        for name, subject, ext in (
            (
                "broker",
                "/CN=monitor-lab-broker",
                f"subjectAltName=IP:{host},IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth,clientAuth\n",
            ),
            ("client", f"/CN={SCRAM_USER}", "extendedKeyUsage=clientAuth\n"),
        ):
            _openssl(
                ["req", "-new", *ec, "-keyout", f"work/{name}.key", "-out", f"work/{name}.csr",
                 "-subj", subject],
                d,
            )  # fmt: skip
            (work / f"{name}.ext").write_text(ext)
            _openssl(
                ["x509", "-req", "-in", f"work/{name}.csr", "-CA", "ca.pem",
                 "-CAkey", "work/ca.key", "-CAcreateserial", "-days", str(_CERT_DAYS),
                 "-extfile", f"work/{name}.ext", "-out", f"work/{name}.crt"],
                d,
            )  # fmt: skip
        _openssl(
            ["pkcs12", "-export", "-in", "work/broker.crt", "-inkey", "work/broker.key",
             "-certfile", "ca.pem", "-name", "broker", "-out", "broker.p12",
             "-passout", f"file:{f.broker_store_password.name}"],
            d,
        )  # fmt: skip
        # PKCS#8 with PBES1/3DES: both OpenSSL (kafka-python) and the JDK's
        # EncryptedPrivateKeyInfo (the Java client's PEM key store) can decrypt it.
        _openssl(
            ["pkcs8", "-topk8", "-in", "work/client.key", "-out", "work/client.key.enc",
             "-v1", "PBE-SHA1-3DES", "-passout", f"file:{f.client_key_password.name}"],
            d,
        )  # fmt: skip
        pem = (
            (work / "client.crt").read_text()
            + (work / "client.key.enc").read_text()
            + f.ca.read_text()
        )
        tmp = d / "client.pem.tmp"
        _secret_file(tmp, pem.rstrip("\n"))
        tmp.replace(f.client_pem)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for leftover in d.glob("*.srl"):
            leftover.unlink()


def scram_format_argument(password: str, salt: bytes | None = None) -> str:
    """``StorageTool format --add-scram`` value with a salted password (not the password).

    SCRAM's SaltedPassword is PBKDF2-HMAC-SHA512(password, salt, iterations) (RFC 5802);
    the broker stores it (as stored/server keys), so the password never leaves this process.
    """
    salt = salt if salt is not None else secrets.token_bytes(24)
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, SCRAM_ITERATIONS)
    b64 = base64.b64encode
    return (
        f'{SCRAM_MECHANISM}=[name={SCRAM_USER},salt="{b64(salt).decode()}",'
        f'saltedpassword="{b64(salted).decode()}",iterations={SCRAM_ITERATIONS}]'
    )


def listener_properties(f: SecurityFiles, security: str) -> dict[str, str]:
    """``server.properties`` entries of the ``SECURE`` listener (not the listener list)."""
    p = f"listener.name.{SECURE_LISTENER.lower()}."
    props = {
        # The store password comes from a file through Kafka's FileConfigProvider: it is in
        # no server.properties and (as a password config) Kafka logs it as [hidden].
        "config.providers": "file",
        "config.providers.file.class": (
            "org.apache.kafka.common.config.provider.FileConfigProvider"
        ),
        f"{p}ssl.keystore.type": "PKCS12",
        f"{p}ssl.keystore.location": str(f.broker_keystore),
        f"{p}ssl.keystore.password": f"${{file:{f.broker_secrets}:keystore.password}}",
        f"{p}ssl.truststore.type": "PEM",
        f"{p}ssl.truststore.location": str(f.ca),
    }
    if security == "sasl_ssl":
        props[f"{p}sasl.enabled.mechanisms"] = SCRAM_MECHANISM
        props[f"{p}{SCRAM_MECHANISM.lower()}.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        )
    elif security == "oauthbearer":
        o = f"{p}oauthbearer."
        oauth = "org.apache.kafka.common.security.oauthbearer"
        validator = f"{oauth}.OAuthBearerValidatorCallbackHandler"
        props |= {
            f"{p}sasl.enabled.mechanisms": "OAUTHBEARER",
            f"{o}sasl.jaas.config": f"{oauth}.OAuthBearerLoginModule required;",
            # Kafka's JWT validator (KIP-768), as a broker behind a real identity provider
            # runs it: the signature against the JWKS, exp (no clock skew allowed: one host),
            # the issuer. A Kafka 4 broker would also need the JWKS file's URL in the JVM's
            # -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls (LabConfig allows 3.9 only).
            f"{o}sasl.server.callback.handler.class": validator,
            f"{o}sasl.oauthbearer.jwks.endpoint.url": f.jwks.as_uri(),
            f"{o}sasl.oauthbearer.expected.issuer": OAUTH_ISSUER,
            f"{o}sasl.oauthbearer.clock.skew.seconds": "0",
            # A session ends when its token expires (Kafka's own rule, KIP-368) or after
            # this long: the client re-authenticates before, or loses the connection.
            f"{o}connections.max.reauth.ms": str(OAUTH_MAX_REAUTH_MS),
        }
    elif security == "mtls":
        props[f"{p}ssl.client.auth"] = "required"
    else:
        raise ValueError(f"no secured listener for security={security!r}")
    return props


#: Every secured lab runs KRaft's authorizer, allowing what no ACL governs: the lab's own
#: listeners (PLAINTEXT, CONTROLLER) are unauthenticated, ANONYMOUS, and a super user; an
#: ACL a test sets on a topic is then the whole truth for that topic (the monitor's --check
#: reads a missing permission from the brokers: tests/security/test_secured_lab.py).
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:ANONYMOUS",
}

#: The principal of the lab's client, by security mode (the SCRAM user; the certificate's
#: distinguished name; the token's subject).
PRINCIPALS = {"sasl_ssl": "User:monitor", "mtls": "User:CN=monitor", "oauthbearer": "User:monitor"}


def protocol(security: str) -> str:
    return {"sasl_ssl": "SASL_SSL", "mtls": "SSL", "oauthbearer": "SASL_SSL"}[security]


def kafka_settings(lab_dir: Path, security: str, bootstrap_servers: str) -> dict[str, object]:
    """:class:`~monitor.connection.KafkaConnection` keys for the lab's ``SECURE`` listener,
    for the collector and the Spark job alike (secrets as files, never the secrets); for
    ``oauthbearer`` the token file, written first if it is missing or half expired."""
    f = files_for(lab_dir)
    out: dict[str, object] = {
        "bootstrap_servers": bootstrap_servers,
        "security_protocol": protocol(security),
        "ssl_cafile": str(f.ca),
    }
    if security == "sasl_ssl":
        out |= {
            "sasl_mechanism": SCRAM_MECHANISM,
            "sasl_username": SCRAM_USER,
            "sasl_password_file": str(f.scram_password),
        }
    elif security == "oauthbearer":
        out |= {
            "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauth_token_file": str(ensure_token(lab_dir)),
        }
    else:
        out |= {
            "ssl_certfile": str(f.client_pem),
            "ssl_key_password_file": str(f.client_key_password),
        }
    return out
