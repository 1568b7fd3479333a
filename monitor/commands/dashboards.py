"""`monitor dashboards generate|push`: the Grafana dashboards of ``dashboards/``.

``push`` provisions a Grafana through its HTTP API (the standard library's HTTP client:
the base install carries no HTTP library), idempotently: the Prometheus datasource is
created or updated under the fixed uid the dashboards refer to, the folder is created if
missing, and every dashboard is uploaded with ``overwrite`` by its uid -- running it twice
changes nothing but the dashboards' version numbers. It sends the JSON shipped in the
``dashboards`` package; ``generate`` builds that JSON with Grafana's foundation SDK, which
is the ``dashboards`` extra's. For file provisioning instead, see
``deploy/grafana/provisioning`` and docs/dashboards.md.

A token or password goes over ``https://``, or plain ``http://`` to this machine's loopback
only (``localhost``, 127.0.0.1, ``::1``: a port-forward or an SSH tunnel), unless
``--allow-insecure-credentials`` says otherwise (:func:`monitor.connection.exposed_in_clear`).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import socket
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from dashboards import DATASOURCE_NAME, DATASOURCE_UID, FOLDER_UID
from monitor import __version__, assets
from monitor.connection import exposed_in_clear

#: Where ``generate`` writes by default: the package's own folder in a checkout (the
#: committed JSON), the current directory's ``grafana-dashboards`` for an installed wheel.
_CHECKOUT = assets.checkout_root()
GENERATE_DIR = _CHECKOUT / "dashboards" / "json" if _CHECKOUT else Path("grafana-dashboards")
DEFAULT_FOLDER = "Kafka replication"
#: The extra that brings Grafana's foundation SDK, which ``generate`` builds with.
EXTRA = "dashboards"
SDK_MODULE = "grafana_foundation_sdk"


class PushError(RuntimeError):
    """A problem worth one clear line: names the Grafana URL and what went wrong."""


class GrafanaError(Exception):
    """Grafana's answer to a request was not a success: its HTTP status and its message
    (the ``message`` of Grafana's JSON error body, else the body's start, else the reason)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


@dataclass
class PushReport:
    grafana_version: str = ""
    datasource: str = ""  # "created" / "updated"
    folder: str = ""
    dashboards: list[tuple[str, str]] = field(default_factory=list)  # (uid, url)


def describe_error(url: str, exc: BaseException) -> str:
    """One line for a failed call to the Grafana at ``url``."""
    if isinstance(exc, GrafanaError):
        if exc.status == 401:
            return (
                f"Grafana at {url} rejected the credentials (401 Unauthorized): check the "
                "token ($GRAFANA_TOKEN, --token-file), or --user and its password"
            )
        if exc.status == 403:
            return (
                f"Grafana at {url} refused the request (403 Forbidden): the token or user "
                f"needs the Editor role (datasources and dashboards write): {exc.message}"
            )
        return f"Grafana at {url} answered {exc.status}: {exc.message}"
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        exc = exc.reason  # what the connection itself failed on
    if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError
        return f"Grafana at {url} did not answer in time: check the URL, or raise --timeout"
    if isinstance(exc, socket.gaierror):
        host = urllib.parse.urlsplit(url).hostname
        return f"cannot reach Grafana at {url}: cannot resolve host {host!r} ({exc.strerror})"
    if isinstance(exc, ssl.SSLError):
        return f"cannot reach Grafana at {url}: TLS failed: {exc.reason or exc}"
    if isinstance(exc, http.client.RemoteDisconnected):
        return f"cannot reach Grafana at {url}: the server closed the connection unanswered"
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
        return f"cannot reach Grafana at {url}: {exc.strerror} (errno {exc.errno})"
    if isinstance(exc, http.client.HTTPException):
        return f"cannot reach Grafana at {url}: not an HTTP answer ({type(exc).__name__})"
    reason = str(getattr(exc, "reason", "") or exc).strip() or type(exc).__name__
    return f"cannot reach Grafana at {url}: {reason}"


