"""Secured listeners for the lab: a throwaway CA, broker and client certificates, SCRAM.

A lab with ``security="sasl_ssl"`` or ``security="mtls"`` gets one more listener per node,
``SECURE`` on ``base_port + 300 + n - 1``, next to the unchanged ``PLAINTEXT`` client
listener (which the lab's own tooling keeps using: readiness checks, topic creation, fault
injection) and the ``CONTROLLER`` listener:

* ``sasl_ssl``: ``SECURE`` is SASL_SSL with SCRAM-SHA-512 only; the SCRAM user
  :data:`SCRAM_USER` is written into the metadata log at format time (``StorageTool format
  --add-scram`` with a salted password, so the password itself is on no command line);
* ``mtls``: ``SECURE`` is SSL with ``ssl.client.auth=required``; a client must present a
  certificate signed by the lab CA (its principal is ``User:CN=monitor``).

Everything is generated once with the ``openssl`` CLI into ``<dir>/security/`` (mode 0700,
files 0600)::

    ca.pem                 the lab CA certificate (clients' trust store, PEM)
    broker.p12             broker key + certificate (PKCS12, SAN IP:<host>, DNS:localhost)
    broker-store.password  broker.p12's password (read by the broker's FileConfigProvider)
    client.pem             client certificate + its PKCS#8 *encrypted* key, CA appended
    client-key.password    client.pem's key password
    scram.password         SCRAM-SHA-512 password of user ``monitor`` (sasl_ssl only)

``client.pem`` serves both client stacks: kafka-python (``ssl_certfile`` with the key in it,
``ssl_password``) and the Java client in Spark (``ssl.keystore.type=PEM``,
``ssl.key.password``). :func:`kafka_settings` returns the one
:class:`~monitor.connection.KafkaConnection` both read, naming the password *files*, never
the passwords.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import shutil
import subprocess
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
    wanted = [f.ca, f.broker_keystore, f.broker_secrets, f.client_pem, f.client_key_password]
    if all(p.is_file() for p in wanted):
        return f
    old = os.umask(0o077)
    try:
        _generate(f, host)
    finally:
        os.umask(old)
    return f


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
    elif security == "mtls":
        props[f"{p}ssl.client.auth"] = "required"
    else:
        raise ValueError(f"no secured listener for security={security!r}")
    return props


def protocol(security: str) -> str:
    return {"sasl_ssl": "SASL_SSL", "mtls": "SSL"}[security]


def kafka_settings(lab_dir: Path, security: str, bootstrap_servers: str) -> dict[str, object]:
    """:class:`~monitor.connection.KafkaConnection` keys for the lab's ``SECURE`` listener,
    for the collector and the Spark job alike (secrets as files, never the secrets)."""
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
    else:
        out |= {
            "ssl_certfile": str(f.client_pem),
            "ssl_key_password_file": str(f.client_key_password),
        }
    return out
