"""Binding values to the hand-written job-state statements, per backend.

The executor's statements (claim, renew, finish, sweep) are hot: they are
written as SQL text per dialect, compiled once, and take plain bound values.
This module turns Python values into what each backend stores:

* a job id is a ``uuid`` on PostgreSQL and 32 hex characters on SQLite
  (SQLAlchemy's ``Uuid`` storage there);
* an injected instant (tests) is a ``timestamptz`` on PostgreSQL and the text
  form ``UTCDateTime`` stores on SQLite; ``None`` means the database clock;
* a batch of per-job rows is a set of arrays on PostgreSQL (``unnest``) and a
  JSON document on SQLite (``json_each``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection

from rota.core.database import check_schema_name

# The SQLite clock and stored instants share this text form (see core.sqltime).
SQLITE_FMT = "%Y-%m-%d %H:%M:%f000"
_SQLITE_PY_FMT = "%Y-%m-%d %H:%M:%S.%f"


def in_schema(schema: str | None) -> dict[str, Any]:
    """Execution options that put Core statements' tables in ``schema`` (None: as searched)."""
    return {} if schema is None else {"schema_translate_map": {None: schema}}


def qualified(table: str, schema: str | None) -> str:
    """A table name for SQL text, in ``schema`` when one is given.

    The schema name is checked here, where it enters the text: a producer's
    ``enqueue(schema=...)`` reaches this without passing the command line's check.
    """
    return table if schema is None else f'"{check_schema_name(schema)}".{table}'


def is_pg(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def bind_now(conn: Connection, now: datetime | None) -> Any:
    """The ``:now`` parameter: ``None`` lets the statement use the database clock."""
    if now is None:
        return None
    if now.tzinfo is None:
        raise ValueError(f"naive datetime {now!r} passed as now")
    if is_pg(conn):
        return now
    return now.astimezone(UTC).strftime(_SQLITE_PY_FMT)


def bind_id(conn: Connection, job_id: uuid.UUID) -> Any:
    return job_id if is_pg(conn) else job_id.hex


def read_id(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(hex=str(value))


def read_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def sqlite_batch(rows: Sequence[dict[str, Any]]) -> str:
    """A JSON array of objects, read on SQLite with ``json_each`` / ``json_extract``."""
    return json.dumps(rows, separators=(",", ":"))


# SQL fragments for "now" and "now + seconds", honouring an injected :now.
PG_NOW = "coalesce(CAST(:now AS timestamptz), now())"
SQLITE_NOW = f"coalesce(:now, strftime('{SQLITE_FMT}', 'now'))"


def pg_now_plus(seconds_sql: str) -> str:
    return f"({PG_NOW} + make_interval(secs => CAST({seconds_sql} AS double precision)))"


def sqlite_now_plus(seconds_sql: str) -> str:
    shift = f"printf('%+.3f seconds', {seconds_sql})"
    return f"strftime('{SQLITE_FMT}', coalesce(:now, 'now'), {shift})"
