"""A local OAuth authorization server and an MCP server behind it, for the OAuth tests: one ASGI app
(uvicorn on a free port, in a thread of the test process) serving

- RFC 9728 protected resource metadata and RFC 8414 authorization server metadata;
- `/register` (RFC 7591 dynamic registration: a client id and secret for `client_secret_post`);
- `/authorize`, which approves at once (the person said yes) and redirects with `code`, `state`
  and `iss`; it refuses an unknown client, an unregistered redirect URI or a missing S256 challenge;
- `/token`: the authorization code grant with PKCE verification (a wrong `code_verifier` is
  `invalid_grant`), one use per code, the client's secret checked; and the refresh grant (rotating);
- `/mcp`: the demo MCP server, answering 401 with `WWW-Authenticate: Bearer resource_metadata=…`
  unless the request carries an access token this double issued and that has not expired.

What the real ones reject, this rejects; tests read its counters and may expire its tokens.
"""
from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from playground.mcp_servers.demo_server import build_server
from tests.mcp_servers.conftest import free_port
from tests.polling import wait_until


@dataclass
class IssuedToken:
    client_id: str
    scope: str
    expires_at: float


@dataclass
class AuthDouble:
    base: str
    access_seconds: int = 3600
    clients: dict[str, dict] = field(default_factory=dict)
    codes: dict[str, dict] = field(default_factory=dict)
    access_tokens: dict[str, IssuedToken] = field(default_factory=dict)
    refresh_tokens: dict[str, str] = field(default_factory=dict)  # refresh token → client id
    counts: dict[str, int] = field(default_factory=lambda: {"register": 0, "authorize": 0, "code": 0, "refresh": 0,
                                                             "mcp_ok": 0, "mcp_401": 0, "token_refused": 0})

    def expire_access_tokens(self) -> None:
        for token in self.access_tokens.values():
            token.expires_at = time.time() - 1

    def valid(self, token: str) -> bool:
        issued = self.access_tokens.get(token)
        return issued is not None and issued.expires_at > time.time()

    def _issue(self, client_id: str, scope: str) -> dict:
        access, refresh = "at-" + secrets.token_urlsafe(24), "rt-" + secrets.token_urlsafe(24)
        self.access_tokens[access] = IssuedToken(client_id, scope, time.time() + self.access_seconds)
        self.refresh_tokens[refresh] = client_id
        return {"access_token": access, "token_type": "Bearer", "expires_in": self.access_seconds,
                "refresh_token": refresh, "scope": scope}

    # -- routes -----------------------------------------------------------------------------------
    async def resource_metadata(self, request: Request) -> Response:
        return JSONResponse({"resource": f"{self.base}/mcp", "authorization_servers": [self.base],
                             "scopes_supported": ["mcp"], "bearer_methods_supported": ["header"]})

    async def server_metadata(self, request: Request) -> Response:
        return JSONResponse({
            "issuer": self.base, "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": f"{self.base}/token", "registration_endpoint": f"{self.base}/register",
            "response_types_supported": ["code"], "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"], "scopes_supported": ["mcp"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "none"],
            "authorization_response_iss_parameter_supported": True,
        })

    async def register(self, request: Request) -> Response:
        body = await request.json()
        redirect_uris = body.get("redirect_uris") or []
        if not redirect_uris:
            return JSONResponse({"error": "invalid_redirect_uri"}, status_code=400)
        self.counts["register"] += 1
        client_id, secret = "client-" + secrets.token_hex(6), "cs-" + secrets.token_urlsafe(24)
        self.clients[client_id] = {"secret": secret, "redirect_uris": redirect_uris}
        return JSONResponse({**body, "client_id": client_id, "client_secret": secret,
                             "token_endpoint_auth_method": "client_secret_post",
                             "client_id_issued_at": int(time.time())}, status_code=201)

    def add_client(self, redirect_uri: str) -> tuple[str, str]:
        """A client registered beforehand (what an admin would enter)."""
        client_id, secret = "pre-" + secrets.token_hex(6), "pcs-" + secrets.token_urlsafe(24)
        self.clients[client_id] = {"secret": secret, "redirect_uris": [redirect_uri]}
        return client_id, secret

    async def authorize(self, request: Request) -> Response:
        query = request.query_params
        client = self.clients.get(query.get("client_id", ""))
        if client is None or query.get("redirect_uri") not in client["redirect_uris"]:
            return JSONResponse({"error": "invalid_request", "error_description": "unknown client or redirect URI"}, status_code=400)
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            return JSONResponse({"error": "invalid_request", "error_description": "code + S256 PKCE required"}, status_code=400)
        self.counts["authorize"] += 1
        code = "code-" + secrets.token_urlsafe(16)
        self.codes[code] = {"client_id": query["client_id"], "challenge": query["code_challenge"],
                            "redirect_uri": query["redirect_uri"], "scope": query.get("scope", "")}
        target = query["redirect_uri"] + "?" + urlencode({"code": code, "state": query.get("state", ""), "iss": self.base})
        return RedirectResponse(target, status_code=302)

    def _client_ok(self, form) -> bool:
        client = self.clients.get(form.get("client_id", ""))
        return client is not None and secrets.compare_digest(client["secret"], form.get("client_secret", ""))

    async def token(self, request: Request) -> Response:
        form = await request.form()
        if not self._client_ok(form):
            self.counts["token_refused"] += 1
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if form.get("grant_type") == "authorization_code":
            grant = self.codes.pop(form.get("code", ""), None)  # one use
            verifier = form.get("code_verifier", "")
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
            if grant is None or grant["client_id"] != form.get("client_id") or grant["redirect_uri"] != form.get("redirect_uri"):
                self.counts["token_refused"] += 1
                return JSONResponse({"error": "invalid_grant", "error_description": "unknown or used code"}, status_code=400)
            if not secrets.compare_digest(challenge, grant["challenge"]):
                self.counts["token_refused"] += 1
                return JSONResponse({"error": "invalid_grant", "error_description": "PKCE verification failed"}, status_code=400)
            self.counts["code"] += 1
            return JSONResponse(self._issue(grant["client_id"], grant["scope"]))
        if form.get("grant_type") == "refresh_token":
            owner = self.refresh_tokens.pop(form.get("refresh_token", ""), None)  # rotated
            if owner != form.get("client_id"):
                self.counts["token_refused"] += 1
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            self.counts["refresh"] += 1
            return JSONResponse(self._issue(owner, "mcp"))
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)


