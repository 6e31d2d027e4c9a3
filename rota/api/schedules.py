"""``/schedules``: the declared schedules with their skip ledger; pause, resume, trigger.

The actions are ``rota.operations.schedules``'s, the same as ``rota pause``,
``rota resume`` and ``rota trigger``: one transaction each, the schedule row
locked, the replicas woken, an operator action recorded with the request's
actor and the body's reason (``rota.api.audit.action_note``). One schedule's
resource lists its newest operator actions as ``actions``. Every schedule
carries its newest ended occurrence (``last_outcome``: state, scheduled
instant, finish) and the instant of its newest success (``last_success``),
read from ``schedule_outcomes``, not from the job history.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from rota.api.audit import ACTION_OPENAPI, ACTION_RESPONSES, action_note
from rota.api.jobs import engine_of
from rota.api.late import last_late, with_last_late
from rota.api.problems import ILLEGAL_TRANSITION, NOT_FOUND, OVERLAP_FORBIDDEN, Problem
from rota.api.resources import instant, job_location, schedule_health, schedule_resource
from rota.core.operator_notes import ActionNote
from rota.core.queries.operator_actions import actions_of_schedule
from rota.core.queries.schedule_outcomes import (
    outcome_of_schedule,
    schedule_outcomes,
)
from rota.core.queries.schedule_skips import skips_of_schedule, totals_by_reason
from rota.core.queries.schedules import get_schedule, list_schedules
from rota.operations import schedules as operations
from rota.operations.schedules import OverlapForbidden, ScheduleRemoved, UnknownSchedule

router = APIRouter(tags=["schedules"])

LEDGER_ROWS = 100  # the newest ledger rows shown with one schedule
ACTIONS_SHOWN = 100  # the newest operator actions shown with one schedule
Note = Annotated[ActionNote, Depends(action_note)]


def _not_found(name: str) -> Problem:
    return Problem(404, "No such schedule", f"no schedule {name[:200]!r}", type=NOT_FOUND)


@router.get("/schedules", summary="Every schedule: next and last fire, paused, skip counts")
def read_schedules(request: Request) -> dict[str, Any]:
    with engine_of(request).connect() as conn:
        rows = list_schedules(conn)
        totals = totals_by_reason(conn)
        lates = last_late(conn)
        outcomes = schedule_outcomes(conn)
    return {
        "schedules": [
            with_last_late(
                {
                    **schedule_resource(r, totals.get(r["name"], {})),
                    **schedule_health(outcomes.get(r["name"])),
                },
                lates,
            )
            for r in rows
        ]
    }


@router.get(
    "/schedules/{name:path}",
    summary="One schedule with its skip ledger and operator actions (newest rows)",
)
def read_schedule(name: str, request: Request) -> dict[str, Any]:
    with engine_of(request).connect() as conn:
        row = get_schedule(conn, name)
        if row is None:
            raise _not_found(name)
        totals = totals_by_reason(conn).get(name, {})
        ledger = skips_of_schedule(conn, name, newest=LEDGER_ROWS)
        actions = actions_of_schedule(conn, name, newest=ACTIONS_SHOWN)
        lates = last_late(conn, [name])
        outcome = outcome_of_schedule(conn, name)
    return with_last_late(
        {**schedule_resource(row, totals, ledger, actions), **schedule_health(outcome)}, lates
    )


def _current(request: Request, name: str) -> dict[str, Any]:
    return read_schedule(name, request)


@router.post(
    "/schedules/{name:path}/pause",
    summary="Pause: no more occurrences until resumed",
    openapi_extra=ACTION_OPENAPI,
    responses=ACTION_RESPONSES,
)
def pause_schedule(name: str, request: Request, note: Note) -> dict[str, Any]:
    try:
        changed = operations.pause(engine_of(request), name, note=note)
    except UnknownSchedule:
        raise _not_found(name) from None
    return {"changed": changed, "schedule": _current(request, name)}


@router.post(
    "/schedules/{name:path}/resume",
    summary="Resume; the misfire policy decides what fell in the pause",
    openapi_extra=ACTION_OPENAPI,
    responses=ACTION_RESPONSES,
)
def resume_schedule(name: str, request: Request, note: Note) -> dict[str, Any]:
    try:
        result = operations.resume(engine_of(request), name, note=note)
    except UnknownSchedule:
        raise _not_found(name) from None
    return {
        "changed": result.was_paused,
        "created": result.tick.created,
        "skipped": result.tick.skipped,
        "schedule": _current(request, name),
    }


@router.post(
    "/schedules/{name:path}/trigger",
    status_code=202,
    summary="Fire one manual occurrence now",
    openapi_extra=ACTION_OPENAPI,
    responses={
        409: {
            "description": "the schedule was removed from the schedule file, or it has "
            "overlap: forbid and a run is unfinished (nothing is recorded)"
        },
        **ACTION_RESPONSES,
    },
)
def trigger_schedule(name: str, request: Request, note: Note) -> JSONResponse:
    try:
        result = operations.trigger(engine_of(request), name, note=note)
    except UnknownSchedule:
        raise _not_found(name) from None
    except ScheduleRemoved as exc:
        raise Problem(409, "Schedule removed", str(exc), type=ILLEGAL_TRANSITION) from None
    except OverlapForbidden as exc:
        raise Problem(
            409,
            "Overlap forbidden",
            str(exc),
            type=OVERLAP_FORBIDDEN,
            running=[str(j) for j in exc.running[:20]],
        ) from None
    location = job_location(result.job_id)
    body = {
        "job_id": str(result.job_id),
        "dedup_key": result.dedup_key,
        "scheduled_for": instant(result.scheduled_for),
        "replaced": [str(j) for j in result.replaced],
        "links": {"job": location},
    }
    return JSONResponse(body, status_code=202, headers={"Location": location})
