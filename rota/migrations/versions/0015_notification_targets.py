"""notification_targets: the webhook targets of the schedule file

One row per target of the ``notifications:`` section, written by `rota
apply`; executors read them when an event happens. ``definition`` holds the
target as JSON, with the name of the environment variable of its secret,
never the secret.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05 21:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notification_targets",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_notification_targets")),
    )


def downgrade() -> None:
    op.drop_table("notification_targets")
