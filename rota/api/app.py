"""Assembling the ASGI app: routes, errors, the token check, health, metrics, the dashboard."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy import Engine

from rota import __version__
from rota.api import dashboard, jobs, schedules
from rota.api.auth import BearerAuth
from rota.api.exposition import exposition
from rota.api.failed_counts import FailedCounts
from rota.api.problems import UNAVAILABLE, Problem, install, problem_response
from rota.core.database import DatabaseError, scrub
from rota.migrations.check import current_revision, schema_problem

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
log = logging.getLogger("rota.api")


def create_app(
    engine: Engine, *, token: str | None = None, failed_counts: FailedCounts | None = None
) -> Any:
    """The app on ``engine``; with ``token``, every route but the probes requires it.

    ``failed_counts``: how the FAILED counts are taken (``rota.api.failed_counts``);
    by default a new ``FailedCounts``, shared by ``/metrics`` and the dashboard.

    Returns the ASGI callable to serve (the FastAPI app wrapped in the token
    check); the FastAPI app itself is its ``.app`` attribute.
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
    api.include_router(jobs.router)
    api.include_router(schedules.router)

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
            current = current_revision(engine)
        except DatabaseError as exc:
            # The probe answers without a token: where the database is (host, port,
            # path, user) stays in the log, for the operator.
            secret_url = engine.url.render_as_string(hide_password=False)
            log.warning("event=readyz_unready error=%s", scrub(str(exc), secret_url))
            p = Problem(503, "Not ready", "database unreachable", type=UNAVAILABLE)
            return problem_response(p, request.url.path)
        problem = schema_problem(current)
        if problem is not None:
            p = Problem(503, "Not ready", f"the database {problem}", type=UNAVAILABLE)
            return problem_response(p, request.url.path)
        return JSONResponse({"status": "ready"})

    @api.get("/metrics", tags=["metrics"], summary="Prometheus text format")
    def metrics() -> Response:
        return Response(exposition(engine, failed), media_type=PROMETHEUS_TEXT)

    @api.get("/", include_in_schema=False)
    def index() -> Response:
        html, csp = dashboard.page()
        return Response(
            html,
            media_type="text/html; charset=utf-8",
            headers={
                "Content-Security-Policy": csp,
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer",
                "Cache-Control": "no-store",
            },
        )

    @api.get("/dashboard/data", tags=["dashboard"], summary="Everything the dashboard shows")
    def dashboard_data() -> dict[str, Any]:
        with engine.connect() as conn:
            return dashboard.dashboard_data(conn, failed)

    return BearerAuth(api, token, lambda: dashboard.page()[0])
