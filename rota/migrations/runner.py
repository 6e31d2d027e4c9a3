"""Run the Alembic migrations from code (``rota migrate``), without an alembic.ini.

The check every other command makes first (``ensure_migrated``) lives in
``rota.migrations.check``, which does not import Alembic.

After the revisions, on PostgreSQL, ``upgrade`` installs this release's
statements as functions (``check.SERVER_FUNCTIONS``); ``downgrade`` drops them.

On PostgreSQL with a schema of its own (``make_engine(url, schema=...)``), the
engine's connections search only that schema: ``upgrade`` creates it first,
and Alembic's version table lands in it like every other table.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from rota.core.database import schema_of
from rota.core.queries.server_functions import install, remove
from rota.migrations.check import (
    HEAD,
    SERVER_FUNCTIONS,
    VERSION_TABLE,
    current_revision,
    ensure_migrated,
)

__all__ = [
    "VERSION_TABLE",
    "alembic_config",
    "current_revision",
    "downgrade",
    "ensure_migrated",
    "head_revision",
    "upgrade",
]

_HERE = Path(__file__).resolve().parent


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
    if engine.dialect.name == "postgresql" and current_revision(engine) == HEAD:
        # This release's statements, kept on the server (``SERVER_FUNCTIONS``).
        with engine.begin() as conn:
            install(conn, SERVER_FUNCTIONS)


def downgrade(engine: Engine, revision: str) -> None:
    """Downgrade to ``revision``; on PostgreSQL, then drop this release's functions, whose
    statements read the newest schema, or at ``base`` every release's. An older
    release's stay at any other revision: its executors call them."""
    command.downgrade(alembic_config(engine), revision)
    now = current_revision(engine)
    if engine.dialect.name == "postgresql" and now != HEAD:
        with engine.begin() as conn:
            remove(conn, None if now is None else SERVER_FUNCTIONS)
