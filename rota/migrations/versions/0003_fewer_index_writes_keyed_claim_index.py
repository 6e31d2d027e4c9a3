"""fewer index writes per job; an index of claimable keyed jobs

Every job row is written three times (insert, claim, outcome), and a state
change is never a HOT update, so each write adds an entry to every index whose
predicate the row satisfies:

* ``ix_jobs_state`` becomes partial: unfinished states only. Finished jobs
  (most rows) are not indexed; ``rota jobs --state SUCCEEDED`` scans, which is
  fine for an operator command.
* ``ix_jobs_schedule`` becomes partial: scheduled jobs only (ad-hoc jobs have
  no schedule name). The scheduler's overlap check (``schedule_name IN ...``)
  implies the predicate and still uses it.
* ``ix_jobs_claimable_keyed`` (new): claimable jobs with a concurrency key. The
  lock-free claim asks "does a keyed job wait?" first; this keeps the answer to
  an index probe, and plain jobs never enter it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 11:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_UNFINISHED = "state IN ('QUEUED', 'RETRY_WAIT', 'RUNNING', 'CANCEL_REQUESTED')"
_SCHEDULED = "schedule_name IS NOT NULL"
_CLAIMABLE_KEYED = "state IN ('QUEUED', 'RETRY_WAIT') AND concurrency_key IS NOT NULL"


def _partial(where: str) -> dict[str, object]:
    return {"postgresql_where": sa.text(where), "sqlite_where": sa.text(where)}


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_state")
        batch_op.drop_index("ix_jobs_schedule")
        batch_op.create_index("ix_jobs_state", ["state"], unique=False, **_partial(_UNFINISHED))
        batch_op.create_index(
            "ix_jobs_schedule",
            ["schedule_name", "scheduled_for"],
            unique=False,
            **_partial(_SCHEDULED),
        )
        batch_op.create_index(
            "ix_jobs_claimable_keyed",
            ["pool", "run_after"],
            unique=False,
            **_partial(_CLAIMABLE_KEYED),
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_claimable_keyed", **_partial(_CLAIMABLE_KEYED))
        batch_op.drop_index("ix_jobs_schedule", **_partial(_SCHEDULED))
        batch_op.drop_index("ix_jobs_state", **_partial(_UNFINISHED))
        batch_op.create_index("ix_jobs_schedule", ["schedule_name", "scheduled_for"], unique=False)
        batch_op.create_index("ix_jobs_state", ["state"], unique=False)
