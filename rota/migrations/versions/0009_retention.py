"""retention: indexes of finished jobs (pruning, listing); each schedule's pruned watermark

* ``ix_jobs_finished`` (state, job_type, finished_at), finished rows only:
  "finished before T, in state S, of type X" is one range of it, so pruning
  costs the rows it deletes, not the size of the table. A job enters it once,
  when its outcome is written; the claim and the insert never touch it.
* ``ix_jobs_history`` (state, created_at), finished rows only: ``rota jobs``
  reads the newest finished jobs of each state from the end of its range, so
  listing costs the same with ten rows of history or ten million.
* ``schedules.pruned_through``: the newest regular occurrence of the schedule
  whose job was pruned. ``rota backfill`` creates nothing at or before it, so
  an occurrence, once created, is never created again.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_FINISHED = "state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')"


def _partial(where: str) -> dict[str, object]:
    return {"postgresql_where": sa.text(where), "sqlite_where": sa.text(where)}


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_jobs_finished",
            ["state", "job_type", "finished_at"],
            unique=False,
            **_partial(_FINISHED),
        )
        batch_op.create_index(
            "ix_jobs_history", ["state", "created_at"], unique=False, **_partial(_FINISHED)
        )
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pruned_through", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_column("pruned_through")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_history", **_partial(_FINISHED))
        batch_op.drop_index("ix_jobs_finished", **_partial(_FINISHED))
