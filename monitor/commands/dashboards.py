"""`monitor dashboards generate|push`: the Grafana dashboards of ``dashboards/``.

``push`` provisions a Grafana through its HTTP API (``grafana-client``), idempotently: the
Prometheus datasource is created or updated under the fixed uid the dashboards refer to,
the folder is created if missing, and every dashboard is uploaded with ``overwrite`` by
its uid — running it twice changes nothing but the dashboards' version numbers. For file
provisioning instead, see ``deploy/grafana/provisioning`` and docs/dashboards.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from monitor import assets

#: Where ``generate`` writes by default: the package's own folder in a checkout (the
#: committed JSON), the current directory's ``grafana-dashboards`` for an installed wheel.
_CHECKOUT = assets.checkout_root()
GENERATE_DIR = _CHECKOUT / "dashboards" / "json" if _CHECKOUT else Path("grafana-dashboards")
DEFAULT_FOLDER = "Kafka replication"


class PushError(RuntimeError):
    """A problem worth one clear line: names the Grafana URL and what went wrong."""


@dataclass
class PushReport:
    grafana_version: str = ""
    datasource: str = ""  # "created" / "updated"
    folder: str = ""
    dashboards: list[tuple[str, str]] = field(default_factory=list)  # (uid, url)


def describe_error(url: str, exc: BaseException) -> str:
    """One line for a failed call to the Grafana at ``url``."""
    from grafana_client.client import (
        GrafanaClientError,
        GrafanaException,
        GrafanaServerError,
        GrafanaTimeoutError,
        GrafanaUnauthorizedError,
    )

    if isinstance(exc, GrafanaUnauthorizedError):
        return (
            f"Grafana at {url} rejected the credentials (401 Unauthorized): check the token "
            "($GRAFANA_TOKEN, --token-file), or --user and its password"
        )
    if isinstance(exc, GrafanaTimeoutError):
        return f"Grafana at {url} did not answer in time: {exc.message}"
    if isinstance(exc, GrafanaClientError) and exc.status_code == 403:
        return (
            f"Grafana at {url} refused the request (403 Forbidden): the token or user needs "
            f"the Editor role (datasources and dashboards write): {exc.message}"
        )
    if isinstance(exc, GrafanaClientError | GrafanaServerError):
        return f"Grafana at {url} answered {exc.status_code}: {exc.message}"
    if isinstance(exc, GrafanaException):
        return f"cannot reach Grafana at {url}: {exc.message}"
    # Connection refused, unknown host, TLS: the HTTP library's own exceptions.
    reason = str(exc).strip() or type(exc).__name__
    errno = re.search(r"\[Errno (-?\d+)\] ([^'\")]+)", reason)
    unresolved = re.search(r"Failed to resolve '([^']+)'", reason)
    if errno:
        reason = f"{errno.group(2).strip()} (errno {errno.group(1)})"
    elif unresolved:
        reason = f"cannot resolve host {unresolved.group(1)!r}"
    return f"cannot reach Grafana at {url}: {reason}"


def load_dashboards(directory: Path | None = None) -> dict[str, dict[str, Any]]:
    """The dashboards' JSON by file name: from ``directory``, else the ones shipped in the
    ``dashboards`` package (read as package data, wherever it is installed)."""
    if directory is None:
        shipped = resources.files("dashboards").joinpath("json")
        files = [f for f in shipped.iterdir() if f.name.endswith(".json")]
        return {f.name: json.loads(f.read_text()) for f in sorted(files, key=lambda f: f.name)}
    paths = sorted(directory.glob("*.json"))
    if not paths:
        raise PushError(f"no dashboards in {directory}: run `monitor dashboards generate`")
    return {p.name: json.loads(p.read_text()) for p in paths}


def datasource_body(prometheus_url: str) -> dict[str, Any]:
    from dashboards.generate import DATASOURCE_NAME, DATASOURCE_UID

    return {
        "uid": DATASOURCE_UID,
        "name": DATASOURCE_NAME,
        "type": "prometheus",
        "access": "proxy",
        "url": prometheus_url,
        "isDefault": False,
        "jsonData": {"httpMethod": "POST", "timeInterval": "15s"},
    }


def push(
    url: str,
    credential: str | tuple[str, str] | None,
    *,
    folder: str = DEFAULT_FOLDER,
    prometheus_url: str = "http://127.0.0.1:9090",
    dashboards: dict[str, dict[str, Any]] | None = None,
    timeout: float = 10.0,
    say: Callable[[str], None] = print,
) -> PushReport:
    """Provision the Grafana at ``url``; raises :class:`PushError` with one clear line."""
    import niquests
    from grafana_client.api import GrafanaApi
    from grafana_client.client import GrafanaClientError, GrafanaException

    from dashboards.generate import DATASOURCE_UID, FOLDER_UID

    boards = dashboards if dashboards is not None else load_dashboards()
    report = PushReport()
    api = GrafanaApi.from_url(url, credential=credential, timeout=timeout)
    try:
        # Unauthenticated: is this a Grafana at all?
        health = api.client.GET("/health")
        if not isinstance(health, dict) or "database" not in health:
            raise PushError(
                f"{url} does not look like Grafana: GET /api/health answered {str(health)[:120]!r}"
            )
        report.grafana_version = str(health.get("version", "?"))
        # Authenticated from here on: a rejected token fails on the first call.
        body = datasource_body(prometheus_url)
        try:
            api.datasource.get_datasource_by_uid(DATASOURCE_UID)
        except GrafanaClientError as e:
            if e.status_code != 404:
                raise
            api.datasource.create_datasource(body)
            report.datasource = "created"
        else:
            api.datasource.update_datasource_by_uid(DATASOURCE_UID, body)
            report.datasource = "updated"
        say(f"datasource {DATASOURCE_UID} ({prometheus_url}): {report.datasource}")
        try:
            existing = api.folder.get_folder(FOLDER_UID)
        except GrafanaClientError as e:
            if e.status_code != 404:
                raise
            api.folder.create_folder(folder, uid=FOLDER_UID)
            report.folder = "created"
        else:
            if existing.get("title") != folder:
                api.folder.update_folder(FOLDER_UID, title=folder, overwrite=True)
                report.folder = "renamed"
            else:
                report.folder = "present"
        say(f"folder {folder!r} (uid {FOLDER_UID}): {report.folder}")
        for name, d in boards.items():
            res = api.dashboard.update_dashboard(
                {
                    "dashboard": {**d, "id": None},
                    "folderUid": FOLDER_UID,
                    "overwrite": True,
                    "message": "monitor dashboards push",
                }
            )
            where = f"{url.rstrip('/')}{res.get('url', '')}" if isinstance(res, dict) else url
            report.dashboards.append((d["uid"], where))
            say(f"dashboard {d['uid']} ({name}): {where}")
    except PushError:
        raise
    except (GrafanaException, niquests.exceptions.RequestException, OSError, ValueError) as e:
        raise PushError(describe_error(url, e)) from e
    return report


# -- CLI -----------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dashboards",
        help="generate the Grafana dashboards, or push them to a Grafana",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    dsub = p.add_subparsers(dest="dashboards_command", metavar="ACTION")
    dsub.required = True
    g = dsub.add_parser("generate", help="write the dashboards' JSON (Grafana's model)")
    g.add_argument(
        "--out", type=Path, default=GENERATE_DIR, help=f"output folder (default: {GENERATE_DIR})"
    )
    g.set_defaults(func=_generate)
    u = dsub.add_parser(
        "push",
        help="create/update the datasource, folder and dashboards in a Grafana (HTTP API)",
    )
    u.add_argument("--url", required=True, help="Grafana's base URL, e.g. http://127.0.0.1:3000")
    # Secrets never as flags (a flag shows in `ps` and in shell history): from the
    # environment or a file.
    u.add_argument(
        "--token-file",
        type=Path,
        help="file holding the service account token (default: $GRAFANA_TOKEN)",
    )
    u.add_argument("--user", help="basic auth user (instead of a token)")
    u.add_argument(
        "--password-file",
        type=Path,
        help="file holding the basic auth password (default: $GRAFANA_PASSWORD)",
    )
    u.add_argument("--token", dest="secret_flag", action="store_const", const="--token",
                   help=argparse.SUPPRESS)  # fmt: skip
    u.add_argument("--password", dest="secret_flag", action="store_const", const="--password",
                   help=argparse.SUPPRESS)  # fmt: skip
    u.add_argument("--folder", default=DEFAULT_FOLDER, help=f"folder title ({DEFAULT_FOLDER!r})")
    u.add_argument(
        "--prometheus-url",
        default="http://127.0.0.1:9090",
        help="the Prometheus the datasource points at, as Grafana's server reaches it",
    )
    u.add_argument(
        "--dir", type=Path, default=None, help="dashboards folder (default: the shipped ones)"
    )
    u.add_argument("--timeout", type=float, default=10.0, help="per request, seconds")
    u.set_defaults(func=_push)


def _generate(args: argparse.Namespace) -> int:
    from dashboards.generate import write

    for path in write(args.out):
        print(f"wrote {path}")
    return 0


def _secret(path: Path | None, env: str) -> str | None:
    """A secret from its file (one line; the trailing newline dropped), else ``$env``."""
    if path is not None:
        return path.read_text().rstrip("\n")
    return os.environ.get(env) or None


def _push(args: argparse.Namespace) -> int:
    if args.secret_flag:
        flag = args.secret_flag
        print(
            f"monitor dashboards push: {flag} takes no value on the command line (it would "
            f"show in ps and the shell's history): set $GRAFANA_{flag[2:].upper()} or use "
            f"{flag}-file FILE",
            file=sys.stderr,
        )
        return 64  # monitor.cli.EXIT_USAGE
    credential: str | tuple[str, str] | None
    try:
        token = _secret(args.token_file, "GRAFANA_TOKEN")
        password = _secret(args.password_file, "GRAFANA_PASSWORD")
    except OSError as e:
        print(f"monitor dashboards push: cannot read the secret: {e}", file=sys.stderr)
        return 66  # EX_NOINPUT
    if args.user:
        if not password:
            print(
                "monitor dashboards push: --user needs a password ($GRAFANA_PASSWORD or "
                "--password-file)",
                file=sys.stderr,
            )
            return 64  # monitor.cli.EXIT_USAGE
        credential = (args.user, password)
    elif token:
        credential = token
    else:
        credential = None  # anonymous: only for a Grafana with anonymous Editor access
    try:
        report = push(
            args.url,
            credential,
            folder=args.folder,
            prometheus_url=args.prometheus_url,
            dashboards=load_dashboards(args.dir),
            timeout=args.timeout,
        )
    except PushError as e:
        print(f"monitor dashboards push: {e}", file=sys.stderr)
        return 2
    print(
        f"pushed {len(report.dashboards)} dashboards to Grafana {report.grafana_version} "
        f"at {args.url}"
    )
    return 0
