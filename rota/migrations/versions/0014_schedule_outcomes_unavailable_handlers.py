"""schedule_outcomes, and the job types an executor cannot import in its registry row

* ``schedule_outcomes``: one row per schedule with the newest occurrence that
  reached a terminal state (its state, scheduled instant and finish) and the
  newest that SUCCEEDED. Written by the statements that finish jobs, so
  ``GET /metrics`` and ``GET /schedules`` read one row per schedule, never the
  job history. It starts filled from the jobs already finished.
* ``workers.unavailable_job_types``: the job types whose handler the executor
  cannot import, rewritten with each refresh of its row.

The state names are written out here, not derived from ``JobState``.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05 21:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_TERMINAL = "('SUCCEEDED', 'FAILED', 'CANCELLED')"

# The jobs finished before this revision: the newest finished occurrence of each
# schedule, and its newest success. One pass over the scheduled jobs.
_FILL = f"""
    INSERT INTO schedule_outcomes
        (schedule_name, last_state, last_instant, last_finished_at, last_success_instant)
    SELECT newest.schedule_name, newest.state, newest.scheduled_for, newest.finished_at,
           (SELECT max(s.scheduled_for) FROM jobs s
            WHERE s.schedule_name = newest.schedule_name AND s.state = 'SUCCEEDED')
    FROM (
        SELECT schedule_name, state, scheduled_for, finished_at,
               row_number() OVER (PARTITION BY schedule_name
                                  ORDER BY scheduled_for DESC, finished_at DESC) AS n
        FROM jobs
        WHERE schedule_name IS NOT NULL AND scheduled_for IS NOT NULL
          AND finished_at IS NOT NULL AND state IN {_TERMINAL}
    ) AS newest
    WHERE newest.n = 1
"""


def upgrade() -> None:
    op.create_table(
        "schedule_outcomes",
        sa.Column("schedule_name", sa.String(length=200), nullable=False),
        sa.Column("last_state", sa.String(length=20), nullable=False),
        sa.Column("last_instant", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_success_instant", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            f"last_state IN {_TERMINAL}", name=op.f("ck_schedule_outcomes_state_terminal")
        ),
        sa.PrimaryKeyConstraint("schedule_name", name=op.f("pk_schedule_outcomes")),
    )
    op.execute(sa.text(_FILL))
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("unavailable_job_types", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_column("unavailable_job_types")
    op.drop_table("schedule_outcomes")
