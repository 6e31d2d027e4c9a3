"""job_attempt_output: the tail of what each attempt's handler wrote

One row per attempt that wrote anything, keyed by the attempt (job id and
lease generation) and deleted with it (CASCADE; pruning deletes it first):
the last 64 KiB of a ``command:``'s stdout and stderr, or of a Python
handler's log records, and how many bytes came before that tail. Written in
the statement (PostgreSQL) or transaction (SQLite) that writes the attempt's
outcome, under the same lease fence. A table of its own, not a column of
``job_attempts``: the attempt row stays narrow, and is still rewritten in
place when the attempt closes (0011).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05 21:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_attempt_output",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("lease_generation", sa.BigInteger(), nullable=False),
        sa.Column("output", sa.Text(), nullable=False),
        sa.Column("dropped_bytes", sa.BigInteger(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id", "lease_generation"],
            ["job_attempts.job_id", "job_attempts.lease_generation"],
            name=op.f("fk_job_attempt_output_job_id_job_attempts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "lease_generation", name=op.f("pk_job_attempt_output")),
    )


def downgrade() -> None:
    op.drop_table("job_attempt_output")
