"""The migrations are the only way tables are made: they match the models and round-trip."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from rota.migrations.runner import (
    current_revision,
    downgrade,
    ensure_migrated,
    head_revision,
    upgrade,
)
from rota.shared.database import SchemaNotReady, make_engine
from rota.shared.models import metadata


def _drift(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            return list(compare_metadata(ctx, metadata))
    finally:
        engine.dispose()


def test_upgrade_matches_models_and_round_trips(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        upgrade(engine)
        assert _drift(empty_db_url) == []
        assert current_revision(engine) == head_revision()
        downgrade(engine, "base")
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
        assert tables <= {"alembic_version"}
        upgrade(engine)
        assert _drift(empty_db_url) == []
        upgrade(engine)  # idempotent
        ensure_migrated(engine)
    finally:
        engine.dispose()


def test_unmigrated_database_is_refused_with_a_hint(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        with pytest.raises(SchemaNotReady, match="rota migrate"):
            ensure_migrated(engine)
    finally:
        engine.dispose()
