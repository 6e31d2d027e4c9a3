"""``POST /jobs/cancel`` and ``POST /jobs/replay``: the bulk forms, for every job a filter matches.

The body holds the filters of ``GET /jobs`` (``state``, ``job_type``,
``schedule``, ``since``, ``q``), at least one of them, a ``reason`` and an
optional ``max``; ``dry_run: true`` counts and changes nothing. The jobs are
changed by ``rota.operations.jobs.bulk_cancel`` / ``bulk_replay``, the path of
``rota cancel --state ...`` and ``rota replay --state ...``: bounded batches, the
single form's guarded statement, one ``operator_actions`` row per job changed
with the request's actor and the reason, one event line per job.

A request is bounded: it acts on at most ``max`` jobs (``DEFAULT_MAX`` when
absent, at most ``MAX_MAX``). When more than ``max`` match, nothing is done and
the answer is 422 with how many matched (counted no further than ``max`` + 1),
as ``rota backfill`` refuses more than ``--max``. Jobs that join the set between
the count and the walk are not acted on past ``max`` either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine

from rota.api.audit import MAX_ACTION_BODY, REASON_SCHEMA
from rota.api.auth import operator_note
from rota.api.jobs import SEARCH_MAX_CHARS, engine_of, job_filter
from rota.api.problems import (
    INVALID_REQUEST,
    UNAVAILABLE,
    Problem,
    bounded_body,
    json_body,
    validated,
)
from rota.core.database import scrub, short_error
from rota.core.operator_notes import ActionNote
from rota.core.queries.jobs_read import JobFilter
from rota.operations.jobs import (
    BulkInterrupted,
    BulkResult,
    StateNotAllowed,
    UnknownName,
    bulk_cancel,
    bulk_replay,
    cancel_states,
    check_names,
    count_up_to,
    replay_states,
)

router = APIRouter(tags=["jobs"])

DEFAULT_MAX = 1_000
MAX_MAX = 1_000_000


class BulkRequest(BaseModel):
    """Which jobs (the filters of ``GET /jobs``, at least one), why, and how many at most."""

    model_config = ConfigDict(extra="forbid", strict=True)

    state: str | None = Field(default=None, max_length=200, description="FAILED,RETRY_WAIT")
    job_type: str | None = Field(default=None, max_length=200)
    schedule: str | None = Field(default=None, max_length=200)
    since: str | None = Field(
        default=None, max_length=100, description="created at or after: ISO instant or 1h"
    )
    q: str | None = Field(
        default=None,
        max_length=SEARCH_MAX_CHARS,
        description="search the id, dedup key, error code and detail",
    )
    reason: str | None = Field(
        default=None,
        description="kept in the audit with the actor (at most 1,000 characters, one line)",
        json_schema_extra=REASON_SCHEMA,
    )
    max: int | None = Field(
        default=None,
        ge=1,
        le=MAX_MAX,
        description=f"refuse when more jobs than this match (default {DEFAULT_MAX:,})",
    )
    dry_run: bool = Field(default=False, description="count, change nothing")


BULK_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": BulkRequest.model_json_schema()}},
    }
}
BULK_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "done: {total, changed: {state: n}, batches}; or, for dry_run, "
        "{matching, max, over_max} (matching counted no further than max + 1)"
    },
    400: {"description": "the body is not JSON"},
    413: {"description": "the body is too large"},
    422: {
        "description": "no filter, a bad value, a state the action cannot apply to, a job "
        "type or schedule stored nowhere, or more jobs match than max (nothing done; "
        "matching says how many)"
    },
    503: {"description": "a batch failed: what the committed batches did stays (done)"},
}


async def bulk_body(request: Request) -> BulkRequest:
    """The body, bounded and checked (a FastAPI dependency)."""
    raw = await bounded_body(
        request, MAX_ACTION_BODY, f"a bulk action's body is at most {MAX_ACTION_BODY:,} bytes"
    )
    return validated(BulkRequest, json_body(raw))


Body = Annotated[BulkRequest, Depends(bulk_body)]
StatesOf = Callable[[JobFilter], tuple[str, ...]]
Run = Callable[[Engine, JobFilter, ActionNote, int], BulkResult]


@router.post(
    "/jobs/cancel",
    summary="Cancel every job the filters match (QUEUED, RETRY_WAIT, RUNNING)",
    openapi_extra=BULK_OPENAPI,
    responses=BULK_RESPONSES,
)
def cancel_matching(request: Request, body: Body) -> dict[str, Any]:
    return _bulk(
        request,
        body,
        cancel_states,
        lambda engine, where, note, limit: bulk_cancel(engine, where, note, limit=limit),
    )


@router.post(
    "/jobs/replay",
    summary="Replay every FAILED job the filters match, with a fresh attempt budget",
    openapi_extra=BULK_OPENAPI,
    responses=BULK_RESPONSES,
)
def replay_matching(request: Request, body: Body) -> dict[str, Any]:
    answer = _bulk(
        request,
        body,
        replay_states,
        lambda engine, where, note, limit: bulk_replay(engine, where, note, limit=limit),
    )
    if answer.get("total"):
        request.app.state.failed_counts.forget()  # jobs left FAILED: recount at the next read
    return answer


def _bulk(request: Request, body: BulkRequest, states_of: StatesOf, run: Run) -> dict[str, Any]:
    try:
        note = ActionNote.of(operator_note(request).actor, body.reason)
    except ValueError as exc:
        raise Problem(422, "Invalid request", f"reason: {exc}", type=INVALID_REQUEST) from None
    engine = engine_of(request)
    limit = body.max or DEFAULT_MAX
    with engine.connect() as conn:
        where = job_filter(
            conn,
            state=body.state,
            job_type=body.job_type,
            schedule=body.schedule,
            since=body.since,
            q=body.q,
        )
        if where == JobFilter():  # blank values filter nothing either
            raise Problem(
                422,
                "Invalid request",
                "give at least one filter (state, job_type, schedule, since or q): a bulk "
                "action never means every job",
                type=INVALID_REQUEST,
            )
        try:
            where = replace(where, states=states_of(where))
            check_names(conn, where)
        except StateNotAllowed as exc:
            raise Problem(422, "Invalid request", f"state: {exc}", type=INVALID_REQUEST) from None
        except UnknownName as exc:
            raise Problem(
                422, "Invalid request", f"{exc.field}: {exc}", type=INVALID_REQUEST
            ) from None
        matching = count_up_to(conn, where, limit)
    if body.dry_run:
        return {"dry_run": True, "matching": matching, "max": limit, "over_max": matching > limit}
    if matching > limit:
        raise Problem(
            422,
            "Too many jobs",
            f"more than {limit:,} jobs match: narrow the filters, or give max (up to "
            f"{MAX_MAX:,}) to act on more; nothing was done",
            type=INVALID_REQUEST,
            matching=matching,
            max=limit,
        )
    try:
        result = run(engine, where, note, limit)
    except BulkInterrupted as exc:
        secret_url = engine.url.render_as_string(hide_password=False)
        cause = scrub(short_error(exc.cause), secret_url)[:200]
        raise Problem(
            503,
            "Interrupted",
            f"a database error stopped it after {exc.done.total} job(s) in "
            f"{exc.done.batches} committed batch(es): {cause}; those "
            "changes stay: send the same request again to go on",
            type=UNAVAILABLE,
            done=exc.done.total,
        ) from None
    return {
        "total": result.total,
        "changed": {state.value: n for state, n in sorted(result.changed.items())},
        "batches": result.batches,
    }
