"""schedules: why a schedule is set aside; a coalesced range still being counted

``set_aside_reason``: a schedule the scheduler could not evaluate or insert
(a stored value this rota cannot use) is set aside with its reason, retried
now and then, and shown by ``rota schedules``; its neighbours keep firing.
A later successful tick or a corrected ``rota apply`` clears it.

``coalesce_from`` / ``coalesce_count``: ``misfire: coalesce`` counts a long
range of missed occurrences over several bounded transactions; these hold
what was counted so far until the one job that covers them all is made.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 17:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.add_column(sa.Column("set_aside_reason", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("coalesce_from", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("coalesce_count", sa.BigInteger(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_column("coalesce_count")
        batch_op.drop_column("coalesce_from")
        batch_op.drop_column("set_aside_reason")
