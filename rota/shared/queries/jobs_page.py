"""The dashboard's list of failed jobs, from their own partial index (``ix_jobs_failed``).

Listing jobs newest first, page by page, is ``jobs_read.newest_jobs``.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, RowMapping, select

from rota.shared.models import jobs


def recent_failed(conn: Connection, limit: int) -> Sequence[RowMapping]:
    """The most recently failed jobs (the dashboard's list), newest first."""
    stmt = (
        select(jobs)
        .where(jobs.c.state == "FAILED")
        .order_by(jobs.c.updated_at.desc(), jobs.c.job_id)
        .limit(limit)
    )
    return conn.execute(stmt).mappings().all()
