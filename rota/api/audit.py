"""The audit trail over HTTP: the note every action request carries, and ``GET /audit``.

Every ``POST`` that acts (cancel, replay, pause, resume, trigger) takes an
optional JSON body ``{"reason": "..."}``; ``action_note`` reads it (bounded,
before the route runs) and pairs the reason with the request's actor, the
identity the token check proved (``rota.api.auth.operator_note``). A reason
is checked as the command line's ``--reason`` is (``ActionNote.of``): one
that cannot be kept is 422 and nothing is done. No body, an empty one, ``{}``
or ``{"reason": null}`` act without a reason.

``GET /audit?since=D&actor=NAME&limit=N`` answers ``{"actions": [{"at",
"actor", "action", "target_kind", "target", "reason", "detail"}, ...],
"next": ...}`` newest first, paged by keyset like ``GET /jobs``: ``next``
(and a ``Link`` header) holds the filters and a cursor after the last row.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine

from rota.api.auth import operator_note
from rota.api.problems import (
    INVALID_REQUEST,
    Problem,
    bounded_body,
    json_body,
    validated,
)
from rota.api.resources import audit_resource, instant
from rota.core.durations import DurationError, parse_duration
from rota.core.operator_notes import (
    ACTOR_MAX_CHARS,
    REASON_MAX_CHARS,
    ActionNote,
    check_note_text,
)
from rota.core.queries.jobs_read import database_now
from rota.core.queries.operator_actions import AuditKeyset, audit_entry, newest_actions
from rota.core.timefmt import as_utc, parse_instant

router = APIRouter(tags=["audit"])

DEFAULT_PAGE = 50
MAX_PAGE = 500
MAX_ACTION_BODY = 16_384  # a reason is at most 1,000 characters, 6 bytes each when escaped
MAX_ACTION_ID = 2**63 - 1


# What ``ActionNote.of`` keeps, said in the schema too (it checks, with its own words):
# at most REASON_MAX_CHARS characters, none of them a control character (Cc).
REASON_SCHEMA: dict[str, Any] = {
    "maxLength": REASON_MAX_CHARS,
    "pattern": r"^[^\u0000-\u001f\u007f-\u009f]*$",
}


class ActionBody(BaseModel):
    """Why the action is taken; optional, as is the body itself."""

    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str | None = Field(
        default=None,
        description="why, kept with the actor and the time (at most 1,000 characters, one line)",
        json_schema_extra=REASON_SCHEMA,
    )


# The optional body and its refusals, for the OpenAPI document of each action route.
ACTION_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "required": False,
        "content": {"application/json": {"schema": ActionBody.model_json_schema()}},
    }
}
ACTION_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"description": "the body is not JSON"},
    413: {"description": "the body is larger than an action's note can be"},
    422: {"description": "a reason that cannot be kept (too long, NUL, control characters)"},
}


async def action_note(request: Request) -> ActionNote:
    """The request's actor and the body's reason, checked (a FastAPI dependency)."""
    raw = await bounded_body(
        request,
        MAX_ACTION_BODY,
        f"an action's body is at most {MAX_ACTION_BODY:,} bytes: "
        '{"reason": "..."} with a reason of at most 1,000 characters',
    )
    reason = _reason(raw) if raw.strip() else None
    try:
        return ActionNote.of(operator_note(request).actor, reason)
    except ValueError as exc:
        raise Problem(422, "Invalid request", f"reason: {exc}", type=INVALID_REQUEST) from None


def _reason(raw: bytes) -> str | None:
    data = json_body(raw)
    if not isinstance(data, dict):
        raise Problem(
            422,
            "Invalid request",
            'the body must be a JSON object, like {"reason": "..."}, or empty',
            type=INVALID_REQUEST,
        )
    return validated(ActionBody, data).reason


def since_param(text: str | None, now: datetime) -> datetime | None:
    """``since``: an ISO-8601 instant, or a duration back from ``now`` (``1h``, ``30m``).

    An instant or a duration that leaves the range of dates (year 1 to 9999,
    in UTC) is refused like any other bad value.
    """
    if not text:
        return None
    try:
        return now - parse_duration(text)
    except (DurationError, OverflowError):
        pass
    try:
        return parse_instant(text)
    except (ValueError, OverflowError):
        raise Problem(
            422,
            "Invalid request",
            "since: use an ISO-8601 instant (years 1 to 9999 in UTC) or a duration like 1h",
            type=INVALID_REQUEST,
        ) from None


def _encode_cursor(at: datetime, action_id: int) -> str:
    raw = json.dumps([instant(at), action_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(text: str) -> AuditKeyset:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        at_text, action_id = json.loads(raw)
        if not isinstance(at_text, str) or type(action_id) is not int:
            raise TypeError(text)
        if not 0 <= action_id <= MAX_ACTION_ID:
            raise ValueError(text)
        at = datetime.fromisoformat(at_text)
        if at.tzinfo is None:  # every cursor this API gives carries its offset
            raise ValueError(at_text)
        return AuditKeyset(as_utc(at), action_id)
    except (binascii.Error, ValueError, TypeError, OverflowError, RecursionError):
        raise Problem(
            422, "Invalid request", "cursor: not a cursor this API gave", type=INVALID_REQUEST
        ) from None


def text_param(field: str, text: str | None, max_chars: int) -> str | None:
    """A free-text query parameter as given, or a 422 that says what is wrong with it."""
    if text is None:
        return None
    try:
        return check_note_text(field, text, max_chars)
    except ValueError as exc:
        raise Problem(422, "Invalid request", str(exc), type=INVALID_REQUEST) from None


@router.get(
    "/audit",
    summary="Every operator action, newest first, page by page",
    responses={422: {"description": "a value no action could match"}},
)
def read_audit(
    request: Request,
    since: Annotated[
        str | None,
        Query(max_length=100, description="at or after: an ISO instant or a duration (1h)"),
    ] = None,
    actor: Annotated[
        str | None,
        Query(
            max_length=ACTOR_MAX_CHARS,
            description="the actor as recorded: a token's name, or user@host from the CLI",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> JSONResponse:
    who = text_param("actor", actor, ACTOR_MAX_CHARS)
    after = _decode_cursor(cursor) if cursor else None
    engine: Engine = request.app.state.engine
    with engine.connect() as conn:
        start = since_param(since, database_now(conn)) if since else None
        rows = newest_actions(conn, since=start, actor=who, after=after, limit=limit + 1)
    page = rows[:limit]
    body: dict[str, Any] = {"actions": [audit_resource(audit_entry(r)) for r in page]}
    body["next"] = None
    headers: dict[str, str] = {}
    if len(rows) > limit:
        last = page[-1]
        # ``since`` as the instant it meant: a duration would move with each page.
        query = {
            k: v
            for k, v in (("since", instant(start)), ("actor", who), ("limit", str(limit)))
            if v is not None
        }
        query["cursor"] = _encode_cursor(last["at"], last["action_id"])
        body["next"] = f"/audit?{urlencode(query)}"
        headers["Link"] = f'<{body["next"]}>; rel="next"'
    return JSONResponse(body, headers=headers)
