"""Operator requests on jobs: cancel them, replay them; one job or a batch, one statement.

``cancel_jobs``: a QUEUED or RETRY_WAIT job is CANCELLED at once (nobody
runs it); a RUNNING job goes to CANCEL_REQUESTED and keeps its lease, because
its worker has to stop first: the job reaches CANCELLED only through the
worker's fenced acknowledgement or the sweeper after the lease expires.

``replay_jobs``: a FAILED job goes back to QUEUED, due now, with a fresh
attempt budget (``attempt_count`` 0) and ``needs_reconcile`` cleared. Its
``job_attempts`` history stays, and ``lease_generation`` keeps counting up, so
no write from an attempt before the replay can ever match again.

Each is ONE guarded UPDATE over a list of ids, whether the list holds one job
(``rota cancel ID``) or a batch of a bulk operation: the state guard is in the
WHERE clause, so a job that moved on since it was chosen is left alone, and
only the rows the statement changed (RETURNING) are reported and recorded in
``operator_actions`` when a note is given. Jobs cancelled at once (they were
waiting) append their cancel latency and end-to-end time to the metrics inbox
in the same transaction (``rota.core.metric_deltas``), and a scheduled one's end
to ``schedule_outcomes``; a running job's are counted when its worker or the
sweeper ends it.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, case, select, update

from rota.core.metric_deltas import CANCEL_LATENCY, END_TO_END, Deltas, delta
from rota.core.operator_notes import ActionNote, OperatorAction
from rota.core.queries.jobs_notify import notify_claimable
from rota.core.queries.metric_tables import append_metric_events
from rota.core.queries.operator_actions import record_job_actions
from rota.core.queries.schedule_outcomes import record_outcomes_of
from rota.core.sqltime import now_or_db
from rota.core.states import CLAIMABLE, JobState
from rota.core.tables import jobs

# A cancel request applies to a job that waits (cancelled at once) or runs (asked to stop).
CANCELLABLE: tuple[str, ...] = (*CLAIMABLE, JobState.RUNNING.value)
REPLAYABLE: tuple[str, ...] = (JobState.FAILED.value,)


@dataclass(frozen=True)
class ControlResult:
    """``changed``: the request took effect; ``state``: the job's state now (None: no job)."""

    changed: bool
    state: JobState | None


def cancel_jobs(
    conn: Connection,
    job_ids: Sequence[uuid.UUID],
    *,
    states: Collection[str] = CANCELLABLE,
    note: ActionNote | None = None,
    now: datetime | None = None,
) -> dict[uuid.UUID, JobState]:
    """Cancel those of ``job_ids`` that are in ``states`` (within CANCELLABLE) right now.

    Returns {job id: its new state} for the jobs changed: CANCELLED, or
    CANCEL_REQUESTED for a running one.
    """
    guard = [s for s in CANCELLABLE if s in states]
    if not job_ids or not guard:
        return {}
    clock = now_or_db(now)
    running = jobs.c.state == JobState.RUNNING.value
    stmt = (
        update(jobs)
        .where(jobs.c.job_id.in_(job_ids), jobs.c.state.in_(guard))
        .values(
            state=case((running, JobState.CANCEL_REQUESTED.value), else_=JobState.CANCELLED.value),
            cancel_requested_at=clock,
            finished_at=case((running, jobs.c.finished_at), else_=clock),
            updated_at=clock,
        )
        .returning(
            jobs.c.job_id,
            jobs.c.state,
            jobs.c.job_type,
            jobs.c.created_at,
            jobs.c.finished_at,
            jobs.c.cancel_requested_at,
        )
    )
    rows = conn.execute(stmt).all()
    changed = {r.job_id: JobState(r.state) for r in rows}
    at_once = [r for r in rows if r.state == JobState.CANCELLED.value]
    _record_cancelled_at_once(conn, at_once)
    record_outcomes_of(conn, [r.job_id for r in at_once])
    if note is not None:
        record_job_actions(conn, OperatorAction.CANCEL, sorted(changed), note, now)
    return changed


def _record_cancelled_at_once(conn: Connection, rows: Sequence[Row[Any]]) -> None:
    """Waiting jobs cancelled by their requester: their metrics, in the same transaction."""
    deltas: Deltas = {}
    newest: datetime | None = None
    for r in rows:
        if r.finished_at is None:
            continue
        delta(CANCEL_LATENCY, (r.job_type,), _seconds(r.finished_at, r.cancel_requested_at), deltas)
        lived = _seconds(r.finished_at, r.created_at)
        delta(END_TO_END, (r.job_type, JobState.CANCELLED.value), lived, deltas)
        newest = r.finished_at if newest is None else max(newest, r.finished_at)
    if deltas and newest is not None:
        append_metric_events(conn, deltas, now=newest)


def _seconds(end: datetime, start: datetime | None) -> float:
    return 0.0 if start is None else max(0.0, (end - start).total_seconds())


def replay_jobs(
    conn: Connection,
    job_ids: Sequence[uuid.UUID],
    *,
    note: ActionNote | None = None,
    now: datetime | None = None,
) -> dict[uuid.UUID, JobState]:
    """Requeue those of ``job_ids`` that are FAILED right now; {job id: QUEUED} for them."""
    if not job_ids:
        return {}
    clock = now_or_db(now)
    stmt = (
        update(jobs)
        .where(jobs.c.job_id.in_(job_ids), jobs.c.state.in_(REPLAYABLE))
        .values(
            state=JobState.QUEUED.value,
            attempt_count=0,
            run_after=clock,
            needs_reconcile=False,
            finished_at=None,
            updated_at=clock,
        )
        .returning(jobs.c.job_id, jobs.c.state)
    )
    changed = {job_id: JobState(state) for job_id, state in conn.execute(stmt)}
    if changed:
        notify_claimable(conn)
    if note is not None:
        record_job_actions(conn, OperatorAction.REPLAY, sorted(changed), note, now)
    return changed


def request_cancel(
    conn: Connection,
    job_id: uuid.UUID,
    *,
    now: datetime | None = None,
    note: ActionNote | None = None,
) -> ControlResult:
    """``cancel_jobs`` for one job; when nothing changed, the state it is in."""
    changed = cancel_jobs(conn, [job_id], note=note, now=now)
    return ControlResult(True, changed[job_id]) if changed else _current(conn, job_id)


def replay_failed(
    conn: Connection,
    job_id: uuid.UUID,
    *,
    now: datetime | None = None,
    note: ActionNote | None = None,
) -> ControlResult:
    """``replay_jobs`` for one job; when nothing changed, the state it is in."""
    changed = replay_jobs(conn, [job_id], note=note, now=now)
    return ControlResult(True, changed[job_id]) if changed else _current(conn, job_id)


def _current(conn: Connection, job_id: uuid.UUID) -> ControlResult:
    state = conn.execute(select(jobs.c.state).where(jobs.c.job_id == job_id)).scalar_one_or_none()
    return ControlResult(False, None if state is None else JobState(state))
