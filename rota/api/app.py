"""Assembling the ASGI app: routes, errors, the gate, health, metrics, the dashboard."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy import Engine

from rota import __version__
from rota.api import audit, bulk, dashboard, jobs, late, outputs, schedules
from rota.api.auth import AccessGate, whoami
from rota.api.browser import HostPolicy
from rota.api.exposition import exposition
from rota.api.failed_counts import FailedCounts
from rota.api.identities import TokenTable
from rota.api.methods import MethodRouting
from rota.api.openapi_doc import documented
from rota.api.problems import UNAVAILABLE, Problem, install, problem_response
from rota.core.database import DatabaseError, scrub
from rota.migrations.check import database_problem

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
log = logging.getLogger("rota.api")


def create_app(
    engine: Engine,
    *,
    token: str | None = None,
    tokens: TokenTable | None = None,
    hosts: HostPolicy | None = None,
    failed_counts: FailedCounts | None = None,
) -> Any:
    """The app on ``engine``, behind the gate (``rota.api.auth``).

    ``tokens``: the tokens accepted (``rota.api.identities``); by default
    ``token`` alone, as an admin named ``default``, and none at all without it.
    ``hosts``: the Host names answered (``rota.api.browser.HostPolicy``); by
    default the loopback names. ``failed_counts``: how the FAILED counts are taken
    (``rota.api.failed_counts``); by default a new ``FailedCounts``, shared by
    ``/metrics`` and the dashboard.

    Returns the ASGI callable to serve (the FastAPI app wrapped in the gate);
    the FastAPI app itself is its ``.app`` attribute.
    """
    api = FastAPI(
        title="rota",
        version=__version__,
        description="Submit and watch rota's jobs and schedules. Errors are "
        "application/problem+json (RFC 9457).",
        openapi_url="/openapi.json",
        docs_url=None,  # Swagger UI loads its assets from a CDN; the dashboard does not
        redoc_url=None,
    )
    api.state.engine = engine
    failed = FailedCounts() if failed_counts is None else failed_counts
    api.state.failed_counts = failed  # a replay through the app forgets the kept count
    install(api, engine)
    api.add_middleware(MethodRouting, routes=api.router.routes)
    api.openapi = lambda: documented(api)  # type: ignore[method-assign]
    api.include_router(jobs.router)
    api.include_router(outputs.router)
    api.include_router(bulk.router)
    api.include_router(schedules.router)
    api.include_router(audit.router)
    api.include_router(late.router)

    @api.get("/healthz", tags=["health"], summary="The process answers")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @api.get(
        "/readyz",
        tags=["health"],
        summary="The database is reachable and migrated",
        responses={503: {"description": "not ready: the reason is in the body"}},
    )
    def readyz(request: Request) -> JSONResponse:
        try:
            problem = database_problem(engine)
        except DatabaseError as exc:
            # The probe answers without a token: where the database is (host, port,
            # path, user) stays in the log, for the operator.
            secret_url = engine.url.render_as_string(hide_password=False)
            log.warning("event=readyz_unready error=%s", scrub(str(exc), secret_url))
            p = Problem(503, "Not ready", "database unreachable", type=UNAVAILABLE)
            return problem_response(p, request.url.path)
        if problem is not None:
            p = Problem(503, "Not ready", f"the database {problem}", type=UNAVAILABLE)
            return problem_response(p, request.url.path)
        return JSONResponse({"status": "ready"})

    @api.get(
        "/metrics",
        tags=["metrics"],
        summary="Prometheus text format",
        response_class=Response,
        responses={200: {"content": {"text/plain": {}}}},
    )
    def metrics() -> Response:
        return Response(exposition(engine, failed), media_type=PROMETHEUS_TEXT)

    @api.get("/", include_in_schema=False)
    def index() -> Response:
        # The gate adds the page's Content-Security-Policy and the other security
        # headers, to this answer and to its 401 copy alike.
        return Response(
            dashboard.page()[0],
            media_type="text/html; charset=utf-8",
            headers={"Cache-Control": "no-store"},
        )

    api.get("/whoami", tags=["auth"], summary="The request's actor and role")(whoami)

    @api.get("/dashboard/data", tags=["dashboard"], summary="Everything the dashboard shows")
    def dashboard_data() -> dict[str, Any]:
        with engine.connect() as conn:
            return dashboard.dashboard_data(conn, failed)

    table = TokenTable.of(token) if tokens is None else tokens
    policy = HostPolicy.loopback() if hosts is None else hosts
    return AccessGate(api, table, policy, dashboard.page)
