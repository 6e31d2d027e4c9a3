"""Listing jobs page by page for the HTTP API: filters and keyset pagination.

Newest first, ordered by ``(created_at, job_id)`` descending; the next page
starts strictly after the last row of this one (a keyset, not an OFFSET: a
page costs the same wherever it is, and rows inserted meanwhile never shift
it). Failed jobs are listed from their own partial index (``ix_jobs_failed``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, RowMapping, and_, or_, select

from rota.shared.models import jobs


@dataclass(frozen=True)
class JobFilter:
    states: tuple[str, ...] = ()
    job_type: str | None = None
    schedule: str | None = None
    since: datetime | None = None  # created at or after


@dataclass(frozen=True)
class Keyset:
    """The last row of the previous page."""

    created_at: datetime
    job_id: uuid.UUID


def page_jobs(
    conn: Connection, f: JobFilter, *, limit: int, after: Keyset | None = None
) -> Sequence[RowMapping]:
    stmt = select(jobs).order_by(jobs.c.created_at.desc(), jobs.c.job_id.desc()).limit(limit)
    if f.states:
        stmt = stmt.where(jobs.c.state.in_(f.states))
    if f.job_type is not None:
        stmt = stmt.where(jobs.c.job_type == f.job_type)
    if f.schedule is not None:
        stmt = stmt.where(jobs.c.schedule_name == f.schedule)
    if f.since is not None:
        stmt = stmt.where(jobs.c.created_at >= f.since)
    if after is not None:
        stmt = stmt.where(
            or_(
                jobs.c.created_at < after.created_at,
                and_(jobs.c.created_at == after.created_at, jobs.c.job_id < after.job_id),
            )
        )
    return conn.execute(stmt).mappings().all()


def recent_failed(conn: Connection, limit: int) -> Sequence[RowMapping]:
    """The most recently failed jobs (the dashboard's list), newest first."""
    stmt = (
        select(jobs)
        .where(jobs.c.state == "FAILED")
        .order_by(jobs.c.updated_at.desc(), jobs.c.job_id)
        .limit(limit)
    )
    return conn.execute(stmt).mappings().all()