class ProtectedMcp:
    """The ASGI app: the double's routes, and the demo server's /mcp behind its bearer check."""

    def __init__(self, auth: AuthDouble) -> None:
        self.auth = auth
        self.mcp = build_server(tools_only=True).streamable_http_app()
        self.oauth = Starlette(routes=[
            Route("/.well-known/oauth-protected-resource/mcp", auth.resource_metadata),
            Route("/.well-known/oauth-protected-resource", auth.resource_metadata),
            Route("/.well-known/oauth-authorization-server", auth.server_metadata),
            Route("/register", auth.register, methods=["POST"]),
            Route("/authorize", auth.authorize),
            Route("/token", auth.token, methods=["POST"]),
        ])

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            return await self.mcp(scope, receive, send)
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            header = dict(scope["headers"]).get(b"authorization", b"").decode()
            token = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
            if not self.auth.valid(token):
                self.auth.counts["mcp_401"] += 1
                challenge = f'Bearer resource_metadata="{self.auth.base}/.well-known/oauth-protected-resource/mcp", scope="mcp"'
                if token:
                    challenge += ', error="invalid_token"'
                response = JSONResponse({"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": challenge})
                return await response(scope, receive, send)
            self.auth.counts["mcp_ok"] += 1
            return await self.mcp(scope, receive, send)
        return await self.oauth(scope, receive, send)


class OAuthProtectedServer:
    """Runs `ProtectedMcp` with uvicorn in a thread; `url` is the MCP endpoint."""

    def __init__(self) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        self.auth = AuthDouble(base=self.base)
        config = uvicorn.Config(ProtectedMcp(self.auth), host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="oauth-double", daemon=True)
        self.thread.start()
        wait_until(lambda: self.server.started, "the OAuth double to listen", timeout=20)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
