"""``GET /jobs/{id}/attempts/{n}/output``: the tail of what one attempt's handler wrote.

``n`` counts the job's attempts from 1, in the order they started (the
attempts of ``GET /jobs/{id}``, in their order). The body is the text as kept
(``text/plain; charset=utf-8``): the last 64 KiB of a ``command:``'s stdout
and stderr, or of a Python handler's log records; while the attempt runs,
what it wrote up to its last lease renewal; empty when it wrote nothing.
``Rota-Output-Dropped-Bytes`` says how many bytes came before the tail.
A job or attempt that does not exist is a 404 problem. A viewer may read it
(``access``: every GET).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from rota.api.jobs import engine_of, parse_job_id
from rota.api.problems import NOT_FOUND, PROBLEM_JSON, Problem
from rota.core.queries.attempt_output import attempt_output
from rota.core.queries.jobs_read import get_job
from rota.core.storable import ATTEMPT_OUTPUT_MAX_BYTES

router = APIRouter(tags=["jobs"])

DROPPED_HEADER = "Rota-Output-Dropped-Bytes"
_NUMBER_MAX_DIGITS = 19  # BIGINT_MAX has 19: anything longer is no attempt's number

_NOT_FOUND = {
    "description": "no such job, or the job has no attempt n",
    "content": {PROBLEM_JSON: {"schema": {"type": "object"}}},
}


def _attempt_number(text: str) -> int | None:
    """``n`` as a positive whole number, or None when it cannot name an attempt."""
    if not (text.isascii() and text.isdigit()) or len(text) > _NUMBER_MAX_DIGITS:
        return None
    number = int(text)
    return number if number >= 1 else None


@router.get(
    "/jobs/{job_id}/attempts/{n}/output",
    summary="The tail of what one attempt's handler wrote (its command's stdout and "
    "stderr, its log records)",
    response_class=PlainTextResponse,
    responses={
        200: {
            "description": f"the last {ATTEMPT_OUTPUT_MAX_BYTES // 1024} KiB the attempt's "
            "handler wrote (while it runs: up to its last lease renewal), as UTF-8 text; "
            "empty when it wrote nothing",
            "content": {"text/plain": {"schema": {"type": "string"}}},
            "headers": {
                DROPPED_HEADER: {
                    "description": "how many bytes were written before the tail shown",
                    "schema": {"type": "integer"},
                }
            },
        },
        404: _NOT_FOUND,
    },
)
def read_attempt_output(job_id: str, n: str, request: Request) -> PlainTextResponse:
    jid = parse_job_id(job_id)
    number = _attempt_number(n)
    with engine_of(request).connect() as conn:
        if get_job(conn, jid) is None:
            raise Problem(404, "No such job", f"no job {jid}", type=NOT_FOUND)
        kept = attempt_output(conn, jid, number) if number is not None else None
    if kept is None:
        raise Problem(
            404,
            "No such attempt",
            f"job {jid} has no attempt {n[:40]!r}: attempts count from 1, in the order "
            "they started",
            type=NOT_FOUND,
        )
    return PlainTextResponse(
        kept.output,
        media_type="text/plain; charset=utf-8",
        headers={DROPPED_HEADER: str(kept.dropped_bytes), "Cache-Control": "no-store"},
    )
