"""leased jobs: one per concurrency key (unique), and an index for tenant counts

The executor's claim checks both limits itself (under an advisory lock on
PostgreSQL, under the write lock on SQLite); the unique index makes "at most
one RUNNING or CANCEL_REQUESTED job per concurrency_key" a property of the
database, whatever writes the rows, and both indexes keep the claim's
"is this key / tenant already running" checks to a few index entries.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 10:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_LEASED_KEY = "state IN ('RUNNING', 'CANCEL_REQUESTED') AND concurrency_key IS NOT NULL"
_LEASED_TENANT = "state IN ('RUNNING', 'CANCEL_REQUESTED') AND tenant IS NOT NULL"


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ux_jobs_leased_concurrency_key",
            ["concurrency_key"],
            unique=True,
            postgresql_where=sa.text(_LEASED_KEY),
            sqlite_where=sa.text(_LEASED_KEY),
        )
        batch_op.create_index(
            "ix_jobs_leased_tenant",
            ["tenant"],
            unique=False,
            postgresql_where=sa.text(_LEASED_TENANT),
            sqlite_where=sa.text(_LEASED_TENANT),
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_jobs_leased_tenant",
            postgresql_where=sa.text(_LEASED_TENANT),
            sqlite_where=sa.text(_LEASED_TENANT),
        )
        batch_op.drop_index(
            "ux_jobs_leased_concurrency_key",
            postgresql_where=sa.text(_LEASED_KEY),
            sqlite_where=sa.text(_LEASED_KEY),
        )
