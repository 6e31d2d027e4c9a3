"""The schema check every command makes first, without importing Alembic.

``ensure_migrated`` refuses a database whose schema is missing, older than
this rota (run `rota migrate`) or newer (upgrade rota). It compares the
database's ``alembic_version`` row with ``HEAD``, the newest revision in
``versions/``: importing Alembic (and the Mako
templates it loads) and reading every migration script to find the head takes
a fifth of a second of every `rota` process's start, an executor's included.
``tests/core/test_migrations.py`` checks ``HEAD`` against Alembic's own head, so a
new migration cannot be added without it.

On PostgreSQL the schema also holds this release's statements as functions
(``SERVER_FUNCTIONS``, see ``rota.core.queries.server_functions``): `rota
migrate` installs them after the migrations, and ``ensure_migrated`` asks for
it when they are missing (a release whose statements changed, with no new
revision).
"""

from __future__ import annotations

from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from rota.core.database import (
    DatabaseError,
    SchemaNotReady,
    display_url,
    schema_of,
    short_error,
)
from rota.core.queries.jobs_claim import ANY_DUE, CLAIM_UNKEYED
from rota.core.queries.jobs_outcome import FINISH, SUCCEED
from rota.core.queries.server_functions import ServerFunction, missing

HEAD = "0018"
# What `rota migrate` installs on PostgreSQL, beside the revisions.
SERVER_FUNCTIONS: tuple[ServerFunction, ...] = (CLAIM_UNKEYED, ANY_DUE, SUCCEED, FINISH)
VERSION_TABLE = "alembic_version"


def current_revision(engine: Engine) -> str | None:
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table(VERSION_TABLE):
                return None
            rows = sorted(
                str(r)
                for r in conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars()
            )
            conn.rollback()
    except SQLAlchemyError as exc:
        raise DatabaseError(f"cannot reach the database: {short_error(exc)}") from None
    # Several rows: another migration history (with branches) shares the table; the
    # joined text is no rota revision, and ``schema_problem`` says so.
    return ",".join(rows) if rows else None


def schema_problem(current: str | None) -> str | None:
    """What is wrong with a database at revision ``current`` for this rota (None: nothing)."""
    if current == HEAD:
        return None
    if current is None:
        return "has no rota schema: run `rota migrate` first"
    if not is_rota_revision(current):
        return (
            f"is at revision {current!r}, which no rota release made: its "
            f"{VERSION_TABLE} table belongs to other migrations (an application's own "
            "Alembic history, say); give rota a schema or database of its own "
            "(--schema, or a database URL)"
        )
    if int(current) > int(HEAD):
        return (
            f"is at schema {current}, newer than this rota ({HEAD}): upgrade rota to the "
            "release that made it"
        )
    return f"is at schema {current}, this rota needs {HEAD}: run `rota migrate`"


def is_rota_revision(revision: str) -> bool:
    """rota numbers its migrations 0001, 0002, ... (``tests/core/test_migrations.py``
    holds every one in ``versions/`` to that): four digits from 0001 on, a
    later one from a newer release."""
    return len(revision) == 4 and revision.isascii() and revision.isdigit() and revision != "0000"


def migration_refusal(current: str | None) -> str | None:
    """Why ``rota migrate`` cannot upgrade a database at ``current`` (None: it can)."""
    if current is None or current == HEAD:
        return None
    if is_rota_revision(current) and int(current) < int(HEAD):
        return None
    return schema_problem(current)


def database_problem(engine: Engine) -> str | None:
    """What keeps this rota from working on ``engine``'s database (None: nothing): its
    schema's revision, then, on PostgreSQL, this release's server functions."""
    problem = schema_problem(current_revision(engine))
    if problem is None and engine.dialect.name == "postgresql":
        problem = functions_problem(engine)
    return problem


def ensure_migrated(engine: Engine) -> None:
    """Refuse to go on when the schema is missing, older or newer than this rota."""
    problem = database_problem(engine)
    if problem is None:
        return
    where = display_url(engine.url)
    schema = schema_of(engine.url)
    if schema is not None:
        where += f" (schema {schema})"
    raise SchemaNotReady(f"the database {where} {problem}")


def functions_problem(engine: Engine) -> str | None:
    """What is wrong with the server functions of this release (None: all are there)."""
    try:
        with engine.connect() as conn:
            absent = missing(conn, SERVER_FUNCTIONS)
            conn.rollback()
    except SQLAlchemyError as exc:
        raise DatabaseError(f"cannot reach the database: {short_error(exc)}") from None
    if not absent:
        return None
    return (
        f"lacks the statements of this rota ({', '.join(absent)}), which run as functions "
        "on the server: run `rota migrate`"
    )
