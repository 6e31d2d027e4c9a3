"""The bearer token: every request but ``/healthz`` and ``/readyz`` must carry it, when set.

``ROTA_API_TOKEN`` set: ``Authorization: Bearer <token>`` is required, compared
in constant time (both sides hashed first, so not even the length leaks). A
request without it gets 401 ``application/problem+json`` with
``WWW-Authenticate: Bearer``; a browser asking for the dashboard (``GET /``,
accepting HTML) gets the same 401 whose body is the dashboard's page, which
asks for the token and sends it as that header with each of its requests (the
page holds no data of its own). Not set: ``rota serve`` binds loopback
addresses only (``rota.api.server``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from rota.api.problems import PROBLEM_JSON, UNAUTHORIZED

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


class BearerAuth:
    """ASGI middleware: checks the token before any route (or 404) is reached."""

    def __init__(self, app: ASGIApp, token: str | None, page: Callable[[], bytes]) -> None:
        self.app = app
        self._want = _digest(token.encode()) if token else None
        self._page = page

    def allowed(self, scope: Scope) -> bool:
        if self._want is None or scope.get("path") in OPEN_PATHS:
            return True
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                scheme, _, given = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    return hmac.compare_digest(_digest(given.strip()), self._want)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.allowed(scope):
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
