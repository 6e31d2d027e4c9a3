"""``GET /late``: the late occurrences of schedules with a ``deadline``, newest first.

``GET /late?schedule=S&since=D&limit=N`` answers ``{"late": [{"schedule",
"instant", "deadline", "reason", "job_id", "detected_at", "finished_at"},
...]}``, newest instant first. ``since`` is an ISO-8601 instant or a duration
back from the database clock (``1h``), and keeps the occurrences scheduled at
or after it; ``schedule`` must name a schedule (404 otherwise). The same
objects as ``rota late --json``; one schedule's newest is its ``last_late``
(``GET /schedules``, ``GET /schedules/{name}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlalchemy import Connection, Engine

from rota.api.audit import since_param, text_param
from rota.api.problems import NOT_FOUND, Problem
from rota.core.queries.jobs_read import database_now
from rota.core.queries.late_occurrences import last_late_by_schedule, newest_late
from rota.core.queries.schedules import get_schedule
from rota.scheduler.deadlines import late_json

router = APIRouter(tags=["schedules"])

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
NAME_MAX_CHARS = 200  # schedules.name


def last_late(conn: Connection, names: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """{schedule: its newest late occurrence as JSON}: a schedule's ``last_late``."""
    return {name: late_json(row) for name, row in last_late_by_schedule(conn, names).items()}


def with_last_late(resource: dict[str, Any], lates: Mapping[str, Any]) -> dict[str, Any]:
    """A schedule resource with its ``last_late`` (null when none is recorded)."""
    return {**resource, "last_late": lates.get(resource["name"])}


@router.get(
    "/late",
    summary="Late occurrences (not SUCCEEDED by their schedule's deadline), newest first",
    responses={404: {"description": "no such schedule"}, 422: {"description": "a bad value"}},
)
def read_late(
    request: Request,
    schedule: Annotated[
        str | None, Query(max_length=NAME_MAX_CHARS, description="only this schedule's")
    ] = None,
    since: Annotated[
        str | None,
        Query(max_length=100, description="scheduled at or after: an ISO instant or a duration"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> dict[str, Any]:
    name = text_param("schedule", schedule, NAME_MAX_CHARS)
    engine: Engine = request.app.state.engine
    with engine.connect() as conn:
        if name is not None and get_schedule(conn, name) is None:
            raise Problem(404, "No such schedule", f"no schedule {name[:200]!r}", type=NOT_FOUND)
        start = since_param(since, database_now(conn)) if since else None
        rows = newest_late(conn, schedule=name, since=start, limit=limit)
    return {"late": [late_json(r) for r in rows]}
