"""The producer API: create jobs inside the caller's own transaction.

::

    with engine.begin() as conn:
        conn.execute(orders.insert().values(...))
        rota.enqueue(conn, "invoice.generate", args={"order": 42}, dedup_key="order-42")

The jobs commit or roll back with the caller's business change. With a
``dedup_key`` a second call returns the existing job instead of a second one.
A SQLAlchemy ``Session`` works too (its current connection is used).
``enqueue_many`` creates any number of jobs, of one or several types, in one
INSERT statement, or for a big batch of jobs without dedup keys on
PostgreSQL, in pipelined INSERTs of ``PIPELINE_BATCH``: the producer API for
thousands at once.

Every value is checked (``rota.core.storable``): a bad one raises
``ValueError`` naming the field and the request's position, and nothing of
the batch is inserted (pipelined INSERTs already sent are deleted again
first).

A job type that sets ``max_queued``, ``max_queue_age`` or ``shed_below_priority``
refuses submissions past its limits with ``QueueFull`` (``rota.QueueFull``;
``retry_after`` says when to try again), and nothing of the batch is inserted
(``rota.producer.backpressure``).

``schema``: when rota lives in its own PostgreSQL schema (``rota --schema``)
and ``conn`` is the application's connection, name that schema here.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from rota.core.config import MAX_ATTEMPTS_MAX, PRIORITY_MAX, PRIORITY_MIN, JobTypeSpec
from rota.core.database import check_schema_name
from rota.core.ids import new_job_ids
from rota.core.queries.job_types import get_job_types
from rota.core.queries.jobs_insert import (
    NewJob,
    can_pipeline,
    insert_jobs_or_skip,
    insert_keyless_jobs_pipelined,
    job_ids_by_dedup_keys,
)
from rota.core.storable import (
    PAYLOAD_REF_MAX,
    args_json,
    check_int,
    check_text,
    command_args_problem,
)
from rota.producer.backpressure import QueueFull, Submission, check_backpressure

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

# Column widths of the jobs table (rota.core.tables).
DEDUP_KEY_MAX = 400
NAME_MAX = 200
# Jobs per INSERT when a call's jobs are pipelined (``insert_keyless_jobs_pipelined``).
PIPELINE_BATCH = 200
# The first of them: the database waits for it (``_checked_batches``).
FIRST_PIPELINE_BATCH = 50


__all__ = ["Enqueued", "JobRequest", "QueueFull", "UnknownJobType", "enqueue", "enqueue_many"]


class UnknownJobType(LookupError):
    """The job type was never stored by ``rota apply``."""

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


# Not frozen (treat it as immutable all the same: enqueue reads it once): a
# producer builds one per job, and a frozen dataclass of nine fields costs
# 1.6 us to build, this 0.4 us (at 50,000 jobs/s, a twentieth of the time).
@dataclass(slots=True)
class JobRequest:
    """One job to create with ``enqueue_many``; None takes the job type's value."""

    job_type: str
    args: Mapping[str, Any] | None = None
    payload_ref: str | None = None
    dedup_key: str | None = None
    run_after: datetime | None = None  # aware; None: now, by the database clock
    priority: int | None = None
    tenant: str | None = None
    concurrency_key: str | None = None
    max_attempts: int | None = None


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
    schema: str | None = None,
) -> Enqueued:
    """Create one job of a stored job type; does not commit."""
    request = JobRequest(
        job_type,
        args=args,
        payload_ref=payload_ref,
        dedup_key=dedup_key,
        run_after=run_after,
        priority=priority,
        tenant=tenant,
        concurrency_key=concurrency_key,
        max_attempts=max_attempts,
    )
    return enqueue_many(conn, [request], schema=schema)[0]


def enqueue_many(
    conn: Connection | Session, requests: Iterable[JobRequest], *, schema: str | None = None
) -> list[Enqueued]:
    """Create many jobs at once; one ``Enqueued`` per request, in order.

    Requests that share a ``(job_type, dedup_key)`` with an existing job, or
    with an earlier request of the same call, return that job (``created``
    False). Does not commit.
    """
    connection = _connection_of(conn)
    if schema is not None:
        check_schema_name(schema)
    wanted = list(requests)
    if not wanted:
        return []
    for i, r in enumerate(wanted):
        if not isinstance(r, JobRequest):
            raise TypeError(f"request {i}: expected a rota.JobRequest, got {type(r).__name__}")
        check_text("job_type", r.job_type, NAME_MAX)
    specs = get_job_types(connection, {r.job_type for r in wanted}, schema=schema)
    n = len(wanted)
    if n > PIPELINE_BATCH and _pipelines(connection, wanted, specs):
        batches = _checked_batches(wanted, specs)
        sent = insert_keyless_jobs_pipelined(connection, batches, schema=schema)
        return [Enqueued(job_id, True) for job_id in sent]
    ids = new_job_ids(n)
    new_jobs = [_new_job(r, specs, i, n, ids[i]) for i, r in enumerate(wanted)]
    _refuse_past_limits(connection, specs, new_jobs, schema)
    inserted = insert_jobs_or_skip(connection, new_jobs, schema=schema)
    if len(inserted) == n:  # the common case: all new (the ids of one batch are distinct)
        return [Enqueued(job_id, True) for job_id in ids]
    keys = [
        (j.job_type, j.dedup_key)
        for j in new_jobs
        if j.job_id not in inserted and j.dedup_key is not None
    ]
    existing = job_ids_by_dedup_keys(connection, keys, schema=schema)
    results: list[Enqueued] = []
    for j in new_jobs:
        if j.job_id in inserted:
            results.append(Enqueued(j.job_id, created=True))
        else:
            assert j.dedup_key is not None, "an insert without a dedup key cannot conflict"
            results.append(Enqueued(existing[(j.job_type, j.dedup_key)], created=False))
    return results


