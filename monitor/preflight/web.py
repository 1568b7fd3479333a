"""The check of a ``/metrics`` web configuration file (``monitor collect|stream|run --check``)."""

from __future__ import annotations

from pathlib import Path

from monitor.preflight.report import Report
from monitor.web import WebConfigError, load


def check_web_config(report: Report, what: str, path: Path | None, host: str) -> None:
    """The web configuration file loads (TLS, users); an unguarded endpoint on an address
    other than loopback is said, not failed (a private network may be the guard)."""
    try:
        config = load(path)
    except WebConfigError as e:
        report.fail(f"{what} web configuration", str(e))
        return
    if path is not None:
        report.ok(
            f"{what} web configuration",
            f"{path}: {'TLS' if config.tls else 'no TLS'}, {len(config.users)} basic-auth user(s)",
        )
    elif host not in ("127.0.0.1", "::1", "localhost"):
        report.say(
            f"{what}: served on {host} with no TLS and no authentication -- give "
            '--web-config-file (docs/deploy.md, "Securing /metrics")'
        )
