"""`monitor dashboards push|generate`: the parts that need no Grafana server.

No Grafana server could be installed here (docs/dashboards.md, "Real Grafana server: what
was tried"). These tests run ``push`` over real HTTP (the standard library's server on
127.0.0.1): a closed port, a server that is not Grafana, servers that answer every request
with one error status, a redirect, a server that never answers; the argument and secret
checks; and the requests ``push`` sends, recorded -- what Grafana's documented API is
sent, not whether a Grafana accepts it.
"""

from __future__ import annotations

import base64
import builtins
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dashboards import DATASOURCE_UID, FOLDER_UID
from monitor.cli import main
from monitor.commands.dashboards import (
    GrafanaError,
    authorization,
    datasource_body,
    describe_error,
    load_dashboards,
)
from monitor.dev.processes.prom import free_port

OUT_DIR = Path(__file__).resolve().parents[2] / "dashboards" / "json"

#: One request as the server saw it: method, path, Authorization header, JSON body.
Seen = tuple[str, str, str | None, Any]
Answer = Callable[[str, str, Any], tuple[int, dict[str, str], bytes]]


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAFANA_TOKEN", "t")
    monkeypatch.delenv("GRAFANA_PASSWORD", raising=False)


@contextmanager
def http_server(answer: Answer) -> Iterator[tuple[str, list[Seen]]]:
    """A real HTTP server on 127.0.0.1 whose every answer is ``answer(method, path, body)``;
    yields its URL and the requests it saw."""
    seen: list[Seen] = []

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n)) if n else None
            seen.append((self.command, self.path, self.headers.get("Authorization"), body))
            code, headers, raw = answer(self.command, self.path, body)
            self.send_response(code)
            for k, v in {"Content-Type": "application/json", **headers}.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PUT = _handle

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _json(code: int, body: object) -> tuple[int, dict[str, str], bytes]:
    return code, {}, json.dumps(body).encode()


def test_unreachable_grafana_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert main(["dashboards", "push", "--url", url, "--timeout", "3"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"monitor dashboards push: cannot reach Grafana at {url}: Connection refused (errno 111)\n"
    )


def test_a_server_that_is_not_grafana_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def text(method: str, path: str, body: Any) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "text/plain"}, b"# a metrics page, not Grafana\nup 1\n"

    with http_server(text) as (url, seen):
        assert main(["dashboards", "push", "--url", url]) == 2
    err = capsys.readouterr().err
    assert f"{url} does not look like Grafana: GET /api/health answered '# a metrics page" in err
    # It asked once, without the token: no credential goes to a server that is not Grafana.
    assert seen == [("GET", "/api/health", None, None)]


@pytest.mark.parametrize(
    ("status", "body", "line"),
    [
        (401, {"message": "invalid API key"}, "rejected the credentials (401 Unauthorized): "
         "check the token ($GRAFANA_TOKEN, --token-file), or --user and its password"),
        (403, {"message": "Permission denied"}, "refused the request (403 Forbidden): the token "
         "or user needs the Editor role (datasources and dashboards write): Permission denied"),
        (500, {"message": "boom"}, "answered 500: boom"),
        (502, "<html><body> <h1>502 Bad Gateway</h1>\n</body></html>",
         "answered 502: <html><body> <h1>502 Bad Gateway</h1> </body></html>"),
    ],
)  # fmt: skip
def test_an_error_answer_is_one_line_naming_the_url(
    capsys: pytest.CaptureFixture[str], status: int, body: object, line: str
) -> None:
    def answer(method: str, path: str, _: Any) -> tuple[int, dict[str, str], bytes]:
        if isinstance(body, str):
            return status, {"Content-Type": "text/html"}, body.encode()
        return _json(status, body)

    with http_server(answer) as (url, _):
        assert main(["dashboards", "push", "--url", url]) == 2
    assert capsys.readouterr().err == f"monitor dashboards push: Grafana at {url} {line}\n"


def test_a_redirect_is_not_followed(capsys: pytest.CaptureFixture[str]) -> None:
    """The token goes to the URL given, to no other: a redirect says where, and stops."""
    with http_server(lambda m, p, b: _json(200, {"database": "ok"})) as (elsewhere, reached):

        def redirect(method: str, path: str, _: Any) -> tuple[int, dict[str, str], bytes]:
            return 302, {"Location": f"{elsewhere}{path}"}, b""

        with http_server(redirect) as (url, _):
            assert main(["dashboards", "push", "--url", url]) == 2
    assert capsys.readouterr().err == (
        f"monitor dashboards push: Grafana at {url} answered 302: a redirect to "
        f"{elsewhere}/api/health (use --url {elsewhere})\n"
    )
    assert reached == []