def _pipelines(
    connection: Connection, wanted: list[JobRequest], specs: Mapping[str, JobTypeSpec]
) -> bool:
    """Whether the jobs can be sent in pipelined batches (``insert_keyless_jobs_pipelined``).

    Only jobs that cannot conflict (no dedup key: all are created), of known
    types without queue limits (no count to take first), in a transaction.
    """
    for r in wanted:
        if r.dedup_key is not None:
            return False
        spec = specs.get(r.job_type)
        if spec is None or spec.has_limits:
            return False
    return can_pipeline(connection)


def _checked_batches(
    wanted: list[JobRequest], specs: Mapping[str, JobTypeSpec]
) -> Iterator[list[NewJob]]:
    """The jobs in batches, each checked (and its ids made) as it is taken.

    The database starts inserting once the first batch is sent, so that one
    is small (``FIRST_PIPELINE_BATCH``), the others ``PIPELINE_BATCH``; the
    ids of a batch are made with it, while the database inserts the batch
    before.
    """
    n = len(wanted)
    start = 0
    while start < n:
        size = FIRST_PIPELINE_BATCH if start == 0 else PIPELINE_BATCH
        chunk = wanted[start : start + size]
        ids = new_job_ids(len(chunk))
        yield [
            _new_job(r, specs, i, n, job_id)
            for (i, r), job_id in zip(enumerate(chunk, start), ids, strict=True)
        ]
        start += len(chunk)


def _connection_of(conn: object) -> Connection:
    """The caller's connection, or its Session's current one.

    ``sqlalchemy.orm`` is not imported for this: a caller holding a Session has
    imported it already (and a process that only runs jobs never pays for it).
    """
    if isinstance(conn, Connection):
        return conn
    orm = sys.modules.get("sqlalchemy.orm")
    if orm is not None and isinstance(conn, orm.Session):
        connection: Connection = conn.connection()
        return connection
    raise TypeError(f"enqueue needs a SQLAlchemy Connection or Session, got {type(conn).__name__}")


def _refuse_past_limits(
    conn: Connection, specs: Mapping[str, JobTypeSpec], new_jobs: list[NewJob], schema: str | None
) -> None:
    """Backpressure (``rota.producer.backpressure``), for the job types that set a limit."""
    limited = [j for j in new_jobs if specs[j.job_type].has_limits]
    if not limited:
        return
    keys = [(j.job_type, j.dedup_key) for j in limited if j.dedup_key is not None]
    existing = job_ids_by_dedup_keys(conn, keys, schema=schema) if keys else {}
    by_type: dict[str, list[NewJob]] = {}
    seen: set[tuple[str, str]] = set()
    for j in limited:
        if j.dedup_key is not None:
            key = (j.job_type, j.dedup_key)
            if key in existing or key in seen:
                continue  # creates nothing: never refused
            seen.add(key)
        by_type.setdefault(j.job_type, []).append(j)
    for name, wanted in sorted(by_type.items()):
        sub = Submission(len(wanted), max(j.priority for j in wanted))
        check_backpressure(conn, specs[name], sub, schema=schema)


def _new_job(r: JobRequest, specs: Mapping[str, Any], i: int, n: int, job_id: uuid.UUID) -> NewJob:
    spec = specs.get(r.job_type)
    if spec is None:
        raise UnknownJobType(r.job_type)
    try:
        if r.run_after is not None and (
            not isinstance(r.run_after, datetime) or r.run_after.tzinfo is None
        ):
            raise ValueError("run_after must be an aware datetime (with a time zone)")
        priority = check_int("priority", r.priority, PRIORITY_MIN, PRIORITY_MAX)
        attempts = check_int("max_attempts", r.max_attempts, 1, MAX_ATTEMPTS_MAX)
        encoded = args_json(r.args)
        if encoded is not None and spec.command is not None:
            problem = command_args_problem(json.loads(encoded))
            if problem is not None:
                raise ValueError(problem)
        # Built directly, not through NewJob.of_type: this runs once per job of a batch.
        return NewJob(
            job_type=spec.name,
            pool=spec.pool,
            max_attempts=spec.max_attempts if attempts is None else attempts,
            lease_seconds=spec.lease.total_seconds(),
            idempotent=spec.idempotent,
            priority=spec.priority if priority is None else priority,
            payload_ref=check_text("payload_ref", r.payload_ref, PAYLOAD_REF_MAX),
            args_json=encoded,
            dedup_key=check_text("dedup_key", r.dedup_key, DEDUP_KEY_MAX),
            run_after=r.run_after,
            tenant=check_text("tenant", r.tenant, NAME_MAX),
            concurrency_key=check_text("concurrency_key", r.concurrency_key, NAME_MAX),
            job_id=job_id,
        )
    except ValueError as exc:
        where = f"request {i}: " if n > 1 else ""
        raise ValueError(f"{where}{exc}") from None
