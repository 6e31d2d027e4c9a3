"""The producer API: create a job inside the caller's own transaction.

::

    with engine.begin() as conn:
        conn.execute(orders.insert().values(...))
        enqueue(conn, "invoice.generate", args={"order": 42}, dedup_key="order-42")

The job commits or rolls back with the caller's business change. With a
``dedup_key`` a second call returns the existing job instead of a second one.
A SQLAlchemy ``Session`` works too: pass ``session.connection()``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from shared.queries.job_types import get_job_type
from shared.queries.jobs_insert import NewJob, insert_jobs_or_skip, job_id_by_dedup_key


class UnknownJobType(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"unknown job type {name!r}: declare it under job_types in the schedule file "
            "and run `rota apply FILE`"
        )
        self.name = name


@dataclass(frozen=True)
class Enqueued:
    job_id: uuid.UUID
    created: bool  # False: a job with the same dedup key already existed


def enqueue(
    conn: Connection | Session,
    job_type: str,
    *,
    payload_ref: str | None = None,
    args: Mapping[str, Any] | None = None,
    dedup_key: str | None = None,
    run_after: datetime | None = None,
    priority: int | None = None,
    tenant: str | None = None,
    concurrency_key: str | None = None,
    max_attempts: int | None = None,
) -> Enqueued:
    """Create one ad-hoc job of a stored job type; does not commit."""
    connection = conn.connection() if isinstance(conn, Session) else conn
    spec = get_job_type(connection, job_type)
    if spec is None:
        raise UnknownJobType(job_type)
    extra: dict[str, Any] = {}
    if priority is not None:
        extra["priority"] = priority
    job = NewJob.of_type(
        spec,
        payload_ref=payload_ref,
        args=args,
        dedup_key=dedup_key,
        run_after=run_after,
        tenant=tenant,
        concurrency_key=concurrency_key,
        **extra,
    )
    for what, value, most in (
        ("dedup_key", dedup_key, 400),
        ("tenant", tenant, 200),
        ("concurrency_key", concurrency_key, 200),
    ):
        if value is not None and len(value) > most:
            raise ValueError(f"{what} is at most {most} characters, got {len(value)}")
    if max_attempts is not None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        job = NewJob(**{**job.__dict__, "max_attempts": max_attempts})
    if job.job_id in insert_jobs_or_skip(connection, [job]):
        return Enqueued(job.job_id, created=True)
    assert dedup_key is not None, "an insert without a dedup key cannot conflict"
    existing = job_id_by_dedup_key(connection, job_type, dedup_key)
    assert existing is not None
    return Enqueued(existing, created=False)