def test_a_grafana_that_never_answers_is_a_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as listening:  # accepts connections, never answers
        listening.bind(("127.0.0.1", 0))
        listening.listen(4)
        url = f"http://127.0.0.1:{listening.getsockname()[1]}"
        assert main(["dashboards", "push", "--url", url, "--timeout", "0.3"]) == 2
    assert capsys.readouterr().err == (
        f"monitor dashboards push: Grafana at {url} did not answer in time: check the URL, "
        "or raise --timeout\n"
    )


def grafana_answers(state: dict[str, Any]) -> Answer:
    """The documented answers of Grafana's HTTP API to the calls ``push`` makes: the
    datasource and the folder missing (404) until created, then there."""

    def answer(method: str, path: str, body: Any) -> tuple[int, dict[str, str], bytes]:
        if path == "/api/health":
            return _json(200, {"database": "ok", "version": "11.6.0", "commit": "x"})
        if path == f"/api/datasources/uid/{DATASOURCE_UID}" and method == "GET":
            found = state.get("datasource")
            return _json(200, found) if found else _json(404, {"message": "not found"})
        if path == "/api/datasources" or path == f"/api/datasources/uid/{DATASOURCE_UID}":
            state["datasource"] = body
            return _json(200, {"message": "Datasource added"})
        if path == f"/api/folders/{FOLDER_UID}" and method == "GET":
            found = state.get("folder")
            return _json(200, found) if found else _json(404, {"message": "folder not found"})
        if path == "/api/folders" or path == f"/api/folders/{FOLDER_UID}":
            state["folder"] = {"uid": FOLDER_UID, "title": body["title"]}
            return _json(200, state["folder"])
        if path == "/api/dashboards/db":
            uid = body["dashboard"]["uid"]
            return _json(200, {"status": "success", "uid": uid, "url": f"/d/{uid}/slug"})
        return _json(404, {"message": "Not found"})

    return answer


def test_push_sends_the_documented_requests_and_is_idempotent(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAFANA_TOKEN", "glsa_token")
    boards = load_dashboards()
    uids = [b["uid"] for b in boards.values()]
    state: dict[str, Any] = {}
    with http_server(grafana_answers(state)) as (url, seen):
        argv = ["dashboards", "push", "--url", url, "--prometheus-url", "http://prom:9090"]
        assert main(argv) == 0
        first = list(seen)
        seen.clear()
        assert main(argv) == 0
        second = list(seen)
        seen.clear()
        assert main([*argv, "--folder", "Renamed"]) == 0
        third = list(seen)
    bearer = "Bearer glsa_token"
    ds, folder = f"/api/datasources/uid/{DATASOURCE_UID}", f"/api/folders/{FOLDER_UID}"
    body = datasource_body("http://prom:9090")
    boards_sent = [
        ("POST", "/api/dashboards/db", bearer, {"dashboard": {**b, "id": None},
         "folderUid": FOLDER_UID, "overwrite": True, "message": "monitor dashboards push"})
        for b in boards.values()
    ]  # fmt: skip
    assert first == [
        ("GET", "/api/health", None, None),
        ("GET", ds, bearer, None),
        ("POST", "/api/datasources", bearer, body),
        ("GET", folder, bearer, None),
        ("POST", "/api/folders", bearer, {"title": "Kafka replication", "uid": FOLDER_UID}),
        *boards_sent,
    ]
    assert second == [
        ("GET", "/api/health", None, None),
        ("GET", ds, bearer, None),
        ("PUT", ds, bearer, body),
        ("GET", folder, bearer, None),
        *boards_sent,
    ]
    assert third[4] == ("PUT", folder, bearer, {"title": "Renamed", "overwrite": True})
    out = capsys.readouterr().out
    assert f"datasource {DATASOURCE_UID} (http://prom:9090): created" in out
    assert "folder 'Kafka replication' (uid kafka-replication): present" in out
    assert "folder 'Renamed' (uid kafka-replication): renamed" in out
    for uid in uids:
        assert f"{url}/d/{uid}/slug" in out
    assert out.strip().endswith(f"pushed {len(uids)} dashboards to Grafana 11.6.0 at {url}")


def test_basic_auth_from_the_password_file(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("s3cret:with colon\n")
    with http_server(grafana_answers({})) as (url, seen):
        argv = ["dashboards", "push", "--url", url, "--user", "admin"]
        assert main([*argv, "--password-file", str(tmp_path / "pw")]) == 0
    expected = "Basic " + base64.b64encode(b"admin:s3cret:with colon").decode()
    assert {auth for _, path, auth, _ in seen if path != "/api/health"} == {expected}


def test_authorization_headers() -> None:
    assert authorization("abc") == "Bearer abc"
    assert authorization(("u", "p")) == "Basic dTpw"
    assert authorization(None) is None


def test_user_needs_a_password(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboards", "push", "--url", "http://127.0.0.1:1", "--user", "admin"]) == 64
    assert "--user needs a password ($GRAFANA_PASSWORD or --password-file)" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("flag", ["--token", "--password"])
def test_secrets_are_never_taken_as_flags(capsys: pytest.CaptureFixture[str], flag: str) -> None:
    """A secret given as a flag would show in ``ps`` and the shell's history (issue 20)."""
    argv = ["dashboards", "push", "--url", "http://127.0.0.1:1", flag]
    assert main(argv) == 64
    err = capsys.readouterr().err
    assert f"{flag} takes no value on the command line" in err
    assert f"$GRAFANA_{flag[2:].upper()}" in err and f"{flag}-file" in err


@pytest.mark.parametrize(
    "given",
    [["--token", "S3CRET"], ["--token=S3CRET"], ["--password", "S3CRET"], ["--password=S3CRET"],
     ["--tok", "S3CRET"], ["--passw=S3CRET"]],
)  # fmt: skip
def test_a_secret_given_as_a_flag_is_never_printed(
    capsys: pytest.CaptureFixture[str], given: list[str]
) -> None:
    """Issue 51: argparse printed ``unrecognized arguments: S3CRET`` and ``ignored explicit
    argument 'S3CRET'``. The value is taken out before parsing: refused, never echoed."""
    try:
        code = main(["dashboards", "push", "--url", "http://127.0.0.1:1", *given])
    except SystemExit as e:  # argparse's own refusal (an ambiguous abbreviation)
        code = e.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert code == 64 and "S3CRET" not in out + err and err


def test_credentials_in_the_url_are_refused_without_echoing_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["dashboards", "push", "--url", "http://admin:hunter2@127.0.0.1:1"]) == 64
    err = capsys.readouterr().err
    assert err.startswith("monitor dashboards push: --url 'http://127.0.0.1:1' carries credentials")
    assert "hunter2" not in err and "$GRAFANA_TOKEN" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("grafana:3000", "not an http:// or https:// URL with a host"),
        ("ftp://grafana", "not an http:// or https:// URL with a host"),
        ("http://grafana:abc", "the port is not a number from 0 to 65535"),
        ("http://grafana/?orgId=1", "a base URL has no ?query or #fragment"),
    ],
)
def test_a_bad_url_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], url: str, problem: str
) -> None:
    assert main(["dashboards", "push", "--url", url]) == 64
    assert capsys.readouterr().err == f"monitor dashboards push: --url {url!r}: {problem}\n"


