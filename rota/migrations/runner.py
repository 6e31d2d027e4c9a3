"""Run the Alembic migrations from code (``rota migrate``), without an alembic.ini.

Also the check every other command makes first: ``ensure_migrated`` refuses a
database whose schema is missing or older than this rota.

On PostgreSQL with a schema of its own (``make_engine(url, schema=...)``), the
engine's connections search only that schema: ``upgrade`` creates it first,
and Alembic's version table lands in it like every other table.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from rota.shared.database import (
    DatabaseError,
    SchemaNotReady,
    display_url,
    schema_of,
    short_error,
)

_HERE = Path(__file__).resolve().parent
VERSION_TABLE = "alembic_version"


def alembic_config(engine: Engine | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE))
    if engine is not None:
        cfg.attributes["engine"] = engine
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def upgrade(engine: Engine, revision: str = "head") -> None:
    schema = schema_of(engine.url)
    if schema is not None:
        with engine.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str) -> None:
    command.downgrade(alembic_config(engine), revision)


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
    head = head_revision()
    if current == head:
        return
    where = display_url(engine.url)
    schema = schema_of(engine.url)
    if schema is not None:
        where += f" (schema {schema})"
    if current is None:
        raise SchemaNotReady(f"the database {where} has no rota schema: run `rota migrate` first")
    raise SchemaNotReady(
        f"the database {where} is at schema {current}, this rota needs {head}: run `rota migrate`"
    )
