"""The bearer token: every request but ``/healthz`` and ``/readyz`` must carry it, when set.

``ROTA_API_TOKEN`` set: ``Authorization: Bearer <token>`` is required, compared
in constant time (both sides hashed first, so not even the length leaks). A
request without it gets 401 ``application/problem+json`` with
``WWW-Authenticate: Bearer``; a browser asking for the dashboard (``GET /``,
accepting HTML) gets the same 401 whose body is the dashboard's page, which
asks for the token and sends it as that header with each of its requests (the
page holds no data of its own). Not set: ``rota serve`` binds loopback
addresses only (``rota.api.server``).

The identity a request proved is its actor: ``default`` for ``ROTA_API_TOKEN``,
``anonymous`` where no token is set. It travels in the request's state
(``actor``), and every operator action the request makes records it
(``operator_note``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import Request

from rota.api.problems import PROBLEM_JSON, UNAUTHORIZED
from rota.core.operator_notes import ActionNote

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
TOKEN_ACTOR = "default"  # the name of ROTA_API_TOKEN's identity
NO_TOKEN_ACTOR = "anonymous"  # no token set: loopback only, nobody proved a name


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


class BearerAuth:
    """ASGI middleware: checks the token before any route (or 404) is reached."""

    def __init__(self, app: ASGIApp, token: str | None, page: Callable[[], bytes]) -> None:
        self.app = app
        self._want = _digest(token.encode()) if token else None
        self._page = page

    def actor(self, scope: Scope) -> str | None:
        """The identity the request proved, or None when it proved none."""
        if self._want is None:
            return NO_TOKEN_ACTOR
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                scheme, _, given = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    matched = hmac.compare_digest(_digest(given.strip()), self._want)
                    return TOKEN_ACTOR if matched else None
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        actor = self.actor(scope)
        if actor is not None or scope.get("path") in OPEN_PATHS:
            scope.setdefault("state", {})["actor"] = actor
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        wants_page = (
            scope.get("path") == "/"
            and scope.get("method") == "GET"
            and b"text/html" in headers.get(b"accept", b"")
        )
        if wants_page:
            body, kind = self._page(), b"text/html; charset=utf-8"
        else:
            problem = {
                "type": UNAUTHORIZED,
                "title": "Unauthorized",
                "status": 401,
                "detail": "send Authorization: Bearer <the ROTA_API_TOKEN of this server>",
                "instance": scope.get("path", ""),
            }
            body, kind = json.dumps(problem).encode(), PROBLEM_JSON.encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", kind),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="rota"'),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def operator_note(request: Request) -> ActionNote:
    """Who acts, for the operator action a route is about to take."""
    actor = getattr(request.state, "actor", None)
    if actor is None:  # an open path: none of them acts
        raise RuntimeError(f"{request.url.path} acts without an authenticated actor")
    return ActionNote.of(actor)