def test_a_bad_timeout_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    for value in ("0", "-1", "soon"):
        with pytest.raises(SystemExit) as e:
            main(["dashboards", "push", "--url", "http://127.0.0.1:1", "--timeout", value])
        assert e.value.code == 64
        assert f"{value!r} is not a number of seconds above 0" in capsys.readouterr().err


def test_a_secret_is_read_from_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from monitor.commands.dashboards import _secret

    monkeypatch.setenv("GRAFANA_TOKEN", "from-env")
    (tmp_path / "token").write_text("from-file\n")
    assert _secret(tmp_path / "token", "GRAFANA_TOKEN") == "from-file"
    assert _secret(None, "GRAFANA_TOKEN") == "from-env"
    missing = tmp_path / "absent"
    assert (
        main(["dashboards", "push", "--url", "http://127.0.0.1:1", "--token-file", str(missing)])
        == 66
    )
    assert "cannot read the secret" in capsys.readouterr().err


def test_a_token_of_two_lines_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "token").write_text("first\nsecond\n")
    argv = ["dashboards", "push", "--url", "http://127.0.0.1:1"]
    assert main([*argv, "--token-file", str(tmp_path / "token")]) == 64
    assert capsys.readouterr().err == (
        f"monitor dashboards push: the token in {tmp_path / 'token'} holds a space, a line "
        "break or a character outside ASCII: a token is one word\n"
    )


def test_grafana_error_answers_are_one_clear_line() -> None:
    url = "http://grafana.example:3000"
    msg = describe_error(url, GrafanaError(401, "invalid API key"))
    assert msg.startswith(f"Grafana at {url} rejected the credentials (401")
    assert "GRAFANA_TOKEN" in msg
    msg = describe_error(url, GrafanaError(403, "Permission denied"))
    assert "403 Forbidden" in msg and "Editor" in msg and url in msg
    assert describe_error(url, GrafanaError(500, "boom")) == f"Grafana at {url} answered 500: boom"
    msg = describe_error(url, socket.gaierror(-2, "Name or service not known"))
    assert msg == (
        f"cannot reach Grafana at {url}: cannot resolve host 'grafana.example' "
        "(Name or service not known)"
    )


