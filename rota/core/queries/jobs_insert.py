"""Creating job rows: one statement, deduplicated by ``(job_type, dedup_key)``.

Used by the producer API (``producer.enqueue``), ``rota enqueue``, and the
scheduler, which inserts occurrences keyed ``"<schedule>@<UTC instant>"``. A row
whose key already exists is skipped by the unique index (``ON CONFLICT DO
NOTHING``), never by a check-then-insert: concurrent producers and scheduler
replicas cannot both create it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, bindparam, func, select, tuple_
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import DBAPIError, StatementError

from rota.core.config import JobTypeSpec
from rota.core.ids import new_job_id
from rota.core.queries.sqlparams import in_schema, qualified
from rota.core.sqltime import UTCDateTime, db_now
from rota.core.storable import plain_mapping
from rota.core.tables import jobs


# Not frozen (treat it as immutable all the same): producers build one per job,
# and a frozen dataclass's __init__ costs three times as much.
@dataclass(slots=True)
class NewJob:
    """A job to create. ``run_after=None`` means now, by the database clock.

    ``args_json``: ``args`` already checked and encoded (``core.storable.args_json``),
    given by producers instead of ``args`` so the text is not encoded twice.
    """

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
    job_id: uuid.UUID = field(default_factory=new_job_id)
    args_json: str | None = None

    @classmethod
    def of_type(cls, spec: JobTypeSpec, **kwargs: Any) -> NewJob:
        """A job with the limits its job type declares; ``kwargs`` may override any of them."""
        defaults: dict[str, Any] = {
            "job_type": spec.name,
            "pool": spec.pool,
            "max_attempts": spec.max_attempts,
            "lease_seconds": spec.lease.total_seconds(),
            "idempotent": spec.idempotent,
            "priority": spec.priority,
        }
        return cls(**{**defaults, **kwargs})


# The columns a new job takes from ``NewJob``, with their PostgreSQL array types.
_COLUMNS = (
    ("job_id", "uuid[]"),
    ("job_type", "text[]"),
    ("pool", "text[]"),
    ("priority", "integer[]"),
    ("tenant", "text[]"),
    ("concurrency_key", "text[]"),
    ("max_attempts", "integer[]"),
    ("lease_seconds", "double precision[]"),
    ("idempotent", "boolean[]"),
    ("payload_ref", "text[]"),
    ("args", "json[]"),
    ("dedup_key", "text[]"),
    ("schedule_name", "text[]"),
    ("scheduled_for", "timestamptz[]"),
    ("covers_from", "timestamptz[]"),
    ("covers_count", "integer[]"),
    ("run_after", "timestamptz[]"),
)
_NAMES = tuple(c for c, _ in _COLUMNS)


@cache
def _pg_insert(
    schema: str | None, uniform: frozenset[str] = frozenset(), keyless: bool = False
) -> str:
    """Driver SQL: each column is one binary array (psycopg's ``%(name)b``, dumped in C).

    A column whose value is the same for every job of the batch (``uniform``:
    the pool, the limits of one job type, a NULL tenant, ...) goes as one value
    instead of an array of a thousand copies: most of a typical batch is such
    columns, and the database unnests only what differs. ``job_id`` is always an
    array (it gives the row count). One statement per set of uniform columns,
    each prepared once.

    ``keyless``: no job of the batch has a dedup key, so none can conflict:
    a plain INSERT (no arbiter index to probe per row) whose ids need not come
    back.
    """
    arrays = [(c, t) for c, t in _COLUMNS if c not in uniform]
    selected = [
        f"CAST(%({c})b AS {t.removesuffix('[]')})" if c in uniform else f"v.{c}"
        for c, t in _COLUMNS
    ]
    selected[-1] = f"coalesce({selected[-1]}, now())"  # run_after: None is now
    return f"""
    INSERT INTO {qualified("jobs", schema)} ({", ".join(_NAMES)}, state, attempt_count,
                                              created_at, updated_at)
    SELECT {", ".join(selected)}, 'QUEUED', 0, now(), now()
    FROM unnest({", ".join(f"CAST(%({c})b AS {t})" for c, t in arrays)})
      AS v({", ".join(c for c, _ in arrays)})
    {"" if keyless else _ON_CONFLICT}
    """


_ON_CONFLICT = """ON CONFLICT (job_type, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING job_id"""


_SQLITE_INSERT = (
    sqlite.insert(jobs)
    .values(
        state="QUEUED",
        attempt_count=0,
        run_after=func.coalesce(bindparam("v_run_after", type_=UTCDateTime()), db_now()),
        created_at=db_now(),
        updated_at=db_now(),
    )
    .on_conflict_do_nothing(
        index_elements=[jobs.c.job_type, jobs.c.dedup_key],
        index_where=jobs.c.dedup_key.is_not(None),
    )
    .returning(jobs.c.job_id)
)


def insert_jobs_or_skip(
    conn: Connection, new_jobs: Sequence[NewJob], *, schema: str | None = None
) -> set[uuid.UUID]:
    """Insert the jobs whose ``(job_type, dedup_key)`` is new; return the ids of those inserted.

    One statement, compiled once whatever the batch size, for every producer:
    ``enqueue``, ``rota trigger`` / ``backfill`` and the scheduler's tick. On
    PostgreSQL each column travels as one binary array (``unnest``); on SQLite
    SQLAlchemy's "insertmanyvalues" pages the rows into multi-row INSERTs.
    ``run_after=None`` is the database clock. ``schema`` names rota's schema
    when ``conn`` is an application's connection that does not search it.
    """
    if not new_jobs:
        return set()
    if conn.dialect.name == "postgresql":
        return _insert_pg(conn, new_jobs, schema)
    params = [
        {
            "job_id": j.job_id,
            "job_type": j.job_type,
            "pool": j.pool,
            "priority": j.priority,
            "tenant": j.tenant,
            "concurrency_key": j.concurrency_key,
            "max_attempts": j.max_attempts,
            "lease_seconds": j.lease_seconds,
            "idempotent": j.idempotent,
            "payload_ref": j.payload_ref,
            "args": _plain_args(j),
            "dedup_key": j.dedup_key,
            "schedule_name": j.schedule_name,
            "scheduled_for": j.scheduled_for,
            "covers_from": j.covers_from,
            "covers_count": j.covers_count,
            "v_run_after": j.run_after,
        }
        for j in new_jobs
    ]
    return set(conn.execute(_SQLITE_INSERT, params, execution_options=in_schema(schema)).scalars())


def can_pipeline(conn: Connection) -> bool:
    """Whether ``insert_keyless_jobs_pipelined`` may be used on ``conn``.

    PostgreSQL through psycopg with a libpq that has pipeline mode (14 and
    later), inside a transaction: the inserts of a failed call can then be
    taken back before anyone sees them. An autocommit connection would commit
    each batch as it went.
    """
    if conn.dialect.name != "postgresql":
        return False
    import psycopg  # the PostgreSQL driver: loaded already when conn is PostgreSQL

    driver = conn.connection.driver_connection
    return (
        isinstance(driver, psycopg.Connection)
        and not driver.autocommit
        and psycopg.Pipeline.is_supported()
    )


def insert_keyless_jobs_pipelined(
    conn: Connection, batches: Iterable[Sequence[NewJob]], *, schema: str | None = None
) -> list[uuid.UUID]:
    """Insert batches of jobs without dedup keys, each sent while the next one is made.

    Returns the ids inserted, in the order of the batches' jobs.

    ``batches`` is lazy: the producer checks a batch's values as it is
    iterated. In PostgreSQL's pipeline mode a batch's INSERT goes out at once
    and the database inserts it while Python checks and encodes the next
    (a producer's Python and the database's work on the rows are each about
    half of ``enqueue_many``'s time: in turn they take the sum, side by side
    the larger). The results are read once, at the end.

    No key, no conflict: every row is inserted or the statement fails. If
    making a batch raises (a bad value in it), the batches already sent are
    deleted again before the error goes on: nothing of the call remains (the
    insert trigger's wake-up still goes out if the caller commits: an idle
    executor looks and finds nothing). If the database refused a batch sent
    before, its error is raised instead: the transaction cannot commit.
    Only where ``can_pipeline(conn)``.
    """
    import psycopg  # the PostgreSQL driver: loaded already when conn is PostgreSQL

    driver = conn.connection.driver_connection
    assert isinstance(driver, psycopg.Connection)
    sent: list[uuid.UUID] = []
    cursors: list[tuple[psycopg.Cursor[Any], int]] = []
    refused: BaseException | None = None  # raised while making a batch
    try:
        with driver.pipeline():
            try:
                for new_jobs in batches:
                    params, uniform = _pg_batch(new_jobs)
                    cursor = driver.cursor()
                    cursor.execute(_pg_insert(schema, uniform, keyless=True), params)
                    cursors.append((cursor, len(new_jobs)))
                    sent.extend(params["job_id"])
            except psycopg.Error:
                raise
            except BaseException as exc:
                # Stop sending, but leave the pipeline normally: it then reports
                # what the database did with the batches sent so far.
                refused = exc
    except psycopg.Error as exc:
        # The database refused a batch: the transaction is aborted whatever
        # else happened, and that is what the caller must hear (a ValueError
        # instead would let it commit, which PostgreSQL turns into a rollback
        # without a word).
        raise _as_sqlalchemy_error(conn, driver, exc) from refused
    if refused is not None:
        if sent:
            conn.exec_driver_sql(_pg_delete(schema), {"ids": sent})
        raise refused
    for cursor, count in cursors:
        inserted = cursor.rowcount
        cursor.close()
        _check_all_inserted(inserted, count)
    return sent


def _check_all_inserted(inserted: int, count: int) -> None:
    """A keyless INSERT inserts every row or fails: anything else is a bug, not a conflict."""
    if inserted != count:
        raise RuntimeError(f"inserted {inserted} of {count} keyless jobs")


def _as_sqlalchemy_error(conn: Connection, driver: Any, exc: Any) -> StatementError:
    """``exc`` as SQLAlchemy raises a driver's error everywhere else.

    The class (IntegrityError, OperationalError, ...), and for a lost
    connection, ``connection_invalidated`` with the Connection invalidated, so
    the caller's rollback, the pool and retry-on-disconnect code behave as
    after any statement.
    """
    import psycopg

    lost = bool(driver.broken or driver.closed) or conn.dialect.is_disconnect(exc, driver, None)
    if lost:
        conn.invalidate(exc)
    error: StatementError = DBAPIError.instance(
        "INSERT INTO jobs ... (pipelined)",
        None,
        exc,
        psycopg.Error,
        hide_parameters=True,
        connection_invalidated=lost,
        dialect=conn.dialect,
    )
    return error


@cache
def _pg_delete(schema: str | None) -> str:
    return f"DELETE FROM {qualified('jobs', schema)} WHERE job_id = ANY(%(ids)s::uuid[])"


def _insert_pg(conn: Connection, new_jobs: Sequence[NewJob], schema: str | None) -> set[uuid.UUID]:
    params, uniform = _pg_batch(new_jobs)
    if "dedup_key" in uniform and params["dedup_key"] is None:
        # No key, no conflict: every row is inserted (or the statement fails),
        # so the ids need not come back (loading a thousand UUIDs costs more
        # than the insert's own Python work).
        done = conn.exec_driver_sql(_pg_insert(schema, uniform, keyless=True), params)
        _check_all_inserted(done.rowcount, len(new_jobs))
        return set(params["job_id"])
    return set(conn.exec_driver_sql(_pg_insert(schema, uniform), params).scalars().all())


def _pg_batch(new_jobs: Sequence[NewJob]) -> tuple[dict[str, Any], frozenset[str]]:
    """The statement's parameters, and the columns uniform in the batch (see ``_pg_insert``)."""
    params: dict[str, Any] = {
        "job_id": [j.job_id for j in new_jobs],
        "job_type": [j.job_type for j in new_jobs],
        "pool": [j.pool for j in new_jobs],
        # One Python type per array (psycopg refuses int and float mixed).
        "priority": [int(j.priority) for j in new_jobs],
        "tenant": [j.tenant for j in new_jobs],
        "concurrency_key": [j.concurrency_key for j in new_jobs],
        "max_attempts": [int(j.max_attempts) for j in new_jobs],
        "lease_seconds": [float(j.lease_seconds) for j in new_jobs],
        "idempotent": [bool(j.idempotent) for j in new_jobs],
        "payload_ref": [j.payload_ref for j in new_jobs],
        "args": [_json(j.args) if j.args_json is None else j.args_json for j in new_jobs],
        "dedup_key": [j.dedup_key for j in new_jobs],
        "schedule_name": [j.schedule_name for j in new_jobs],
        "scheduled_for": _aware([j.scheduled_for for j in new_jobs]),
        "covers_from": _aware([j.covers_from for j in new_jobs]),
        "covers_count": [j.covers_count for j in new_jobs],
        "run_after": _aware([j.run_after for j in new_jobs]),
    }
    uniform = frozenset(
        name
        for name, values in params.items()
        if name != "job_id" and values.count(values[0]) == len(values)
    )
    for name in uniform:
        params[name] = params[name][0]
    return params, uniform


def _aware(instants: list[datetime | None]) -> list[datetime | None]:
    """A naive instant would be read in the session's zone: refuse it, as ``UTCDateTime`` does."""
    for t in instants:
        if t is not None and t.tzinfo is None:
            raise ValueError(f"naive datetime {t!r}: a job's instants must be aware")
    return instants


def _plain_args(j: NewJob) -> dict[str, Any] | None:
    if j.args_json is not None:
        plain: dict[str, Any] = json.loads(j.args_json)
        return plain
    return dict(j.args) if j.args is not None else None


def _json(args: Mapping[str, Any] | None) -> str | None:
    if args is None:
        return None
    if type(args) is dict:  # the common case (checked producer args): the C encoder as is
        return json.dumps(args)
    return json.dumps(args, default=plain_mapping)  # a frozen config view: any mapping


def job_id_by_dedup_key(conn: Connection, job_type: str, dedup_key: str) -> uuid.UUID | None:
    return job_ids_by_dedup_keys(conn, [(job_type, dedup_key)]).get((job_type, dedup_key))


def job_ids_by_dedup_keys(
    conn: Connection, keys: Sequence[tuple[str, str]], *, schema: str | None = None
) -> dict[tuple[str, str], uuid.UUID]:
    """The existing jobs with these (job_type, dedup_key) pairs, in one statement."""
    if not keys:
        return {}
    found = conn.execute(
        select(jobs.c.job_type, jobs.c.dedup_key, jobs.c.job_id).where(
            tuple_(jobs.c.job_type, jobs.c.dedup_key).in_(sorted(set(keys)))
        ),
        execution_options=in_schema(schema),
    )
    return {(r.job_type, r.dedup_key): r.job_id for r in found}
