"""the insert trigger notifies a channel named for its schema

Two rota installations may share one PostgreSQL database in two schemas
(``rota --schema NAME``). NOTIFY channels are per database, not per schema, so
the insert trigger names its channel after the schema of the table it fires
on: ``rota_jobs`` in ``public``, ``rota_jobs_<schema>`` elsewhere. ``rota.core.database.channel`` computes the same name for the
listeners and for the NOTIFYs sent from Python.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 16:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_PER_SCHEMA = """
CREATE OR REPLACE FUNCTION rota_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify(
    CASE WHEN TG_TABLE_SCHEMA = 'public' THEN 'rota_jobs' ELSE 'rota_jobs_' || TG_TABLE_SCHEMA END,
    '');
  RETURN NULL;
END $$
"""
_PUBLIC_ONLY = """
CREATE OR REPLACE FUNCTION rota_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('rota_jobs', '');
  RETURN NULL;
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PER_SCHEMA)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PUBLIC_ONLY)
