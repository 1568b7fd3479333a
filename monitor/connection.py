"""How the monitor connects to a Kafka cluster: one settings model for every client.

The collector talks to Kafka with kafka-python; the Spark job with the Java client (Spark's
Kafka source and sink). Both read the same :class:`KafkaConnection` -- the same keys in a
config file, the same environment variables, the same validation -- and each renders it
for its client: :meth:`KafkaConnection.client_kwargs` (kafka-python) and
:meth:`KafkaConnection.java_options` (``kafka.*`` options of the Java client).

Secrets are :class:`~pydantic.SecretStr` (they print as ``**********``; a validation error
never echoes them) or come from a file (``*_file``: its first line, e.g. a mounted
Kubernetes secret), which keeps them out of the environment and the config file. They are
revealed only in the two renderings, which go straight to a client.

TLS material: PEM files (``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``) work for both
clients. Java key and trust stores (PKCS12, JKS: ``ssl_keystore_*``, ``ssl_truststore_*``)
work for the job only -- kafka-python cannot read them, and the collector refuses them
with a message saying so.

>>> KafkaConnection(bootstrap_servers="b:9092").java_options()
{'kafka.bootstrap.servers': 'b:9092'}
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
StoreType = Literal["PKCS12", "JKS"]


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

    @model_validator(mode="after")
    def _consistent(self) -> KafkaConnection:
        protocol = self.security_protocol
        if protocol.startswith("SASL_"):
            if self.sasl_mechanism is None:
                raise ValueError(f"security_protocol {protocol} needs sasl_mechanism")
            if not self.sasl_username or self.sasl_password is None:
                raise ValueError(
                    f"sasl_mechanism {self.sasl_mechanism} needs sasl_username and "
                    "sasl_password (or sasl_password_file)"
                )
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

    # -- what it says about itself ------------------------------------------------------------

    def secret_values(self) -> list[str]:
        """The revealed secrets (for log redaction)."""
        values = (getattr(self, name) for name in SECRETS)
        return [v.get_secret_value() for v in values if v is not None and v.get_secret_value()]

    def describe(self) -> str:
        """Where and how this connects, for messages (no secrets)."""
        text = f"{self.bootstrap_servers} over {self.security_protocol}"
        if self.security_protocol.startswith("SASL_"):
            text += f" ({self.sasl_mechanism} as user {self.sasl_username!r})"
        if self.ssl_certfile or self.ssl_keystore_location:
            text += f" with client certificate {self.ssl_certfile or self.ssl_keystore_location}"
        return text

    def java_only(self) -> list[str]:
        """The settings kafka-python cannot use (Java key and trust stores)."""
        return [n for n in ("ssl_truststore_location", "ssl_keystore_location") if getattr(self, n)]

    # -- renderings ---------------------------------------------------------------------------

    def client_kwargs(self) -> dict[str, object]:
        """Keyword arguments for kafka-python's clients (secrets revealed here only)."""
        if self.java_only():
            raise ValueError(
                f"{', '.join(self.java_only())}: kafka-python reads PEM files only -- give "
                "ssl_cafile / ssl_certfile (and ssl_keyfile) instead"
            )
        # kafka-python only where its clients are made (the collector): the Spark job reads
        # these settings too, for its Java client.
        from kafka.net.compat import KafkaNetClient

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
        optional = {
            "sasl_mechanism": self.sasl_mechanism if sasl else None,
            "sasl_plain_username": self.sasl_username if sasl else None,
            "sasl_plain_password": _reveal(self.sasl_password) if sasl else None,
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
        o: dict[str, str] = {"bootstrap.servers": self.bootstrap_servers}
        if self.security_protocol != "PLAINTEXT":
            o["security.protocol"] = self.security_protocol
        if self.sasl_mechanism and self.security_protocol.startswith("SASL_"):
            o["sasl.mechanism"] = self.sasl_mechanism
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


def _reveal(secret: SecretStr | None) -> str | None:
    return secret.get_secret_value() if secret is not None else None


def _abs(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def _jaas_quote(value: str) -> str:
    """A JAAS option value: double-quoted, with backslashes and quotes escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