def test_push_runs_without_the_dashboards_sdk() -> None:
    """The base install has no grafana-foundation-sdk: push imports none of it."""
    code = (
        "import sys; from monitor.cli import main; "
        "code = main(['dashboards', 'push', '--url', 'http://127.0.0.1:1']); "
        "print(code, sorted(m for m in sys.modules if m.startswith(('grafana', 'dashboards.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "2 []", out.stdout + out.stderr


def test_generate_without_the_sdk_names_the_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_import = builtins.__import__

    def no_sdk(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("grafana_foundation_sdk"):  # as Python says it: the top package
            raise ModuleNotFoundError(
                "No module named 'grafana_foundation_sdk'", name=name.split(".")[0]
            )
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    for mod in [m for m in sys.modules if m.startswith(("grafana_foundation_sdk", "dashboards"))]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", no_sdk)
    assert main(["dashboards", "generate", "--out", str(tmp_path)]) == 78
    err = capsys.readouterr().err
    assert err.startswith(
        "monitor dashboards generate: needs the 'dashboards' extra (no module "
        "grafana_foundation_sdk): pip install './[dashboards]' "
    )
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not list(tmp_path.iterdir())


def test_datasource_has_the_uid_the_dashboards_use() -> None:
    body = datasource_body("http://prom:9090")
    assert body["uid"] == DATASOURCE_UID and body["type"] == "prometheus"
    assert body["url"] == "http://prom:9090"
    for d in load_dashboards().values():
        assert DATASOURCE_UID in json.dumps(d)


def test_generate_command_writes_the_committed_json(tmp_path: Path) -> None:
    assert main(["dashboards", "generate", "--out", str(tmp_path)]) == 0
    for p in OUT_DIR.glob("*.json"):
        assert (tmp_path / p.name).read_text() == p.read_text()


def test_no_dashboards_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = "http://127.0.0.1:1"
    assert main(["dashboards", "push", "--url", url, "--dir", str(tmp_path)]) == 2
    assert "no dashboards in" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{not json")
    assert main(["dashboards", "push", "--url", url, "--dir", str(tmp_path)]) == 2
    assert f"cannot read dashboard {tmp_path / 'broken.json'}: " in capsys.readouterr().err


def _pushed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """``push`` replaced by a recorder of (url, credential): no request leaves."""
    from monitor.commands import dashboards
    from monitor.commands.dashboards import PushReport

    calls: list[tuple[str, Any]] = []

    def record(url: str, credential: Any, **kwargs: Any) -> PushReport:
        calls.append((url, credential))
        return PushReport(grafana_version="11.6.0")

    monkeypatch.setattr(dashboards, "push", record)
    return calls


@pytest.mark.parametrize(
    ("extra", "what"),
    [([], "the token"), (["--user", "admin"], "--user admin's password")],
)
def test_credentials_to_plain_http_of_another_host_are_refused(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    what: str,
) -> None:
    """Issue 51: a token or password over http:// crosses the network in clear. Refused
    before any request (exit 64), unless --allow-insecure-credentials; loopback is allowed
    (a port-forward, an SSH tunnel: nothing leaves the host)."""
    monkeypatch.setenv("GRAFANA_PASSWORD", "pw")
    calls = _pushed(monkeypatch)
    url = "http://grafana.example:3000"
    assert main(["dashboards", "push", "--url", url, *extra]) == 64
    assert capsys.readouterr().err == (
        f"monitor dashboards push: --url {url} is plain HTTP to another host: {what} would "
        "cross the network in clear -- use https://, or give --allow-insecure-credentials to "
        "send it anyway\n"
    )
    assert calls == []
    assert main(["dashboards", "push", "--url", url, *extra, "--allow-insecure-credentials"]) == 0
    for allowed in ("https://grafana.example", "http://127.0.0.1:3000", "http://localhost:3000",
                    "http://[::1]:3000"):  # fmt: skip
        assert main(["dashboards", "push", "--url", allowed, *extra]) == 0, allowed
    assert [u for u, _ in calls] == [url, "https://grafana.example", "http://127.0.0.1:3000",
                                     "http://localhost:3000", "http://[::1]:3000"]  # fmt: skip


def test_no_credentials_to_plain_http_is_no_refusal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anonymous (a Grafana with anonymous Editor access): nothing secret to protect."""
    monkeypatch.delenv("GRAFANA_TOKEN")
    calls = _pushed(monkeypatch)
    assert main(["dashboards", "push", "--url", "http://grafana.example:3000"]) == 0
    assert calls == [("http://grafana.example:3000", None)]
