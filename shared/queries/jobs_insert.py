"""Creating job rows: one statement, deduplicated by ``(job_type, dedup_key)``.

Used by the producer API (``shared.enqueue``), ``rota enqueue``, and the
scheduler, which inserts occurrences keyed ``"<schedule>@<UTC instant>"``. A row
whose key already exists is skipped by the unique index (``ON CONFLICT DO
NOTHING``), never by a check-then-insert: concurrent producers and scheduler
replicas cannot both create it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, literal, select
from sqlalchemy.dialects import postgresql, sqlite

from shared.config.model import JobTypeSpec
from shared.models import jobs
from shared.sqltime import UTCDateTime, db_now


@dataclass(frozen=True)
class NewJob:
    """A job to create. ``run_after=None`` means now, by the database clock."""

    job_type: str
    pool: str
    max_attempts: int
    lease_seconds: float
    idempotent: bool = True
    priority: int = 0
    payload_ref: str | None = None
    args: Mapping[str, Any] | None = None
    dedup_key: str | None = None
    run_after: datetime | None = None
    tenant: str | None = None
    concurrency_key: str | None = None
    schedule_name: str | None = None
    scheduled_for: datetime | None = None
    covers_from: datetime | None = None
    covers_count: int | None = None
    job_id: uuid.UUID = field(default_factory=uuid.uuid4)

    @classmethod
    def of_type(cls, spec: JobTypeSpec, **kwargs: Any) -> NewJob:
        """A job with the limits its job type declares (pool, attempts, lease, priority)."""
        kwargs.setdefault("priority", spec.priority)
        return cls(
            job_type=spec.name,
            pool=spec.pool,
            max_attempts=spec.max_attempts,
            lease_seconds=spec.lease.total_seconds(),
            idempotent=spec.idempotent,
            **kwargs,
        )


def _row(job: NewJob) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "job_type": job.job_type,
        "pool": job.pool,
        "state": "QUEUED",
        "priority": job.priority,
        "tenant": job.tenant,
        "concurrency_key": job.concurrency_key,
        "attempt_count": 0,
        "max_attempts": job.max_attempts,
        "lease_seconds": job.lease_seconds,
        "idempotent": job.idempotent,
        "payload_ref": job.payload_ref,
        "args": dict(job.args) if job.args is not None else None,
        "dedup_key": job.dedup_key,
        "schedule_name": job.schedule_name,
        "scheduled_for": job.scheduled_for,
        "covers_from": job.covers_from,
        "covers_count": job.covers_count,
        "run_after": (db_now() if job.run_after is None else literal(job.run_after, UTCDateTime())),
        "created_at": db_now(),
        "updated_at": db_now(),
    }


def insert_jobs_or_skip(conn: Connection, new_jobs: Sequence[NewJob]) -> set[uuid.UUID]:
    """Insert the jobs whose dedup key is new; return the ids of those inserted."""
    if not new_jobs:
        return set()
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = (
        insert(jobs)
        .values([_row(j) for j in new_jobs])
        .on_conflict_do_nothing(
            index_elements=[jobs.c.job_type, jobs.c.dedup_key],
            index_where=jobs.c.dedup_key.is_not(None),
        )
        .returning(jobs.c.job_id)
    )
    return set(conn.execute(stmt).scalars())


def job_id_by_dedup_key(conn: Connection, job_type: str, dedup_key: str) -> uuid.UUID | None:
    return conn.execute(
        select(jobs.c.job_id).where(jobs.c.job_type == job_type, jobs.c.dedup_key == dedup_key)
    ).scalar_one_or_none()
