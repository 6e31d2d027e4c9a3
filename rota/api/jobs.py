"""``/jobs``: submit (202 + Location), read, list, cancel, replay.

Submissions go through ``rota.producer.enqueue`` in one transaction: a value it
refuses, an unknown job type or backpressure raises before anything is
inserted, so a failed request never leaves a partial job behind. Cancel and
replay go through ``rota.operations.jobs``, the path the CLI takes: the same
guarded statement, an ``operator_actions`` row naming the request's actor and
the body's reason (``rota.api.audit.action_note``), and the same event line.
``GET /jobs/{id}`` lists those rows as ``actions``.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection, Engine
from starlette.concurrency import run_in_threadpool

from rota.api.audit import ACTION_OPENAPI, ACTION_RESPONSES, action_note, since_param
from rota.api.problems import (
    ILLEGAL_TRANSITION,
    INVALID_REQUEST,
    NOT_FOUND,
    QUEUE_FULL,
    UNKNOWN_JOB_TYPE,
    Problem,
    bounded_body,
    json_body,
    validated,
)
from rota.api.resources import instant, job_location, job_resource
from rota.core.operator_notes import ActionNote
from rota.core.queries.job_ids import NoSuchJob
from rota.core.queries.jobs_read import (
    JobFilter,
    Keyset,
    database_now,
    get_attempts,
    get_job,
    newest_jobs,
)
from rota.core.queries.operator_actions import actions_of_job
from rota.core.states import ALL_STATES, JobState
from rota.core.timefmt import as_utc, parse_zoned_instant
from rota.operations import jobs as operations
from rota.producer.enqueue import QueueFull, UnknownJobType, enqueue

router = APIRouter(tags=["jobs"])

DEFAULT_PAGE = 50
MAX_PAGE = 500
MAX_BODY_BYTES = 2_000_000  # args are at most 1 MB of JSON (rota.core.storable)
ACTIONS_SHOWN = 100  # the newest operator actions listed with one job


class JobSubmission(BaseModel):
    """A job to create. Absent fields take the job type's values (or now, for ``run_after``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    job_type: str = Field(description="a job type stored by `rota apply`")
    args: dict[str, Any] | None = Field(default=None, description="small JSON object")
    payload_ref: str | None = None
    dedup_key: str | None = Field(
        default=None, description="a second submission with this key returns the first job"
    )
    run_after: str | None = Field(
        default=None, description="ISO-8601 instant with its offset (Z or +01:00); default now"
    )
    priority: int | None = Field(default=None, description="0 runs first")
    tenant: str | None = None
    concurrency_key: str | None = None
    max_attempts: int | None = None


def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def parse_job_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise Problem(404, "No such job", f"no job {text[:60]!r}", type=NOT_FOUND) from None


def _load(conn: Connection, job_id: uuid.UUID, *, attempts: bool) -> dict[str, Any]:
    job = get_job(conn, job_id)
    if job is None:
        raise Problem(404, "No such job", f"no job {job_id}", type=NOT_FOUND)
    history = get_attempts(conn, job_id) if attempts else None
    actions = actions_of_job(conn, job_id, newest=ACTIONS_SHOWN) if attempts else None
    return job_resource(job, database_now(conn), history, actions=actions)


@router.post(
    "/jobs",
    status_code=202,
    summary="Submit a job",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": JobSubmission.model_json_schema()}},
        }
    },
    responses={
        202: {
            "description": "accepted; Location names the job (an existing one for a known "
            "dedup_key)"
        },
        400: {"description": "the body is not JSON"},
        422: {"description": "invalid values, or an unknown job type"},
        429: {"description": "backpressure: the job type's limits refuse it; see Retry-After"},
    },
)
async def submit_job(request: Request) -> JSONResponse:
    body = await read_submission(request)
    return await run_in_threadpool(_submit, body, request)


async def read_submission(request: Request) -> JobSubmission:
    """The body as a ``JobSubmission``, of bounded size (the gate has already refused any
    Content-Type but application/json: ``rota.api.browser``)."""
    raw = await bounded_body(
        request,
        MAX_BODY_BYTES,
        f"a job submission is at most {MAX_BODY_BYTES:,} bytes: put large data behind payload_ref",
    )
    return validated(JobSubmission, json_body(raw))


