"""A stand-in identity provider for the tests: an OAuth 2.0 token endpoint (RFC 6749 4.4,
the client-credentials grant) on 127.0.0.1, as Keycloak, Okta or Entra ID serve one.

It checks the client's id and secret (HTTP Basic, each form-encoded first, RFC 6749 2.3.1,
as both clients send them), the grant type and the scope, and answers a token from
``mint(lifetime_s)`` (the lab signs it with its key: :func:`monitor.dev.lab.security.
sign_token`) with ``expires_in``; a wrong client gets 401 ``invalid_client``. It counts the
tokens it gave, by scope. Started and stopped by the test (a thread of the test process).
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote_plus


@dataclass
class TokenEndpoint:
    mint: Callable[[float], str]
    client_id: str
    client_secret: str
    lifetime_s: float = 3600.0
    url: str = ""
    #: Each token given, in order.
    issued: list[str] = field(default_factory=list)
    #: Each refused request's reason.
    refused: list[str] = field(default_factory=list)
    scopes: list[str | None] = field(default_factory=list)


def _handler(endpoint: TokenEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def _answer(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            form = parse_qs(self.rfile.read(length).decode())
            auth = self.headers.get("Authorization", "")
            try:
                pair = base64.b64decode(auth.removeprefix("Basic ")).decode()
                client_id, _, secret = pair.partition(":")
                client_id, secret = unquote_plus(client_id), unquote_plus(secret)
            except ValueError:
                client_id, secret = "", ""
            if (client_id, secret) != (endpoint.client_id, endpoint.client_secret):
                endpoint.refused.append("client")
                refusal = {"error": "invalid_client", "error_description": "client unknown"}
                self._answer(401, refusal)
                return
            if form.get("grant_type") != ["client_credentials"]:
                endpoint.refused.append("grant")
                self._answer(400, {"error": "unsupported_grant_type"})
                return
            token = endpoint.mint(endpoint.lifetime_s)
            endpoint.issued.append(token)
            endpoint.scopes.append(form.get("scope", [None])[0])
            lifetime = int(endpoint.lifetime_s)
            self._answer(
                200, {"access_token": token, "token_type": "Bearer", "expires_in": lifetime}
            )

    return Handler


@contextmanager
def token_endpoint(
    mint: Callable[[float], str], client_id: str, client_secret: str, lifetime_s: float = 3600.0
) -> Iterator[TokenEndpoint]:
    endpoint = TokenEndpoint(mint, client_id, client_secret, lifetime_s)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(endpoint))
    endpoint.url = f"http://127.0.0.1:{server.server_address[1]}/oauth2/token"
    thread = threading.Thread(target=server.serve_forever, name="test-idp", daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
