"""index of unfinished jobs by state and creation: the listing reads a page, not the queue

* ``ix_jobs_unfinished_created`` (state, created_at, job_id), unfinished rows: the
  counterpart of ``ix_jobs_history`` for the jobs still queued, waiting to
  retry or running. ``rota jobs`` and ``GET /jobs`` read the newest jobs of
  each state from the end of its range, so a page costs its own rows, whatever
  the depth of the queue or the size of the history. (Before, the unfinished
  part read every unfinished job to sort them, or the whole table.) One more
  index entry when a job is inserted and when it is claimed; none when it
  finishes.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_UNFINISHED = "state IN ('QUEUED', 'RETRY_WAIT', 'RUNNING', 'CANCEL_REQUESTED')"


def _partial(where: str) -> dict[str, object]:
    return {"postgresql_where": sa.text(where), "sqlite_where": sa.text(where)}


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_jobs_unfinished_created",
            ["state", "created_at", "job_id"],
            unique=False,
            **_partial(_UNFINISHED),
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_unfinished_created", **_partial(_UNFINISHED))
