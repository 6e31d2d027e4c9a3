"""Alembic environment: migrates the engine handed over by ``migrations.runner``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

from rota.core.tables import metadata

config = context.config
engine = config.attributes.get("engine")
if not isinstance(engine, Engine):
    raise RuntimeError("run migrations through `rota migrate` (migrations.runner.upgrade)")

with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
