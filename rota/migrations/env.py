"""Alembic environment: migrates the engine handed over by ``migrations.runner``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, Engine

from rota.core.tables import metadata

config = context.config
engine = config.attributes.get("engine")
if not isinstance(engine, Engine):
    raise RuntimeError("run migrations through `rota migrate` (migrations.runner.upgrade)")


def _sqlite_foreign_keys(connection: Connection, on: bool) -> None:
    """Set SQLite's foreign key enforcement, outside any transaction (inside one it is ignored).

    A migration that changes a table's constraints copies it to a new table and
    drops the old one. With enforcement on, that DROP deletes every row first and
    cascades to the tables that refer to it (``job_attempt_output`` rows would go
    with ``job_attempts``), so migrations run with it off, as SQLite advises, and
    the references are checked before it is on again.
    """
    raw = connection.connection.dbapi_connection
    assert raw is not None
    raw.execute(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")


with engine.connect() as connection:
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        _sqlite_foreign_keys(connection, on=False)
    try:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            render_as_batch=sqlite,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
                if broken:
                    raise RuntimeError(f"the migrated database breaks its references: {broken}")
        connection.commit()
    finally:
        if sqlite:
            connection.rollback()
            _sqlite_foreign_keys(connection, on=True)