def check_url(url: str) -> str | None:
    """What is wrong with ``url`` as a Grafana base URL, or None."""
    parts = urllib.parse.urlsplit(url)
    try:
        parts.port  # noqa: B018 -- raises on a port that is not a number
    except ValueError:
        return f"--url {url!r}: the port is not a number from 0 to 65535"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--url {url!r}: not an http:// or https:// URL with a host"
    if parts.username is not None or parts.password is not None:
        return (
            f"--url {parts._replace(netloc=parts.netloc.rpartition('@')[2]).geturl()!r} "
            "carries credentials (user:password@): they would show in ps and the shell's "
            "history; set $GRAFANA_TOKEN or use --token-file, or --user with "
            "$GRAFANA_PASSWORD or --password-file"
        )
    if parts.query or parts.fragment:
        return f"--url {url!r}: a base URL has no ?query or #fragment"
    return None


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
    boards = {}
    for p in paths:
        try:
            board = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise PushError(f"cannot read dashboard {p}: {e}") from None
        if not isinstance(board, dict) or not isinstance(board.get("uid"), str):
            raise PushError(f'{p} is not a dashboard: no "uid" in its JSON object')
        boards[p.name] = board
    return boards


def datasource_body(prometheus_url: str) -> dict[str, Any]:
    return {
        "uid": DATASOURCE_UID,
        "name": DATASOURCE_NAME,
        "type": "prometheus",
        "access": "proxy",
        "url": prometheus_url,
        "isDefault": False,
        "jsonData": {"httpMethod": "POST", "timeInterval": "15s"},
    }