def _submit(body: JobSubmission, request: Request) -> JSONResponse:
    try:
        run_after = parse_zoned_instant(body.run_after) if body.run_after is not None else None
    except (ValueError, OverflowError) as exc:
        where = [{"where": "body.run_after", "problem": str(exc)}]  # as a validation error says
        raise Problem(
            422, "Invalid request", f"run_after: {exc}", type=INVALID_REQUEST, errors=where
        ) from None
    try:
        with engine_of(request).begin() as conn:
            result = enqueue(
                conn,
                body.job_type,
                args=body.args,
                payload_ref=body.payload_ref,
                dedup_key=body.dedup_key,
                run_after=run_after,
                priority=body.priority,
                tenant=body.tenant,
                concurrency_key=body.concurrency_key,
                max_attempts=body.max_attempts,
            )
            resource = _load(conn, result.job_id, attempts=False)
    except UnknownJobType as exc:
        raise Problem(422, "Unknown job type", str(exc), type=UNKNOWN_JOB_TYPE) from None
    except QueueFull as exc:
        raise Problem(
            429,
            "Queue full",
            str(exc),
            type=QUEUE_FULL,
            headers={"Retry-After": str(exc.retry_after)},
            job_type=exc.job_type,
            reason=exc.reason,
            retry_after=exc.retry_after,
        ) from None
    except (ValueError, OverflowError) as exc:
        raise Problem(422, "Invalid request", str(exc), type=INVALID_REQUEST) from None
    resource["created"] = result.created
    location = job_location(result.job_id)
    return JSONResponse(resource, status_code=202, headers={"Location": location})


@router.get("/jobs/{job_id}", summary="One job, with its attempts and operator actions")
def read_job(job_id: str, request: Request) -> dict[str, Any]:
    with engine_of(request).connect() as conn:
        return _load(conn, parse_job_id(job_id), attempts=True)


