"""Read-only statements on ``jobs`` and ``job_attempts``: status commands, the overlap check."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, RowMapping, select

from rota.shared.models import job_attempts, jobs
from rota.shared.sqltime import db_now
from rota.shared.states import UNFINISHED


def database_now(conn: Connection) -> datetime:
    value = conn.execute(select(db_now())).scalar_one()
    assert isinstance(value, datetime)
    return value


def list_jobs(
    conn: Connection,
    *,
    state: str | None = None,
    schedule: str | None = None,
    limit: int | None = 100,
) -> Sequence[RowMapping]:
    stmt = select(jobs).order_by(jobs.c.created_at.desc(), jobs.c.job_id).limit(limit)
    if state is not None:
        stmt = stmt.where(jobs.c.state == state)
    if schedule is not None:
        stmt = stmt.where(jobs.c.schedule_name == schedule)
    return conn.execute(stmt).mappings().all()


def get_job(conn: Connection, job_id: uuid.UUID) -> RowMapping | None:
    return conn.execute(select(jobs).where(jobs.c.job_id == job_id)).mappings().first()


def get_attempts(conn: Connection, job_id: uuid.UUID) -> Sequence[RowMapping]:
    return (
        conn.execute(
            select(job_attempts)
            .where(job_attempts.c.job_id == job_id)
            .order_by(job_attempts.c.lease_generation)
        )
        .mappings()
        .all()
    )


def unfinished_jobs_of_schedules(
    conn: Connection, names: Sequence[str]
) -> dict[str, list[uuid.UUID]]:
    """The job ids of each schedule's runs that are not in a terminal state."""
    if not names:
        return {}
    rows = conn.execute(
        select(jobs.c.schedule_name, jobs.c.job_id).where(
            jobs.c.schedule_name.in_(names), jobs.c.state.in_(UNFINISHED)
        )
    ).all()
    out: dict[str, list[uuid.UUID]] = {}
    for name, job_id in rows:
        out.setdefault(name, []).append(job_id)
    return out
