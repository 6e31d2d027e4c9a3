"""operator_actions: who cancelled, replayed, paused or resumed what, when and why

One row per action on one job or one schedule, written in the transaction of
the transition it records, with the actor, an optional reason and the
database clock. A table rather than columns on ``jobs``: a job's row is
rewritten by every claim and heartbeat, and a replay after a cancel keeps
both notes. Rows are deleted with their job or schedule.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_JOB = "job_id IS NOT NULL"
_SCHEDULE = "schedule_name IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "operator_actions",
        sa.Column(
            "action_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("schedule_name", sa.String(length=200), nullable=True),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "action IN ('cancel', 'replay', 'pause', 'resume')",
            name=op.f("ck_operator_actions_action_known"),
        ),
        sa.CheckConstraint(
            "(job_id IS NULL) <> (schedule_name IS NULL)",
            name=op.f("ck_operator_actions_one_target"),
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.job_id"],
            name=op.f("fk_operator_actions_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["schedule_name"],
            ["schedules.name"],
            name=op.f("fk_operator_actions_schedule_name_schedules"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("action_id", name=op.f("pk_operator_actions")),
    )
    with op.batch_alter_table("operator_actions", schema=None) as batch_op:
        batch_op.create_index(
            "ix_operator_actions_job",
            ["job_id"],
            unique=False,
            postgresql_where=sa.text(_JOB),
            sqlite_where=sa.text(_JOB),
        )
        batch_op.create_index(
            "ix_operator_actions_schedule",
            ["schedule_name", "action_id"],
            unique=False,
            postgresql_where=sa.text(_SCHEDULE),
            sqlite_where=sa.text(_SCHEDULE),
        )


def downgrade() -> None:
    with op.batch_alter_table("operator_actions", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_operator_actions_schedule",
            postgresql_where=sa.text(_SCHEDULE),
            sqlite_where=sa.text(_SCHEDULE),
        )
        batch_op.drop_index(
            "ix_operator_actions_job",
            postgresql_where=sa.text(_JOB),
            sqlite_where=sa.text(_JOB),
        )
    op.drop_table("operator_actions")