def _states(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    states = tuple(s.strip().upper() for s in text.split(",") if s.strip())
    unknown = [s for s in states if s not in ALL_STATES]
    if unknown:
        raise Problem(
            422,
            "Invalid request",
            f"state: unknown {unknown[0][:40]!r}; one of {', '.join(ALL_STATES)}",
            type=INVALID_REQUEST,
        )
    return states


def _encode_cursor(created_at: datetime, job_id: uuid.UUID) -> str:
    raw = json.dumps([created_at.isoformat(), str(job_id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(text: str) -> Keyset:
    """The keyset a ``next`` link carries; anything else, hand-made or cut, is a 422."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        created, job_id = json.loads(raw)
        if not isinstance(created, str) or not isinstance(job_id, str):
            raise TypeError(text)
        at = datetime.fromisoformat(created)
        if at.tzinfo is None:  # every cursor this API gives carries its offset
            raise ValueError(created)
        return Keyset(as_utc(at), uuid.UUID(job_id))
    except (binascii.Error, ValueError, TypeError, OverflowError, RecursionError):
        raise Problem(
            422, "Invalid request", "cursor: not a cursor this API gave", type=INVALID_REQUEST
        ) from None


SEARCH_MAX_CHARS = 200


def search_text(q: str | None) -> str | None:
    """``q`` checked: at most ``SEARCH_MAX_CHARS`` printable characters (blank: no search)."""
    if q is None or not q.strip():
        return None
    if len(q) > SEARCH_MAX_CHARS:
        raise Problem(
            422,
            "Invalid request",
            f"q: at most {SEARCH_MAX_CHARS} characters, got {len(q):,}",
            type=INVALID_REQUEST,
        )
    return _printable("q", q).strip()


def _printable(field: str, value: str) -> str:
    # NUL, control characters, lone surrogates: no stored name or text holds them, and
    # PostgreSQL refuses a NUL in any text parameter.
    if not value.isprintable():
        raise Problem(
            422, "Invalid request", f"{field}: only printable characters", type=INVALID_REQUEST
        )
    return value


def job_filter(
    conn: Connection,
    *,
    state: str | None,
    job_type: str | None,
    schedule: str | None,
    since: str | None,
    q: str | None,
) -> JobFilter:
    """The filter the query parameters (or a bulk body's fields) describe, checked."""
    return JobFilter(
        states=_states(state),
        job_types=(_printable("job_type", job_type),) if job_type else (),
        schedules=(_printable("schedule", schedule),) if schedule else (),
        created_since=since_param(since, database_now(conn)),
        text=search_text(q),
    )


@router.get(
    "/jobs",
    summary="List jobs, newest first, page by page (args left out: read one job for them)",
)
def list_jobs(
    request: Request,
    state: Annotated[
        str | None, Query(description="a state, or several: FAILED,RETRY_WAIT")
    ] = None,
    job_type: Annotated[str | None, Query(max_length=200)] = None,
    schedule: Annotated[str | None, Query(max_length=200)] = None,
    since: Annotated[
        str | None,
        Query(max_length=100, description="created at or after: an ISO instant or a duration (1h)"),
    ] = None,
    q: Annotated[
        str | None,
        Query(
            description="search: the job id (or 8+ of its first hex digits), or part of the "
            f"dedup key, error code or error detail (any case; at most {SEARCH_MAX_CHARS} "
            "characters)"
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> JSONResponse:
    after = _decode_cursor(cursor) if cursor else None
    with engine_of(request).connect() as conn:
        now = database_now(conn)
        f = job_filter(conn, state=state, job_type=job_type, schedule=schedule, since=since, q=q)
        rows = newest_jobs(conn, f, limit=limit + 1, after=after)
    page = rows[:limit]
    body: dict[str, Any] = {
        "jobs": [job_resource(r, now, args=False) for r in page],
        "next": None,
    }
    headers: dict[str, str] = {}
    if len(rows) > limit:
        last = page[-1]
        query = {
            k: v
            for k, v in (
                ("state", state),
                ("job_type", job_type),
                ("schedule", schedule),
                # ``since`` as the instant it meant: a duration would move with each page
                ("since", instant(f.created_since)),
                ("q", f.text),
                ("limit", str(limit)),
            )
            if v
        }
        query["cursor"] = _encode_cursor(last["created_at"], last["job_id"])
        body["next"] = f"/jobs?{urlencode(query)}"
        headers["Link"] = f'<{body["next"]}>; rel="next"'
    return JSONResponse(body, headers=headers)


@router.post(
    "/jobs/{job_id}/cancel",
    summary="Cancel a job (a running job is asked to stop)",
    openapi_extra=ACTION_OPENAPI,
    responses={
        200: {"description": "cancelled (or already cancelled)"},
        202: {"description": "running: cancellation requested, the worker stops"},
        409: {"description": "the job already finished"},
        **ACTION_RESPONSES,
    },
)
def cancel_job(
    job_id: str, request: Request, note: Annotated[ActionNote, Depends(action_note)]
) -> JSONResponse:
    jid = parse_job_id(job_id)
    result = _act(operations.cancel_job, jid, request, note)
    if not result.changed and result.state not in (
        JobState.CANCELLED,
        JobState.CANCEL_REQUESTED,
    ):
        raise Problem(
            409,
            "Illegal transition",
            f"job {jid} is {result.state.value}: only a waiting or running job can be cancelled",
            type=ILLEGAL_TRANSITION,
            state=result.state.value,
        )
    status = 202 if result.state is JobState.CANCEL_REQUESTED else 200
    return JSONResponse(_current(request, jid), status_code=status)


@router.post(
    "/jobs/{job_id}/replay",
    summary="Put a FAILED job back in the queue with a fresh attempt budget",
    openapi_extra=ACTION_OPENAPI,
    responses={409: {"description": "the job is not FAILED"}, **ACTION_RESPONSES},
)
def replay_job(
    job_id: str, request: Request, note: Annotated[ActionNote, Depends(action_note)]
) -> JSONResponse:
    jid = parse_job_id(job_id)
    result = _act(operations.replay_job, jid, request, note)
    if not result.changed:
        raise Problem(
            409,
            "Illegal transition",
            f"job {jid} is {result.state.value}: only a FAILED job can be replayed",
            type=ILLEGAL_TRANSITION,
            state=result.state.value,
        )
    request.app.state.failed_counts.forget()  # the job left FAILED: recount at the next read
    headers = {"Location": job_location(jid)}
    return JSONResponse(_current(request, jid), status_code=200, headers=headers)


def _act(
    action: Callable[[Engine, str, ActionNote], operations.JobControl],
    jid: uuid.UUID,
    request: Request,
    note: ActionNote,
) -> operations.JobControl:
    try:
        return action(engine_of(request), str(jid), note)
    except NoSuchJob:
        raise Problem(404, "No such job", f"no job {jid}", type=NOT_FOUND) from None


def _current(request: Request, jid: uuid.UUID) -> dict[str, Any]:
    with engine_of(request).connect() as conn:
        return _load(conn, jid, attempts=False)