def authorization(credential: str | tuple[str, str] | None) -> str | None:
    """The ``Authorization`` header for a token (Bearer) or a user and password (Basic)."""
    if credential is None:
        return None
    if isinstance(credential, str):
        return f"Bearer {credential}"
    user, password = credential
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error, not followed: the credentials go to the URL given, no other."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass
class GrafanaApi:
    """Grafana's HTTP API at ``url`` (``/api/...``), JSON in and out, one request a call."""

    url: str
    credential: str | tuple[str, str] | None = None
    timeout: float = 10.0

    def __post_init__(self) -> None:
        self._base = self.url.rstrip("/") + "/api"
        self._auth = authorization(self.credential)
        self._opener = urllib.request.build_opener(_NoRedirect)

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, auth: bool = True
    ) -> Any:
        """The answer's JSON; raises :class:`GrafanaError` for an HTTP error status, the
        connection's own ``OSError`` / ``http.client.HTTPException`` otherwise."""
        headers = {
            "Accept": "application/json",
            "User-Agent": f"kafka-replication-monitor/{__version__}",
        }
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if auth and self._auth:
            headers["Authorization"] = self._auth
        request = urllib.request.Request(
            self._base + path, data=data, headers=headers, method=method
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw: bytes = response.read()
        except urllib.error.HTTPError as e:
            with e:
                raise GrafanaError(e.code, _error_message(e, self.url, path)) from None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")


def _error_message(e: urllib.error.HTTPError, url: str, path: str) -> str:
    """What an error answer says: Grafana's ``{"message": ...}``, else the body's start,
    else the HTTP reason; a redirect says where to."""
    if 300 <= e.code < 400:
        to = urllib.parse.urljoin(e.geturl(), e.headers.get("Location") or "")
        base = to.removesuffix("/api" + path)
        advice = f"use --url {base}" if base != to and base != url.rstrip("/") else "not followed"
        return f"a redirect to {to} ({advice})"
    try:
        raw = e.read()
    except OSError:
        raw = b""
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    text = " ".join(raw.decode("utf-8", "replace").split())[:200]
    return text or str(e.reason)


def _json_object(answer: Any, what: str) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise ValueError(f"{what} answered {str(answer)[:120]!r}, not a JSON object")
    return answer


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
    problem = check_url(url)
    if problem:
        raise PushError(problem)
    boards = dashboards if dashboards is not None else load_dashboards()
    report = PushReport()
    api = GrafanaApi(url, credential, timeout)
    try:
        # Unauthenticated: is this a Grafana at all? (No credential goes to a server
        # that is not.)
        health = api.call("GET", "/health", auth=False)
        if not isinstance(health, dict) or "database" not in health:
            raise PushError(
                f"{url} does not look like Grafana: GET /api/health answered {str(health)[:120]!r}"
            )
        report.grafana_version = str(health.get("version", "?"))
        # Authenticated from here on: a rejected token fails on the first call.
        body = datasource_body(prometheus_url)
        try:
            api.call("GET", f"/datasources/uid/{DATASOURCE_UID}")
        except GrafanaError as e:
            if e.status != 404:
                raise
            api.call("POST", "/datasources", body)
            report.datasource = "created"
        else:
            api.call("PUT", f"/datasources/uid/{DATASOURCE_UID}", body)
            report.datasource = "updated"
        say(f"datasource {DATASOURCE_UID} ({prometheus_url}): {report.datasource}")
        try:
            existing = _json_object(api.call("GET", f"/folders/{FOLDER_UID}"), "GET /api/folders")
        except GrafanaError as e:
            if e.status != 404:
                raise
            api.call("POST", "/folders", {"title": folder, "uid": FOLDER_UID})
            report.folder = "created"
        else:
            if existing.get("title") != folder:
                api.call("PUT", f"/folders/{FOLDER_UID}", {"title": folder, "overwrite": True})
                report.folder = "renamed"
            else:
                report.folder = "present"
        say(f"folder {folder!r} (uid {FOLDER_UID}): {report.folder}")
        for name, d in boards.items():
            res = api.call(
                "POST",
                "/dashboards/db",
                {
                    "dashboard": {**d, "id": None},
                    "folderUid": FOLDER_UID,
                    "overwrite": True,
                    "message": "monitor dashboards push",
                },
            )
            where = f"{url.rstrip('/')}{res.get('url', '')}" if isinstance(res, dict) else url
            report.dashboards.append((d["uid"], where))
            say(f"dashboard {d['uid']} ({name}): {where}")
    except PushError:
        raise
    except ValueError as e:
        raise PushError(f"Grafana at {url}: {e}") from e
    except (GrafanaError, OSError, http.client.HTTPException) as e:
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
    u.add_argument(
        "--allow-insecure-credentials",
        action="store_true",
        help="send the token or password even to a plain http:// URL of another host (refused "
        "otherwise: anyone on the path could read it; http://localhost and 127.0.0.1 are "
        "allowed)",
    )
    u.add_argument("--folder", default=DEFAULT_FOLDER, help=f"folder title ({DEFAULT_FOLDER!r})")
    u.add_argument(
        "--prometheus-url",
        default="http://127.0.0.1:9090",
        help="the Prometheus the datasource points at, as Grafana's server reaches it",
    )
    u.add_argument(
        "--dir", type=Path, default=None, help="dashboards folder (default: the shipped ones)"
    )
    u.add_argument("--timeout", type=_seconds, default=10.0, help="per request, seconds (10)")
    u.set_defaults(func=_push)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def _generate(args: argparse.Namespace) -> int:
    try:
        from dashboards.generate import write
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != SDK_MODULE:
            raise
        # The words of monitor.cli's message for a missing extra (its EXTRAS), which the
        # layers keep this module from importing.
        print(
            f"monitor dashboards generate: needs the '{EXTRA}' extra (no module {e.name}): "
            f"pip install './[{EXTRA}]' from a clone of the repository (README.md, Install)",
            file=sys.stderr,
        )
        return 78  # monitor.cli.EXIT_CONFIG, as for the other extras
    for path in write(args.out):
        print(f"wrote {path}")
    return 0


def _header_safe(token: str) -> bool:
    """A token fits an HTTP header as ``Bearer TOKEN``: printable ASCII, no space."""
    return token.isascii() and token.isprintable() and " " not in token


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
    problem = check_url(args.url)
    if problem:
        print(f"monitor dashboards push: {problem}", file=sys.stderr)
        return 64  # monitor.cli.EXIT_USAGE
    credential: str | tuple[str, str] | None
    try:
        token = _secret(args.token_file, "GRAFANA_TOKEN")
        password = _secret(args.password_file, "GRAFANA_PASSWORD")
    except (OSError, UnicodeDecodeError) as e:
        print(f"monitor dashboards push: cannot read the secret: {e}", file=sys.stderr)
        return 66  # EX_NOINPUT
    if token and not args.user and not _header_safe(token):
        where = args.token_file or "$GRAFANA_TOKEN"
        print(
            f"monitor dashboards push: the token in {where} holds a space, a line break or a "
            "character outside ASCII: a token is one word",
            file=sys.stderr,
        )
        return 64  # monitor.cli.EXIT_USAGE
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
    if (
        credential is not None
        and exposed_in_clear(args.url)
        and not args.allow_insecure_credentials
    ):
        what = f"--user {args.user}'s password" if args.user else "the token"
        print(
            f"monitor dashboards push: --url {args.url} is plain HTTP to another host: {what} "
            "would cross the network in clear -- use https://, or give "
            "--allow-insecure-credentials to send it anyway",
            file=sys.stderr,
        )
        return 64  # monitor.cli.EXIT_USAGE
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
