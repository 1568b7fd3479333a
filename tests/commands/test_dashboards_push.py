"""`monitor dashboards push|generate`: the parts that need no Grafana server.

No Grafana server could be installed here (docs/dashboards.md, "Real Grafana server: what
was tried"), and a hand-written imitation would prove nothing about Grafana, so these
tests cover what is real: an unreachable Grafana (a closed port on 127.0.0.1), a URL that
answers but is not Grafana (the project's own exporter), the argument checks, and the
one-line messages for Grafana's own error answers (grafana-client's exception types).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grafana_client.client import (
    GrafanaClientError,
    GrafanaServerError,
    GrafanaUnauthorizedError,
)

from dashboards.generate import DATASOURCE_UID, OUT_DIR
from monitor.cli import main
from monitor.commands.dashboards import datasource_body, describe_error, load_dashboards
from monitor.dev.processes.prom import free_port


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAFANA_TOKEN", "t")


def test_unreachable_grafana_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert main(["dashboards", "push", "--url", url, "--timeout", "3"]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach Grafana at {url}" in err
    assert "Connection refused" in err
    assert "Traceback" not in err


def test_a_server_that_is_not_grafana_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Text(BaseHTTPRequestHandler):  # answers every path with 200 and plain text
        def do_GET(self) -> None:
            body = b"# a metrics page, not Grafana\nup 1\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Text)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert main(["dashboards", "push", "--url", url]) == 2
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert f"{url} does not look like Grafana" in err


def test_user_needs_a_password(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAFANA_PASSWORD", raising=False)
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


def test_grafana_error_answers_are_one_clear_line() -> None:
    url = "http://grafana.example:3000"
    msg = describe_error(url, GrafanaUnauthorizedError({"message": "invalid API key"}))
    assert msg.startswith(f"Grafana at {url} rejected the credentials (401")
    assert "GRAFANA_TOKEN" in msg
    msg = describe_error(url, GrafanaClientError(403, {}, "Client Error 403: Permission denied"))
    assert "403 Forbidden" in msg and "Editor" in msg and url in msg
    msg = describe_error(url, GrafanaServerError(500, {}, "Server Error 500: boom"))
    assert msg == f"Grafana at {url} answered 500: Server Error 500: boom"


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
