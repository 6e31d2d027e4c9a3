"""Errors as ``application/problem+json`` (RFC 9457), for every route and every failure.

A route raises ``Problem(status, title, detail)``; request validation errors
become 400 (the body is not JSON at all) or 422 (JSON of the wrong shape), an
unknown route 404, and anything unexpected 500 without a traceback or a value
from the request in the answer (the exception is logged).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from rota.core.database import scrub, short_error

log = logging.getLogger("rota.api")

PROBLEM_JSON = "application/problem+json"

# Problem types: URNs, stable for clients to match on.
INVALID_REQUEST = "urn:rota:problem:invalid-request"
MALFORMED_BODY = "urn:rota:problem:malformed-body"
UNKNOWN_JOB_TYPE = "urn:rota:problem:unknown-job-type"
NOT_FOUND = "urn:rota:problem:not-found"
ILLEGAL_TRANSITION = "urn:rota:problem:illegal-transition"
QUEUE_FULL = "urn:rota:problem:queue-full"
OVERLAP_FORBIDDEN = "urn:rota:problem:overlap-forbidden"
UNAUTHORIZED = "urn:rota:problem:unauthorized"
UNAVAILABLE = "urn:rota:problem:unavailable"
INTERNAL = "urn:rota:problem:internal"


class Problem(Exception):
    def __init__(
        self,
        status: int,
        title: str,
        detail: str | None = None,
        *,
        type: str = "about:blank",
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail or title)
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type
        self.headers = dict(headers or {})
        self.extra = extra


def problem_response(p: Problem, instance: str | None = None) -> JSONResponse:
    body: dict[str, Any] = {"type": p.type, "title": p.title, "status": p.status}
    if p.detail is not None:
        body["detail"] = p.detail
    if instance is not None:
        body["instance"] = instance
    body.update(p.extra)
    return JSONResponse(body, status_code=p.status, headers=p.headers, media_type=PROBLEM_JSON)


def _where(loc: Sequence[Any]) -> str:
    return ".".join(str(part) for part in loc)


def nul_problem(request: Request) -> Problem | None:
    """A 422 for a NUL character in the path or the query string, else None.

    No name rota stores can hold one (every name is checked on the way in, and
    PostgreSQL text cannot store it), so such a request can match nothing;
    refused here, it never reaches a statement, on any route present or future.
    """
    where = None
    if "\x00" in request.url.path:
        where = "path"
    else:
        for key, value in request.query_params.multi_items():
            if "\x00" in key or "\x00" in value:
                where = f"query parameter {key[:40]!r}"
                break
    if where is None:
        return None
    return Problem(422, "Invalid request", f"{where}: holds a NUL character", type=INVALID_REQUEST)


def install(app: FastAPI, engine: Engine) -> None:
    @app.middleware("http")
    async def _refuse_nul(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        problem = nul_problem(request)
        if problem is not None:
            return problem_response(problem, request.url.path.replace("\x00", "\\x00"))
        return await call_next(request)

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(exc, request.url.path)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            p = Problem(
                400,
                "Malformed request body",
                "the body is not valid JSON",
                type=MALFORMED_BODY,
            )
        else:
            # Where and what, never the value sent (it may be huge or hostile).
            found = [
                {"where": _where(e.get("loc", ())), "problem": e.get("msg", "")} for e in errors
            ]
            detail = "; ".join(f"{f['where']}: {f['problem']}" for f in found[:5])
            p = Problem(422, "Invalid request", detail, type=INVALID_REQUEST, errors=found[:20])
        return problem_response(p, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = NOT_FOUND if exc.status_code == 404 else "about:blank"
        p = Problem(exc.status_code, str(exc.detail), type=kind, headers=exc.headers)
        return problem_response(p, request.url.path)

    @app.exception_handler(OperationalError)
    async def _database(request: Request, exc: OperationalError) -> JSONResponse:
        # The database is unreachable or refused the connection: the log says why (the
        # driver's message names the server's address); the answer only that it is so.
        secret_url = engine.url.render_as_string(hide_password=False)
        log.warning(
            "event=api_database_error path=%s error=%s",
            request.url.path,
            scrub(short_error(exc), secret_url),
        )
        p = Problem(
            503,
            "Database unavailable",
            "the database cannot be reached now; the server's log says why",
            type=UNAVAILABLE,
            headers={"Retry-After": "5"},
        )
        return problem_response(p, request.url.path)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error(
            "event=api_error path=%s error=%s", request.url.path, type(exc).__name__, exc_info=exc
        )
        p = Problem(500, "Internal error", "the server failed; see its log", type=INTERNAL)
        return problem_response(p, request.url.path)


Model = TypeVar("Model", bound=BaseModel)


async def bounded_body(request: Request, limit: int, too_large: str) -> bytes:
    """The request's body, read as it streams in; past ``limit`` bytes a 413 saying
    ``too_large``, before the rest is read."""
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise Problem(413, "Body too large", too_large, type=INVALID_REQUEST)
    return bytes(raw)


def json_body(raw: bytes) -> Any:
    """``raw`` as JSON; a 400 problem if it is not."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise Problem(
            400, "Malformed request body", "the body is not valid JSON", type=MALFORMED_BODY
        ) from None


def validated(model: type[Model], data: Any) -> Model:
    """``data`` as ``model``; its errors answered as FastAPI's own 422 (without the input)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_input=False)) from None
