"""Operator requests on one job: cancel it, replay it.

``request_cancel``: a QUEUED or RETRY_WAIT job is CANCELLED at once (nobody
runs it); a RUNNING job goes to CANCEL_REQUESTED and keeps its lease, because
its worker has to stop first: the job reaches CANCELLED only through the
worker's fenced acknowledgement or the sweeper after the lease expires.

``replay_failed``: a FAILED job goes back to QUEUED, due now, with a fresh
attempt budget (``attempt_count`` 0) and ``needs_reconcile`` cleared. Its
``job_attempts`` history stays, and ``lease_generation`` keeps counting up, so
no write from an attempt before the replay can ever match again.

A waiting job cancelled at once appends its cancel latency and end-to-end
time to the metrics inbox in the same transaction (``rota.shared.metrics``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, bindparam, text

from rota.shared.metrics import CANCEL_LATENCY, END_TO_END, Deltas, delta
from rota.shared.queries.jobs_notify import notify_claimable
from rota.shared.queries.metrics import append_metric_events
from rota.shared.queries.sqlparams import PG_NOW, SQLITE_NOW, bind_id, bind_now, is_pg
from rota.shared.sqltime import read_utc
from rota.shared.states import CLAIMABLE, JobState, sql_in

# A cancel request applies to a job that waits (cancelled at once) or runs (asked to stop).
_CANCELLABLE = sql_in((*CLAIMABLE, JobState.RUNNING))


def _cancel_sql(now: str) -> str:
    return f"""
        UPDATE jobs
        SET state = CASE WHEN state = 'RUNNING' THEN 'CANCEL_REQUESTED' ELSE 'CANCELLED' END,
            cancel_requested_at = {now},
            finished_at = CASE WHEN state = 'RUNNING' THEN finished_at ELSE {now} END,
            updated_at = {now}
        WHERE job_id = :job_id AND state IN {_CANCELLABLE}
        RETURNING state, job_type, created_at, finished_at, cancel_requested_at
    """


def _replay_sql(now: str) -> str:
    return f"""
        UPDATE jobs
        SET state = 'QUEUED',
            attempt_count = 0,
            run_after = {now},
            needs_reconcile = FALSE,
            finished_at = NULL,
            updated_at = {now}
        WHERE job_id = :job_id AND state = 'FAILED'
        RETURNING state
    """


_PG_CANCEL = text(_cancel_sql(PG_NOW))
_SQLITE_CANCEL = text(_cancel_sql(SQLITE_NOW))
_PG_REPLAY = text(_replay_sql(PG_NOW))
_SQLITE_REPLAY = text(_replay_sql(SQLITE_NOW))
_STATE = text("SELECT state FROM jobs WHERE job_id = :job_id").bindparams(bindparam("job_id"))


@dataclass(frozen=True)
class ControlResult:
    """``changed``: the request took effect; ``state``: the job's state now (None: no job)."""

    changed: bool
    state: JobState | None


def _current(conn: Connection, job_id: uuid.UUID) -> ControlResult:
    state = conn.execute(_STATE, {"job_id": bind_id(conn, job_id)}).scalar_one_or_none()
    return ControlResult(False, None if state is None else JobState(state))


def request_cancel(
    conn: Connection, job_id: uuid.UUID, *, now: datetime | None = None
) -> ControlResult:
    stmt = _PG_CANCEL if is_pg(conn) else _SQLITE_CANCEL
    row = conn.execute(
        stmt, {"job_id": bind_id(conn, job_id), "now": bind_now(conn, now)}
    ).first()
    if row is None:
        return _current(conn, job_id)
    state = JobState(row[0])
    if state is JobState.CANCELLED:
        _cancelled_at_once(conn, row[1], read_utc(row[2]), read_utc(row[3]), read_utc(row[4]))
    return ControlResult(True, state)


def _cancelled_at_once(
    conn: Connection,
    job_type: str,
    created_at: datetime | None,
    finished_at: datetime | None,
    requested_at: datetime | None,
) -> None:
    """A waiting job cancelled by its requester: its metrics, in the same transaction."""
    if finished_at is None:
        return
    deltas: Deltas = {}
    delta(CANCEL_LATENCY, (job_type,), _seconds(finished_at, requested_at), deltas)
    lived = _seconds(finished_at, created_at)
    delta(END_TO_END, (job_type, JobState.CANCELLED.value), lived, deltas)
    append_metric_events(conn, deltas, now=finished_at)


def _seconds(end: datetime, start: datetime | None) -> float:
    return 0.0 if start is None else max(0.0, (end - start).total_seconds())


def replay_failed(
    conn: Connection, job_id: uuid.UUID, *, now: datetime | None = None
) -> ControlResult:
    stmt = _PG_REPLAY if is_pg(conn) else _SQLITE_REPLAY
    state = conn.execute(
        stmt, {"job_id": bind_id(conn, job_id), "now": bind_now(conn, now)}
    ).scalar_one_or_none()
    if state is None:
        return _current(conn, job_id)
    notify_claimable(conn)
    return ControlResult(True, JobState(state))
