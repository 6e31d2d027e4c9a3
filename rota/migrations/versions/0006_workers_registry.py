"""workers: the registry of running scheduler and executor processes

Each scheduler and executor process inserts its row when it starts (a fresh
``worker_id`` per process start), refreshes ``last_seen_at`` once per
``interval_seconds`` with its heartbeat or tick, and deletes it on a graceful
exit. A row silent for three intervals is a gone process (``rota workers``);
rows silent for a day are removed by the processes that are still running.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("worker_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=50), nullable=False),
        sa.Column("pools", sa.JSON(), nullable=True),
        sa.Column("concurrency", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("interval_seconds", sa.Float(), nullable=False),
        # The kinds of rota.core.states.WorkerKind, as they were at this revision.
        sa.CheckConstraint("kind IN ('executor', 'scheduler')", name=op.f("ck_workers_kind_known")),
        sa.CheckConstraint("interval_seconds > 0", name=op.f("ck_workers_interval_positive")),
        sa.PrimaryKeyConstraint("worker_id", name=op.f("pk_workers")),
    )


def downgrade() -> None:
    op.drop_table("workers")
