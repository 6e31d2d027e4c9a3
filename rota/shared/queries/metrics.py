"""Statements on ``metric_totals`` and ``metric_minutes``: adding deltas, reading them back.

``add_metric_deltas`` is an upsert that adds: concurrent processes flushing the
same (metric, labels, bucket) rows each add their own share, atomically per
row. Rows are written in key order, so two flushes that touch the same rows
lock them in the same order and never deadlock. Both tables are small: one
row per label set and bucket (and per minute for the last two hours).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, RowMapping, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from rota.shared.metrics import CANCEL_LATENCY, END_TO_END, Deltas, delta
from rota.shared.models import jobs, metric_minutes, metric_totals
from rota.shared.queries.jobs_read import database_now
from rota.shared.sqltime import db_now
from rota.shared.states import JobState


def minute_of(instant: datetime) -> datetime:
    return instant.astimezone(UTC).replace(second=0, microsecond=0)


def add_metric_deltas(conn: Connection, deltas: Deltas, *, now: datetime | None = None) -> None:
    """Add ``deltas`` to the cumulative rows and to the current minute's rows."""
    if not deltas:
        return
    minute = minute_of(now if now is not None else database_now(conn))
    totals = [
        {"metric": metric, "labels": labels, "le": le, "n": round(n), "total": total}
        for (metric, labels, le), (n, total) in sorted(deltas.items())
    ]
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    t = insert(metric_totals).values([{**row, "updated_at": db_now()} for row in totals])
    conn.execute(
        t.on_conflict_do_update(
            index_elements=[metric_totals.c.metric, metric_totals.c.labels, metric_totals.c.le],
            set_={
                "n": metric_totals.c.n + t.excluded.n,
                "total": metric_totals.c.total + t.excluded.total,
                "updated_at": db_now(),
            },
        )
    )
    m = insert(metric_minutes).values([{**row, "minute": minute} for row in totals])
    conn.execute(
        m.on_conflict_do_update(
            index_elements=[
                metric_minutes.c.minute,
                metric_minutes.c.metric,
                metric_minutes.c.labels,
                metric_minutes.c.le,
            ],
            set_={
                "n": metric_minutes.c.n + m.excluded.n,
                "total": metric_minutes.c.total + m.excluded.total,
            },
        )
    )


def cancel_deltas(conn: Connection, job_ids: Sequence[uuid.UUID], deltas: Deltas) -> None:
    """Add the cancel latency and end-to-end time of these CANCELLED jobs (read by id)."""
    if not job_ids:
        return
    rows = conn.execute(
        select(
            jobs.c.job_type, jobs.c.created_at, jobs.c.cancel_requested_at, jobs.c.finished_at
        ).where(jobs.c.job_id.in_(sorted(set(job_ids))), jobs.c.state == JobState.CANCELLED)
    ).all()
    for job_type, created_at, requested_at, finished_at in rows:
        if finished_at is None:
            continue
        if requested_at is not None:
            delta(CANCEL_LATENCY, (job_type,), _seconds(finished_at - requested_at), deltas)
        lived = _seconds(finished_at - created_at)
        delta(END_TO_END, (job_type, JobState.CANCELLED.value), lived, deltas)


def _seconds(d: timedelta) -> float:
    return max(0.0, d.total_seconds())


def read_totals(conn: Connection) -> Sequence[RowMapping]:
    return conn.execute(
        select(
            metric_totals.c.metric,
            metric_totals.c.labels,
            metric_totals.c.le,
            metric_totals.c.n,
            metric_totals.c.total,
        )
    ).mappings().all()


def read_minutes(
    conn: Connection, since: datetime, metrics: Sequence[str] | None = None
) -> Sequence[RowMapping]:
    """Per-minute rows from ``since`` on (the primary key starts with the minute)."""
    stmt = select(
        metric_minutes.c.minute,
        metric_minutes.c.metric,
        metric_minutes.c.labels,
        metric_minutes.c.le,
        metric_minutes.c.n,
        metric_minutes.c.total,
    ).where(metric_minutes.c.minute >= since)
    if metrics is not None:
        stmt = stmt.where(metric_minutes.c.metric.in_(list(metrics)))
    return conn.execute(stmt).mappings().all()


def prune_minutes(conn: Connection, before: datetime) -> int:
    """Drop per-minute rows older than ``before``; the totals are kept forever."""
    result = conn.execute(delete(metric_minutes).where(metric_minutes.c.minute < before))
    return int(result.rowcount or 0)
