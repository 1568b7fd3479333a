"""Keeping the collector's Kafka credentials out of logs, and naming connection failures.

* :func:`install_redaction`: kafka-python logs its whole client configuration at DEBUG
  (``Starting KafkaAdminClient with configuration: {... 'sasl_plain_password': ...}``), and
  each request, an OAUTHBEARER token in its SaslAuthenticate request. A filter on every
  ``kafka.*`` logger replaces each configured secret and each token handed out
  (:func:`monitor.connection.issued_tokens`) with ``**********`` in any record, whatever
  the level.
* :func:`explain_connect_failure`: when the brokers reject credentials, kafka-python 3.0
  reports only ``Unable to bootstrap`` (it drops the broker's SASL error response that
  arrives together with the connection close). A TCP + TLS probe with the same settings
  tells which step failed: connecting, the TLS handshake (an untrusted certificate, a
  client certificate the broker requires or refuses) or, when TLS works, SASL
  authentication. The message names the step, the user (or the token's source) and the
  mechanism, never a secret. A token that cannot be had (a missing file, a failing command)
  or a missing botocore is said as it is: one line naming the setting.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading

from monitor.connection import KafkaConnection, issued_tokens

REDACTED = "**********"


class SecretRedactor(logging.Filter):
    """Replaces known secret strings in a record's message (and drops its args)."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()
        self._lock = threading.Lock()

    def add(self, *secrets: str) -> None:
        with self._lock:
            self._secrets.update(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = [*self._secrets, *issued_tokens()]
        if not secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave the record as it is
            return True
        redacted = message
        for s in secrets:
            redacted = redacted.replace(s, REDACTED)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and not record.exc_text:
            text = logging.Formatter().formatException(record.exc_info)
            for s in secrets:
                text = text.replace(s, REDACTED)
            record.exc_text = text
        return True


_REDACTOR = SecretRedactor()


def install_redaction(*settings: KafkaConnection | None) -> SecretRedactor:
    """Redact the secrets of ``settings`` from every ``kafka`` logger's records.

    Logger filters are not inherited, so the filter goes on each existing ``kafka.*``
    logger (kafka-python creates them at import) and on ``kafka`` itself.
    """
    import kafka  # noqa: F401  (its module loggers exist once it is imported)

    for s in settings:
        if s is not None:
            _REDACTOR.add(*s.secret_values())
    names = [n for n in logging.root.manager.loggerDict if n == "kafka" or n.startswith("kafka.")]
    for name in ["kafka", *names]:
        logger = logging.getLogger(name)
        if _REDACTOR not in logger.filters:
            logger.addFilter(_REDACTOR)
    return _REDACTOR


class KafkaConnectError(RuntimeError):
    """The collector could not connect to (or authenticate with) the brokers."""


def _ssl_context(s: KafkaConnection) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=s.ssl_cafile)
    if s.ssl_certfile:
        ctx.load_cert_chain(
            s.ssl_certfile,
            s.ssl_keyfile,
            password=s.ssl_key_password.get_secret_value() if s.ssl_key_password else None,
        )
    return ctx


def probe(s: KafkaConnection, timeout_s: float = 5.0) -> str | None:
    """Connect to the first bootstrap server as the client would, up to (not including)
    SASL. None when that works, else what failed (no secrets in it)."""
    host, _, port = s.bootstrap_servers.split(",")[0].strip().rpartition(":")
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    except OSError as e:
        return f"cannot connect to {host}:{port}: {e.strerror or e}"
    with sock:
        if not s.security_protocol.endswith("SSL"):
            return None
        try:
            ctx = _ssl_context(s)
        except (OSError, ssl.SSLError) as e:
            return f"cannot load the TLS files (ssl_cafile / ssl_certfile / ssl_keyfile): {e}"
        try:
            with ctx.wrap_socket(sock, server_hostname=host) as tls:
                # With TLS 1.3 the broker judges the client certificate after the handshake
                # and says so in an alert: read briefly to receive it.
                tls.settimeout(1.0)
                try:
                    if tls.recv(1) == b"":
                        return (
                            "the broker closed the TLS connection after the handshake (it "
                            "requires a client certificate, or does not trust this one)"
                        )
                except TimeoutError:
                    pass
                except ssl.SSLError as e:
                    hint = (
                        " (the broker requires a client certificate: set ssl_certfile)"
                        if not s.ssl_certfile
                        else " (is the client certificate signed by a CA the broker trusts?)"
                    )
                    return f"TLS rejected by the broker: {e.reason or e}{hint}"
                except ConnectionError as e:
                    return f"the broker reset the TLS connection after the handshake: {e}"
        except ssl.SSLCertVerificationError as e:
            return f"the broker's certificate is not trusted: {e.verify_message}"
        except ssl.SSLError as e:
            return f"TLS handshake failed: {e.reason or e}"
        except OSError as e:
            return f"TLS handshake failed: {e.strerror or e}"
    return None


#: Why the brokers may refuse a login, by mechanism.
_REFUSED_BECAUSE = {
    "OAUTHBEARER": "expired, for another issuer or audience, or signed by a key the brokers "
    "do not trust?",
    "AWS_MSK_IAM": "no IAM policy allowing kafka-cluster:Connect, or no AWS credentials or "
    "region (AWS_REGION)?",
}


def explain_connect_failure(s: KafkaConnection, error: BaseException) -> KafkaConnectError:
    """A :class:`KafkaConnectError` naming the step that failed (no secrets)."""
    where = s.describe()
    from kafka.errors import KafkaConfigurationError

    if isinstance(error, KafkaConfigurationError):  # a token or botocore: said as it is
        detail = error.args[0] if error.args else type(error).__name__
        return KafkaConnectError(f"cannot use Kafka at {where}: {detail}")
    problem = probe(s)
    if problem is None and s.security_protocol.startswith("SASL_"):
        because = _REFUSED_BECAUSE.get(s.sasl_mechanism or "", "wrong username or password?")
        problem = (
            f"SASL authentication failed: the brokers accepted the connection but rejected "
            f"{s.sasl_mechanism} {s.sasl_identity()} ({because})"
        )
    elif problem is None:
        problem = f"the brokers did not answer in time ({type(error).__name__})"
    return KafkaConnectError(f"cannot use Kafka at {where}: {problem}")
