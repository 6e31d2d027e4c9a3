"""The schema check every command makes first, without importing Alembic.

``ensure_migrated`` refuses a database whose schema is missing or older than
this rota. It compares the database's ``alembic_version`` row with ``HEAD``,
the newest revision in ``versions/``: importing Alembic (and the Mako
templates it loads) and reading every migration script to find the head took
a fifth of a second of every `rota` process's start, an executor's included.
``tests/test_migrations.py`` checks ``HEAD`` against Alembic's own head, so a
new migration cannot be added without it.
"""

from __future__ import annotations

from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from rota.shared.database import (
    DatabaseError,
    SchemaNotReady,
    display_url,
    schema_of,
    short_error,
)

HEAD = "0011"
VERSION_TABLE = "alembic_version"


def current_revision(engine: Engine) -> str | None:
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table(VERSION_TABLE):
                return None
            row = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).first()
            conn.rollback()
    except SQLAlchemyError as exc:
        raise DatabaseError(f"cannot reach the database: {short_error(exc)}") from None
    return None if row is None else str(row[0])


def ensure_migrated(engine: Engine) -> None:
    """Refuse to go on when the schema is missing or older than this rota."""
    current = current_revision(engine)
    if current == HEAD:
        return
    where = display_url(engine.url)
    schema = schema_of(engine.url)
    if schema is not None:
        where += f" (schema {schema})"
    if current is None:
        raise SchemaNotReady(f"the database {where} has no rota schema: run `rota migrate` first")
    raise SchemaNotReady(
        f"the database {where} is at schema {current}, this rota needs {HEAD}: run `rota migrate`"
    )
