"""Statements on ``metric_totals``, ``metric_minutes`` and ``metric_inbox``.

``add_aggregates`` is an upsert that adds: concurrent processes flushing the
same (metric, labels, bucket) rows each add their own share, atomically per
row. Only flushers run it, each in a transaction of its own that touches
nothing else, writing rows in key order: two flushes lock shared rows in the
same order and never deadlock. Observations made inside another transaction
(an operator's cancel, a skipped occurrence: ``append_metric_events``) are
plain INSERTs into ``metric_inbox``, which lock nothing another transaction
waits for; a flusher moves them into the aggregates (``drain_inbox``), and the
readers count what is still in the inbox, so nothing is missed in between.
The tables are small: one row per label set and bucket (and per minute for
the last two hours). The series of a job type or schedule that is gone from
the applied configuration are deleted once none of its jobs remains
(``forget_series_of_gone``).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, RowMapping, delete, func, select, union_all
from sqlalchemy.dialects import postgresql, sqlite

from rota.core.metric_deltas import (
    CANCEL_LATENCY,
    END_TO_END,
    STORED_METRICS,
    Deltas,
    Key,
    decode_labels,
    delta,
)
from rota.core.queries.jobs_read import database_now
from rota.core.queries.sqlparams import in_schema
from rota.core.sqltime import db_now
from rota.core.states import JobState
from rota.core.tables import jobs, metric_inbox, metric_minutes, metric_totals

INBOX_BATCH = 10_000


def minute_of(instant: datetime) -> datetime:
    return instant.astimezone(UTC).replace(second=0, microsecond=0)


def _rows(deltas: Deltas) -> list[dict[str, Any]]:
    return [
        {"metric": metric, "labels": labels, "le": le, "n": round(n), "total": total}
        for (metric, labels, le), (n, total) in sorted(deltas.items())
    ]


def add_metric_deltas(conn: Connection, deltas: Deltas, *, now: datetime | None = None) -> None:
    """A flusher's own deltas: to the cumulative rows and to the current minute's rows."""
    minute = minute_of(now if now is not None else database_now(conn))
    add_aggregates(conn, deltas, {minute: deltas})


def add_aggregates(conn: Connection, totals: Deltas, minutes: Mapping[datetime, Deltas]) -> None:
    """Add ``totals`` to ``metric_totals`` and each minute's deltas to ``metric_minutes``.

    For flushers only, in a transaction of their own (see the module's docstring).
    """
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    if totals:
        _upsert_totals(conn, insert, _rows(totals))
    rows = [
        {**row, "minute": minute}
        for minute, deltas in sorted(minutes.items())
        for row in _rows(deltas)
    ]
    if rows:
        _upsert_minutes(conn, insert, rows)


# Each upsert is one statement executed with a list of rows: SQLAlchemy compiles
# it once (a multi-row ``.values([...])`` is compiled anew on every call, which
# cost 0.3 s of CPU per 1,000 rows) and sends the rows in pages within each
# database's limit of bound values.


def _upsert_totals(conn: Connection, insert: Any, totals: list[dict[str, Any]]) -> None:
    t = insert(metric_totals).values(updated_at=db_now())
    conn.execute(
        t.on_conflict_do_update(
            index_elements=[metric_totals.c.metric, metric_totals.c.labels, metric_totals.c.le],
            set_={
                "n": metric_totals.c.n + t.excluded.n,
                "total": metric_totals.c.total + t.excluded.total,
                "updated_at": db_now(),
            },
        ),
        totals,
    )


def _upsert_minutes(conn: Connection, insert: Any, rows: list[dict[str, Any]]) -> None:
    m = insert(metric_minutes)
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
        ),
        rows,
    )


def append_metric_events(conn: Connection, deltas: Deltas, *, now: datetime | None = None) -> None:
    """Observations made inside the caller's transaction: appended, locking no shared row."""
    if not deltas:
        return
    minute = minute_of(now if now is not None else database_now(conn))
    conn.execute(metric_inbox.insert(), [{**row, "minute": minute} for row in _rows(deltas)])


@dataclass(frozen=True)
class InboxEvent:
    minute: datetime
    key: Key
    n: float
    total: float


def drain_inbox(conn: Connection, limit: int = INBOX_BATCH) -> list[InboxEvent]:
    """Take up to ``limit`` appended observations out of the inbox (a flusher folds them in).

    Concurrent flushers take different rows (``SKIP LOCKED`` on PostgreSQL; the
    write lock on SQLite); a rolled-back flush leaves its rows in the inbox.
    """
    oldest = (
        select(metric_inbox.c.inbox_id)
        .order_by(metric_inbox.c.inbox_id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    rows = conn.execute(
        delete(metric_inbox)
        .where(metric_inbox.c.inbox_id.in_(oldest.scalar_subquery()))
        .returning(
            metric_inbox.c.minute,
            metric_inbox.c.metric,
            metric_inbox.c.labels,
            metric_inbox.c.le,
            metric_inbox.c.n,
            metric_inbox.c.total,
        )
    ).all()
    return [
        InboxEvent(r.minute, (r.metric, r.labels, r.le), float(r.n), float(r.total)) for r in rows
    ]


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
    """The cumulative rows, with what still waits in the inbox added in."""
    both = union_all(
        select(
            metric_totals.c.metric,
            metric_totals.c.labels,
            metric_totals.c.le,
            metric_totals.c.n,
            metric_totals.c.total,
        ),
        select(
            metric_inbox.c.metric,
            metric_inbox.c.labels,
            metric_inbox.c.le,
            metric_inbox.c.n,
            metric_inbox.c.total,
        ),
    ).subquery()
    return (
        conn.execute(
            select(
                both.c.metric,
                both.c.labels,
                both.c.le,
                func.sum(both.c.n).label("n"),
                func.sum(both.c.total).label("total"),
            ).group_by(both.c.metric, both.c.labels, both.c.le)
        )
        .mappings()
        .all()
    )


def read_minutes(
    conn: Connection,
    since: datetime,
    metrics: Sequence[str] | None = None,
    *,
    schema: str | None = None,
) -> Sequence[RowMapping]:
    """Per-minute rows from ``since`` on, the inbox's included (a minute may repeat)."""
    parts = []
    for table in (metric_minutes, metric_inbox):
        stmt = select(
            table.c.minute, table.c.metric, table.c.labels, table.c.le, table.c.n, table.c.total
        ).where(table.c.minute >= since)
        if metrics is not None:
            stmt = stmt.where(table.c.metric.in_(list(metrics)))
        parts.append(stmt)
    return conn.execute(union_all(*parts), execution_options=in_schema(schema)).mappings().all()


# The jobs column that holds each label a series may be forgotten by.
_JOBS_COLUMN = {"job_type": jobs.c.job_type, "schedule": jobs.c.schedule_name}


def forget_series_of_gone(conn: Connection, label: str, live: Collection[str]) -> list[str]:
    """Delete the series whose ``label`` value is not in ``live`` and no job of it remains.

    ``label`` is ``job_type`` or ``schedule``; every stored metric that has that
    label is looked at, in ``metric_totals`` and ``metric_minutes``. Returns the
    values forgotten, sorted. A value that comes back later (a job of it is made
    again) starts a new series from zero, as Prometheus expects of a counter reset.
    """
    column = _JOBS_COLUMN[label]
    positions = {m.name: m.labels.index(label) for m in STORED_METRICS if label in m.labels}
    candidates: set[str] = set()
    keys = conn.execute(select(metric_totals.c.metric, metric_totals.c.labels).distinct()).all()
    by_value: dict[str, list[tuple[str, str]]] = {}
    for metric, labels in keys:
        at = positions.get(metric)
        if at is None:
            continue
        value = decode_labels(labels)[at]
        if value not in live:
            candidates.add(value)
            by_value.setdefault(value, []).append((metric, labels))
    if not candidates:
        return []
    in_use = set(
        conn.execute(select(column).where(column.in_(sorted(candidates))).distinct()).scalars()
    )
    gone = sorted(candidates - in_use)
    for value in gone:
        for table in (metric_totals, metric_minutes):
            for metric, labels in by_value[value]:
                conn.execute(
                    delete(table).where(table.c.metric == metric, table.c.labels == labels)
                )
    return gone


def prune_minutes(conn: Connection, before: datetime) -> int:
    """Drop per-minute rows older than ``before``; the totals are kept forever."""
    result = conn.execute(delete(metric_minutes).where(metric_minutes.c.minute < before))
    return int(result.rowcount or 0)
