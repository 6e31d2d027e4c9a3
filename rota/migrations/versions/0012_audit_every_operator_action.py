"""operator_actions holds every operator action: trigger, prune and backfill too

* ``action`` may also be ``trigger``, ``prune`` or ``backfill``.
* ``job_filter``: the target of a prune, the jobs it chose in words (one row
  per prune, not one per deleted job). A row has exactly one target: a job,
  a schedule, or that description.
* ``detail``: what an action covered beyond its target (a backfill's range,
  the job a trigger made).
* two indexes read the audit newest first, whole or by actor
  (``GET /audit``, ``rota audit``).

The values are written out here, not derived from ``OperatorAction``: a
migration keeps meaning what it meant when a later one widens the enum.
``tests/core/test_migrations.py`` checks that they match the models' CHECKs.

A downgrade deletes the rows the older schema cannot hold (triggers,
prunes, backfills).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_OLD_ACTIONS = "action IN ('cancel', 'replay', 'pause', 'resume')"
_NEW_ACTIONS = "action IN ('cancel', 'replay', 'pause', 'resume', 'trigger', 'prune', 'backfill')"
_OLD_ONE_TARGET = "(job_id IS NULL) <> (schedule_name IS NULL)"
_NEW_ONE_TARGET = (
    "(CASE WHEN job_id IS NULL THEN 0 ELSE 1 END)"
    " + (CASE WHEN schedule_name IS NULL THEN 0 ELSE 1 END)"
    " + (CASE WHEN job_filter IS NULL THEN 0 ELSE 1 END) = 1"
)
_ACTION_KNOWN = "ck_operator_actions_action_known"
_ONE_TARGET = "ck_operator_actions_one_target"


def upgrade() -> None:
    # Batch mode: SQLite changes a CHECK only by rebuilding the table.
    with op.batch_alter_table("operator_actions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("job_filter", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("detail", sa.Text(), nullable=True))
        batch_op.drop_constraint(op.f(_ACTION_KNOWN), type_="check")
        batch_op.drop_constraint(op.f(_ONE_TARGET), type_="check")
        batch_op.create_check_constraint(op.f(_ACTION_KNOWN), sa.text(_NEW_ACTIONS))
        batch_op.create_check_constraint(op.f(_ONE_TARGET), sa.text(_NEW_ONE_TARGET))
        batch_op.create_index("ix_operator_actions_at", ["at", "action_id"], unique=False)
        batch_op.create_index(
            "ix_operator_actions_actor", ["actor", "at", "action_id"], unique=False
        )


def downgrade() -> None:
    op.execute(
        sa.text(
            f"DELETE FROM operator_actions WHERE job_filter IS NOT NULL OR NOT ({_OLD_ACTIONS})"
        )
    )
    with op.batch_alter_table("operator_actions", schema=None) as batch_op:
        batch_op.drop_index("ix_operator_actions_actor")
        batch_op.drop_index("ix_operator_actions_at")
        batch_op.drop_constraint(op.f(_ONE_TARGET), type_="check")
        batch_op.drop_constraint(op.f(_ACTION_KNOWN), type_="check")
        batch_op.create_check_constraint(op.f(_ONE_TARGET), sa.text(_OLD_ONE_TARGET))
        batch_op.create_check_constraint(op.f(_ACTION_KNOWN), sa.text(_OLD_ACTIONS))
        batch_op.drop_column("detail")
        batch_op.drop_column("job_filter")
