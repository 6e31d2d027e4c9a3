"""HEAD, OPTIONS and 405 for every route, from the routes themselves.

The router answers a method a path does not take with the ``Allow`` of the
first route whose path matched, and knows no HEAD or OPTIONS: ``OPTIONS /jobs``
said ``POST`` only (``GET /jobs`` is another route), and ``HEAD /healthz`` was
405. This middleware, in front of the router, collects the methods of every
route whose path matches the request's:

* ``HEAD`` of a path a GET route takes is that GET, answered without its body
  (same status and headers, ``Content-Length`` included);
* ``OPTIONS`` answers 204 with ``Allow`` listing them all (HEAD beside GET,
  OPTIONS itself);
* any other method none of them takes is 405 problem+json with that ``Allow``.

A path that a route with no parameter matches belongs to those routes alone:
``/jobs/cancel`` is the bulk action, and the job page ``/jobs/{job_id}``, which
matches it too, does not lend it a GET (that was a 404 "no job 'cancel'").

A path no route matches goes on to the router (404). Who may send these is
the gate's business (``rota.api.access``: HEAD and OPTIONS are reads).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from starlette.routing import BaseRoute, Match

from rota.api.auth import ASGIApp, Message, Receive, Scope, Send
from rota.api.problems import PROBLEM_JSON

METHOD_NOT_ALLOWED = "urn:rota:problem:method-not-allowed"


def flat_routes(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route, those of included routers too.

    FastAPI keeps an included router as one entry (``original_router``, its own
    routes) whose ``matches`` does not tell a path's methods; rota includes its
    routers without a prefix, so their routes match as they are.
    """
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is None:
            yield route
            continue
        prefix = getattr(getattr(route, "include_context", None), "prefix", "")
        assert not prefix, f"a router included with prefix {prefix!r}: match it here"
        yield from flat_routes(inner.routes)


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> set[str]:
    """Every method some route takes at this path (empty: no route has the path); those
    of the routes with no parameter alone, when one of them has it."""
    methods: set[str] = set()
    fixed: set[str] = set()
    for route in routes:
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            taken = set(getattr(route, "methods", None) or ())
            methods |= taken
            if not getattr(route, "param_convertors", None):
                fixed |= taken
    methods = fixed or methods
    if "GET" in methods:
        methods.add("HEAD")
    if methods:
        methods.add("OPTIONS")
    return methods


class MethodRouting:
    """ASGI middleware over the FastAPI app's router (``app.add_middleware``)."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self._given = routes
        self._flat: list[BaseRoute] | None = None  # at the first request: all are added

    @property
    def _routes(self) -> list[BaseRoute]:
        if self._flat is None:
            self._flat = list(flat_routes(self._given))
        return self._flat

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "")
        # Matched as GET: a route that takes GET takes this path's HEAD too.
        allowed = allowed_methods(self._routes, {**scope, "method": "GET"})
        if not allowed or (method in allowed and method not in {"HEAD", "OPTIONS"}):
            await self.app(scope, receive, send)
            return
        allow = ", ".join(sorted(allowed)).encode()
        if method == "OPTIONS":
            await _answer(send, 204, b"", [(b"allow", allow)])
            return
        if method == "HEAD" and "GET" in allowed:
            await self.app({**scope, "method": "GET"}, receive, _without_body(send))
            return
        body = {
            "type": METHOD_NOT_ALLOWED,
            "title": "Method not allowed",
            "status": 405,
            "detail": f"{method[:20]} is not one of {allow.decode()}",
            "instance": scope.get("path", ""),
        }
        headers = [(b"allow", allow), (b"content-type", PROBLEM_JSON.encode())]
        await _answer(send, 405, json.dumps(body).encode(), headers)


def _without_body(send: Send) -> Send:
    async def head(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return head


async def _answer(send: Send, status: int, body: bytes, headers: list[Any]) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
