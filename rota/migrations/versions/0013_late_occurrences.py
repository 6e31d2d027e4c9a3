"""late occurrences: each schedule's deadline watermark and the late_occurrences table

* ``schedules.deadlines_checked_through``: every occurrence of the schedule at
  or before it was judged on time or late (``rota.scheduler.deadlines``).
* ``schedules.deadline_check_at``: when the next judgment is due (the next
  occurrence's instant + the deadline); ``ix_schedules_deadline_due``, partial
  on it, makes finding the due ones cost the due ones. Both null: no deadline.
* ``late_occurrences``: one row per late occurrence, unique per (schedule,
  instant), so two replicas that judge the same occurrence record it once.
* ``ix_schedule_skips_schedule_last_instant``: the ledger ranges that cover an
  instant, found without reading the schedule's whole ledger.

The reasons are written out here, not derived from ``LateReason``: a
migration keeps meaning what it meant when a later one widens the enum.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05 21:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_REASONS = (
    "reason IN ('not_finished', 'failed', 'cancelled', 'paused', 'set_aside', "
    "'skipped:misfire', 'skipped:dst', 'skipped:overlap', 'skipped:coalesced')"
)
_CHECK_DUE = "deadline_check_at IS NOT NULL"


def upgrade() -> None:
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("deadlines_checked_through", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column("deadline_check_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.create_index(
            "ix_schedules_deadline_due",
            ["deadline_check_at"],
            unique=False,
            postgresql_where=sa.text(_CHECK_DUE),
            sqlite_where=sa.text(_CHECK_DUE),
        )
    with op.batch_alter_table("schedule_skips", schema=None) as batch_op:
        batch_op.create_index(
            "ix_schedule_skips_schedule_last_instant",
            ["schedule_name", "last_instant"],
            unique=False,
        )
    op.create_table(
        "late_occurrences",
        sa.Column(
            "late_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("schedule_name", sa.String(length=200), nullable=False),
        sa.Column("instant", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.String(length=40), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("detected_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(_REASONS, name=op.f("ck_late_occurrences_reason_known")),
        sa.ForeignKeyConstraint(
            ["schedule_name"],
            ["schedules.name"],
            name=op.f("fk_late_occurrences_schedule_name_schedules"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("late_id", name=op.f("pk_late_occurrences")),
    )
    with op.batch_alter_table("late_occurrences", schema=None) as batch_op:
        batch_op.create_index(
            "ux_late_occurrences_schedule_instant", ["schedule_name", "instant"], unique=True
        )
        batch_op.create_index("ix_late_occurrences_instant", ["instant"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("late_occurrences", schema=None) as batch_op:
        batch_op.drop_index("ix_late_occurrences_instant")
        batch_op.drop_index("ux_late_occurrences_schedule_instant")
    op.drop_table("late_occurrences")
    with op.batch_alter_table("schedule_skips", schema=None) as batch_op:
        batch_op.drop_index("ix_schedule_skips_schedule_last_instant")
    # Not in batch mode: SQLite would rebuild ``schedules``, and dropping the old
    # table (foreign keys on) cascades to every table that refers to it.
    # ALTER TABLE ... DROP COLUMN (SQLite >= 3.35) drops the columns in place.
    op.drop_index(
        "ix_schedules_deadline_due",
        table_name="schedules",
        postgresql_where=sa.text(_CHECK_DUE),
        sqlite_where=sa.text(_CHECK_DUE),
    )
    op.drop_column("schedules", "deadline_check_at")
    op.drop_column("schedules", "deadlines_checked_through")
