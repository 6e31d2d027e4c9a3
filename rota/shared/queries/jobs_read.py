"""Read-only statements on ``jobs`` and ``job_attempts``: status commands, the overlap check."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, RowMapping, Select, select, text, union_all

from rota.shared.models import job_attempts, jobs
from rota.shared.sqltime import db_now
from rota.shared.states import TERMINAL, TERMINAL_SQL, UNFINISHED, UNFINISHED_SQL


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
    """The newest ``limit`` jobs (None: all), newest first.

    Read as one part per finished state, each the newest ``limit`` of its state
    through ``ix_jobs_history`` (state, created_at; finished rows only), plus
    the unfinished jobs, merged: the cost follows ``limit`` and the number of
    unfinished jobs, not the size of the history.
    """
    order = (jobs.c.created_at.desc(), jobs.c.job_id)
    wanted = [state] if state is not None else [*TERMINAL, None]
    parts: list[Select[tuple[object, ...]]] = []
    for s in wanted:
        part = select(jobs)
        if s is None:
            part = part.where(text(f"jobs.state IN {UNFINISHED_SQL}"))
        elif s in TERMINAL:  # the partial index's own predicate, written out for SQLite
            part = part.where(text(f"jobs.state IN {TERMINAL_SQL}"), jobs.c.state == s)
        else:
            part = part.where(jobs.c.state == s)
        if schedule is not None:
            part = part.where(jobs.c.schedule_name == schedule)
        parts.append(part.order_by(*order).limit(limit))
    if len(parts) == 1:
        return conn.execute(parts[0]).mappings().all()
    merged = union_all(*(p.subquery().select() for p in parts)).subquery()
    stmt = select(merged).order_by(merged.c.created_at.desc(), merged.c.job_id).limit(limit)
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
