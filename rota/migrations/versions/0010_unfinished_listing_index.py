"""listing indexes in the listings' exact order: a page reads its own rows, not the queue

* ``ix_jobs_unfinished_created`` (state, created_at, job_id), unfinished rows
  only (new): the counterpart of ``ix_jobs_history`` for the jobs still
  queued, waiting to retry or running. ``rota jobs`` and ``GET /jobs`` read the
  newest jobs of each state from the end of its range, so a page costs its own
  rows, whatever the depth of the queue or the size of the history (without
  it, the listing reads every unfinished job to sort them, or the whole table).
  One more index entry when a job is inserted and when it is claimed; none
  when it finishes.
* ``ix_jobs_history`` gains ``job_id``: jobs inserted in one transaction share
  their ``created_at``, and without ``job_id`` a page (or the next one, after
  its keyset) that falls in such a group reads and sorts the whole group.
* ``ix_jobs_failed_recent`` (finished_at, job_id), FAILED rows only (new):
  the dashboard's last failures are the end of it (without it, every FAILED
  job kept is read and sorted on each refresh). A job enters it once, when it
  fails. ``ix_jobs_failed`` stays narrow: the FAILED gauge counts all of it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from alembic.operations import BatchOperations

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_UNFINISHED = "state IN ('QUEUED', 'RETRY_WAIT', 'RUNNING', 'CANCEL_REQUESTED')"
_FINISHED = "state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')"
_FAILED = "state = 'FAILED'"


def _partial(where: str) -> dict[str, object]:
    return {"postgresql_where": sa.text(where), "sqlite_where": sa.text(where)}


def _replace(batch_op: BatchOperations, name: str, columns: list[str], where: str) -> None:
    batch_op.drop_index(name, **_partial(where))
    batch_op.create_index(name, columns, unique=False, **_partial(where))


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_jobs_unfinished_created",
            ["state", "created_at", "job_id"],
            unique=False,
            **_partial(_UNFINISHED),
        )
        _replace(batch_op, "ix_jobs_history", ["state", "created_at", "job_id"], _FINISHED)
        batch_op.create_index(
            "ix_jobs_failed_recent", ["finished_at", "job_id"], unique=False, **_partial(_FAILED)
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_failed_recent", **_partial(_FAILED))
        _replace(batch_op, "ix_jobs_history", ["state", "created_at"], _FINISHED)
        batch_op.drop_index("ix_jobs_unfinished_created", **_partial(_UNFINISHED))
