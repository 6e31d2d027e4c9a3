"""jobs, attempts, job types, schedules

Revision ID: 0001
Revises:
Create Date: 2026-11-30 10:15:15.133617
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


# PostgreSQL only: wake idle executors (LISTEN rota_jobs) whenever jobs are inserted.
# Statement-level, so a scheduler inserting 10,000 occurrences sends one notification.
_NOTIFY_FUNCTION = """
CREATE FUNCTION rota_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('rota_jobs', '');
  RETURN NULL;
END $$
"""
_NOTIFY_TRIGGER = """
CREATE TRIGGER rota_jobs_inserted AFTER INSERT ON jobs
FOR EACH STATEMENT EXECUTE FUNCTION rota_notify_jobs()
"""


def upgrade() -> None:
    op.create_table(
        "job_types",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("pool", sa.String(length=100), server_default="default", nullable=False),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_job_types")),
    )
    op.create_table(
        "jobs",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("job_type", sa.String(length=200), nullable=False),
        sa.Column("pool", sa.String(length=100), server_default="default", nullable=False),
        sa.Column("state", sa.String(length=20), server_default="QUEUED", nullable=False),
        sa.Column("priority", sa.Integer(), server_default="0", nullable=False),
        sa.Column("tenant", sa.String(length=200), nullable=True),
        sa.Column("concurrency_key", sa.String(length=200), nullable=True),
        sa.Column("attempt_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("max_attempts", sa.Integer(), server_default="5", nullable=False),
        sa.Column("run_after", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_generation", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("lease_seconds", sa.Float(), server_default="60", nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("idempotent", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("needs_reconcile", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("payload_ref", sa.Text(), nullable=True),
        sa.Column("args", sa.JSON(), nullable=True),
        sa.Column("result_ref", sa.Text(), nullable=True),
        sa.Column("last_error_code", sa.String(length=200), nullable=True),
        sa.Column("last_error_detail", sa.Text(), nullable=True),
        sa.Column("progress_stage", sa.String(length=200), nullable=True),
        sa.Column("progress_done", sa.BigInteger(), nullable=True),
        sa.Column("progress_total", sa.BigInteger(), nullable=True),
        sa.Column("dedup_key", sa.String(length=400), nullable=True),
        sa.Column("schedule_name", sa.String(length=200), nullable=True),
        sa.Column("scheduled_for", sa.DateTime(timezone=True), nullable=True),
        sa.Column("covers_from", sa.DateTime(timezone=True), nullable=True),
        sa.Column("covers_count", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "(state IN ('RUNNING', 'CANCEL_REQUESTED')) = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)",
            name=op.f("ck_jobs_lease_iff_running"),
        ),
        sa.CheckConstraint(
            "state IN ('QUEUED', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED', 'CANCEL_REQUESTED', 'CANCELLED')",
            name=op.f("ck_jobs_state_known"),
        ),
        sa.CheckConstraint(
            "attempt_count >= 0 AND attempt_count <= max_attempts",
            name=op.f("ck_jobs_attempts_bounded"),
        ),
        sa.CheckConstraint("max_attempts >= 1", name=op.f("ck_jobs_max_attempts_positive")),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_jobs")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_jobs_claimable",
            ["pool", "priority", "run_after", "created_at"],
            unique=False,
            postgresql_where=sa.text("state IN ('QUEUED', 'RETRY_WAIT')"),
            sqlite_where=sa.text("state IN ('QUEUED', 'RETRY_WAIT')"),
        )
        batch_op.create_index(
            "ix_jobs_leased",
            ["lease_owner"],
            unique=False,
            postgresql_where=sa.text("state IN ('RUNNING', 'CANCEL_REQUESTED')"),
            sqlite_where=sa.text("state IN ('RUNNING', 'CANCEL_REQUESTED')"),
        )
        batch_op.create_index("ix_jobs_schedule", ["schedule_name", "scheduled_for"], unique=False)
        batch_op.create_index("ix_jobs_state", ["state"], unique=False)
        batch_op.create_index(
            "ux_jobs_dedup",
            ["job_type", "dedup_key"],
            unique=True,
            postgresql_where=sa.text("dedup_key IS NOT NULL"),
            sqlite_where=sa.text("dedup_key IS NOT NULL"),
        )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_NOTIFY_FUNCTION)
        op.execute(_NOTIFY_TRIGGER)

    op.create_table(
        "schedules",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("job_type", sa.String(length=200), nullable=False),
        sa.Column("paused", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("removed", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("next_fire_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cursor_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_fire_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_job_id", sa.Uuid(), nullable=True),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("definition_hash", sa.String(length=64), nullable=False),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("skipped_count", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("coalesced_count", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_schedules")),
    )
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.create_index(
            "ix_schedules_due",
            ["next_fire_at"],
            unique=False,
            postgresql_where=sa.text("NOT paused AND NOT removed AND next_fire_at IS NOT NULL"),
            sqlite_where=sa.text("NOT paused AND NOT removed AND next_fire_at IS NOT NULL"),
        )

    op.create_table(
        "job_attempts",
        sa.Column(
            "attempt_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("lease_generation", sa.BigInteger(), nullable=False),
        sa.Column("worker_id", sa.String(length=200), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=20), nullable=True),
        sa.Column("error_code", sa.String(length=200), nullable=True),
        sa.Column("error_detail", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.job_id"],
            name=op.f("fk_job_attempts_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("attempt_id", name=op.f("pk_job_attempts")),
    )
    with op.batch_alter_table("job_attempts", schema=None) as batch_op:
        batch_op.create_index(
            "ux_job_attempts_generation", ["job_id", "lease_generation"], unique=True
        )

    op.create_table(
        "schedule_skips",
        sa.Column(
            "skip_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("schedule_name", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.String(length=20), nullable=False),
        sa.Column("first_instant", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_instant", sa.DateTime(timezone=True), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "reason IN ('misfire', 'dst', 'overlap', 'paused', 'coalesced')",
            name=op.f("ck_schedule_skips_reason_known"),
        ),
        sa.ForeignKeyConstraint(
            ["schedule_name"],
            ["schedules.name"],
            name=op.f("fk_schedule_skips_schedule_name_schedules"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("skip_id", name=op.f("pk_schedule_skips")),
    )
    with op.batch_alter_table("schedule_skips", schema=None) as batch_op:
        batch_op.create_index(
            "ix_schedule_skips_schedule", ["schedule_name", "recorded_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("schedule_skips", schema=None) as batch_op:
        batch_op.drop_index("ix_schedule_skips_schedule")

    op.drop_table("schedule_skips")
    with op.batch_alter_table("job_attempts", schema=None) as batch_op:
        batch_op.drop_index("ux_job_attempts_generation")

    op.drop_table("job_attempts")
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_schedules_due",
            postgresql_where=sa.text("NOT paused AND NOT removed AND next_fire_at IS NOT NULL"),
            sqlite_where=sa.text("NOT paused AND NOT removed AND next_fire_at IS NOT NULL"),
        )

    op.drop_table("schedules")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(
            "ux_jobs_dedup",
            postgresql_where=sa.text("dedup_key IS NOT NULL"),
            sqlite_where=sa.text("dedup_key IS NOT NULL"),
        )
        batch_op.drop_index("ix_jobs_state")
        batch_op.drop_index("ix_jobs_schedule")
        batch_op.drop_index(
            "ix_jobs_leased",
            postgresql_where=sa.text("state IN ('RUNNING', 'CANCEL_REQUESTED')"),
            sqlite_where=sa.text("state IN ('RUNNING', 'CANCEL_REQUESTED')"),
        )
        batch_op.drop_index(
            "ix_jobs_claimable",
            postgresql_where=sa.text("state IN ('QUEUED', 'RETRY_WAIT')"),
            sqlite_where=sa.text("state IN ('QUEUED', 'RETRY_WAIT')"),
        )

    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS rota_jobs_inserted ON jobs")
        op.execute("DROP FUNCTION IF EXISTS rota_notify_jobs()")
    op.drop_table("jobs")
    op.drop_table("job_types")
