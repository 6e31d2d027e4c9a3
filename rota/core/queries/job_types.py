"""Statements on ``job_types``: what ``rota apply`` stores and executors read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from sqlalchemy import Connection, delete, select, update

from rota.core.config import JobTypeSpec
from rota.core.queries.sqlparams import in_schema, is_pg, qualified
from rota.core.sqltime import db_now
from rota.core.tables import job_types


def load_job_types(conn: Connection) -> dict[str, JobTypeSpec]:
    rows = conn.execute(select(job_types.c.definition)).scalars()
    specs = (JobTypeSpec.from_json(d) for d in rows)
    return {s.name: s for s in specs}


def get_job_type(conn: Connection, name: str) -> JobTypeSpec | None:
    return get_job_types(conn, [name]).get(name)


def get_job_types(
    conn: Connection, names: Iterable[str], *, schema: str | None = None
) -> dict[str, JobTypeSpec]:
    """The stored job types among ``names`` (one statement); missing names are left out.

    Every ``enqueue_many`` batch reads its job types: on PostgreSQL the
    statement is plain driver SQL (a Core select costs five times the round trip).
    """
    wanted = sorted(set(names))
    if not wanted:
        return {}
    if is_pg(conn):
        rows: Iterable[Any] = conn.exec_driver_sql(_pg_get(schema), {"names": wanted}).scalars()
    else:
        rows = conn.execute(
            select(job_types.c.definition).where(job_types.c.name.in_(wanted)),
            execution_options=in_schema(schema),
        ).scalars()
    specs = (JobTypeSpec.from_json(d) for d in rows)
    return {s.name: s for s in specs}


@cache
def _pg_get(schema: str | None) -> str:
    return (
        f"SELECT definition FROM {qualified('job_types', schema)} "
        "WHERE name = ANY(%(names)s::text[])"
    )


def lock_job_type_for_count(conn: Connection, name: str, *, schema: str | None = None) -> None:
    """Hold ``name``'s row until the transaction ends, so that counts of its queue taken
    after this see every job another holder inserted (``max_queued``).

    Without it two producers could each count the same depth and both insert,
    past the limit. PostgreSQL: ``FOR NO KEY UPDATE`` of the job type's row (it
    waits only for other holders and for writers of the row, such as ``rota
    apply``). SQLite: nothing to do, every rota transaction already holds the
    database's write lock (``BEGIN IMMEDIATE``); a connection that began without
    it cannot commit an insert after another writer did (``SQLITE_BUSY``), so
    it never passes the limit either.
    """
    if is_pg(conn):
        conn.exec_driver_sql(_pg_lock(schema), {"name": name})


@cache
def _pg_lock(schema: str | None) -> str:
    return f"SELECT 1 FROM {qualified('job_types', schema)} WHERE name = %(name)s FOR NO KEY UPDATE"


def upsert_job_types(conn: Connection, specs: Iterable[JobTypeSpec]) -> dict[str, str]:
    """Make the stored job types include ``specs``; returns {name: "added" | "changed"}.

    Job types that the file no longer declares are kept: pending jobs of that
    type still need to know how they run.
    """
    current = load_job_types(conn)
    changes: dict[str, str] = {}
    # In name order, the order producers lock these rows in (``lock_job_type_for_count``):
    # an apply and a producer of several limited types never wait for each other in a cycle.
    for spec in sorted(specs, key=lambda s: s.name):
        old = current.get(spec.name)
        if old == spec:
            continue
        values: Mapping[str, object] = {
            "pool": spec.pool,
            "definition": spec.to_json(),
            "updated_at": db_now(),
        }
        if old is None:
            conn.execute(job_types.insert().values(name=spec.name, **values))
            changes[spec.name] = "added"
        else:
            conn.execute(update(job_types).where(job_types.c.name == spec.name).values(**values))
            changes[spec.name] = "changed"
    return changes


def delete_job_type(conn: Connection, name: str) -> None:
    conn.execute(delete(job_types).where(job_types.c.name == name))
