"""The gate before every route: Host, other origins, the token, the role, and the security
headers on every answer.

In this order, each refusal an ``application/problem+json`` answer:

1. ``Host`` must name this server (421; ``rota.api.browser.HostPolicy``), on
   every route: a DNS-rebinding page is refused before it reads anything.
2. A request that may change something (POST, PUT, PATCH, DELETE) from another
   origin is refused (403), token or not; its body must be JSON (415)
   (``rota.api.browser.refuse_change``).
3. With tokens configured (``rota.api.identities``), every request but
   ``/healthz`` and ``/readyz`` must carry one: 401 with ``WWW-Authenticate:
   Bearer``, and for a browser asking for the dashboard (``GET /``, accepting
   HTML) the dashboard's page as the 401 body, which asks for the token.
4. The token's role must allow the method and path (403;
   ``rota.api.access.required_role``): the routes never check roles themselves.

A token is read from ``X-Rota-Token`` (base64 of its UTF-8 bytes: what the
dashboard sends, since a browser's header bytes are Latin-1 and cannot carry most
of Unicode) or from ``Authorization: Bearer`` as UTF-8 bytes (curl) or, when those
are not ASCII, as Latin-1 bytes re-decoded (a browser, ``urllib``): either way
the token's UTF-8 form is what is compared.

With no token configured at all, every request is ``anonymous`` with every role:
``rota serve`` then binds loopback addresses only (``rota.api.server``) and
answers only localhost names, and the origin checks above keep other pages out.

The identity a request proved travels in its state: ``actor`` (the token's
name; ``default`` for ``ROTA_API_TOKEN``, ``anonymous`` with no token set) and
``role``; every operator action records the actor (``operator_note``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import Request

from rota.api.access import UNSAFE_METHODS, required_role
from rota.api.browser import (
    Headers,
    HostPolicy,
    Refusal,
    headers_of,
    refuse_change,
    with_security_headers,
)
from rota.api.identities import ANONYMOUS, Identity, TokenTable
from rota.api.problems import PROBLEM_JSON, UNAUTHORIZED
from rota.core.operator_notes import ActionNote

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
FORBIDDEN = "urn:rota:problem:forbidden"
TOKEN_HEADER = b"x-rota-token"


def presented_tokens(headers: Headers) -> list[bytes]:
    """The UTF-8 forms the request's token may have: none, one, or two readings of it."""
    encoded = headers.get(TOKEN_HEADER)
    if encoded:
        try:
            token = base64.b64decode(encoded[0].strip(), validate=True)
        except (binascii.Error, ValueError):
            return []
        return [token] if token else []
    for value in headers.get(b"authorization", []):
        scheme, _, given = value.strip().partition(b" ")
        if scheme.lower() != b"bearer":
            continue
        token = given.strip()
        if not token:
            return []
        if token.isascii():
            return [token]
        # Non-ASCII bytes: UTF-8 from curl, or Latin-1 from a browser or urllib.
        return [token, token.decode("latin-1").encode("utf-8")]
    return []


class AccessGate:
    """ASGI middleware: every check above, before any route (or 404) is reached."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenTable,
        hosts: HostPolicy,
        page: Callable[[], tuple[bytes, str]],
    ) -> None:
        self.app = app
        self._tokens = tokens
        self._hosts = hosts
        self._page = page

    def identity(self, headers: Headers) -> Identity | None:
        """The identity the request proved, or None when it proved none."""
        if self._tokens.empty:
            return ANONYMOUS
        return self._tokens.identify(presented_tokens(headers))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = self._page()[1].encode()

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = with_security_headers(message.get("headers") or [], csp)
            await send(message)

        headers = headers_of(scope.get("headers") or ())
        method, path = scope.get("method", ""), scope.get("path", "")
        refusal = self._hosts.refuse(headers)
        if refusal is None and method in UNSAFE_METHODS:
            refusal = refuse_change(headers)
        if refusal is not None:
            await _answer(secured, refusal.status, _problem(refusal, path), PROBLEM_JSON)
            return
        identity = self.identity(headers)
        state = scope.setdefault("state", {})
        if identity is None and path in OPEN_PATHS:
            state["actor"], state["role"] = None, None
            await self.app(scope, receive, secured)
            return
        if identity is None:
            await self._unauthorized(secured, headers, method, path)
            return
        needed = required_role(method, path)
        if not identity.role.allows(needed):
            refusal = Refusal(
                403,
                "Forbidden",
                f"{identity.name} has the {identity.role.value} role; {method} {path[:200]} "
                f"needs the {needed.value} role",
                FORBIDDEN,
            )
            await _answer(secured, 403, _problem(refusal, path), PROBLEM_JSON)
            return
        state["actor"], state["role"] = identity.name, identity.role.value
        await self.app(scope, receive, secured)

    async def _unauthorized(self, send: Send, headers: Headers, method: str, path: str) -> None:
        accept = b",".join(headers.get(b"accept", []))
        if path == "/" and method == "GET" and b"text/html" in accept:
            await _answer(send, 401, self._page()[0], "text/html; charset=utf-8", bearer=True)
            return
        problem = {
            "type": UNAUTHORIZED,
            "title": "Unauthorized",
            "status": 401,
            "detail": "send Authorization: Bearer <a token of this server> (ROTA_API_TOKEN, "
            "or one whose sha256 is in ROTA_API_TOKENS_FILE)",
            "instance": path,
        }
        await _answer(send, 401, json.dumps(problem).encode(), PROBLEM_JSON, bearer=True)


def _problem(refusal: Refusal, path: str) -> bytes:
    body = {
        "type": refusal.type,
        "title": refusal.title,
        "status": refusal.status,
        "detail": refusal.detail,
        "instance": path,
    }
    return json.dumps(body).encode()


async def _answer(send: Send, status: int, body: bytes, kind: str, *, bearer: bool = False) -> None:
    headers = [
        (b"content-type", kind.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    if bearer:
        headers.append((b"www-authenticate", b'Bearer realm="rota"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def operator_note(request: Request) -> ActionNote:
    """Who acts, for the operator action a route is about to take."""
    actor = getattr(request.state, "actor", None)
    if actor is None:  # an open path: none of them acts
        raise RuntimeError(f"{request.url.path} acts without an authenticated actor")
    return ActionNote.of(actor)


def whoami(request: Request) -> dict[str, Any]:
    """The request's actor and role (``GET /whoami``: the dashboard hides what it cannot do)."""
    return {
        "actor": getattr(request.state, "actor", None),
        "role": getattr(request.state, "role", None),
    }
