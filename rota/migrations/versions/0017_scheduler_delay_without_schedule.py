"""rota_scheduler_delay_seconds loses its ``schedule`` label: its stored rows go

The histogram kept one series per schedule, 24 lines each: at 100,000
schedules a scrape was 219 MB and 16 s of CPU. It is now one histogram for
all schedules (per-schedule health has its own gauges). The rows stored under
the old label set are deleted from ``metric_totals``, ``metric_minutes`` and
``metric_inbox``: the histogram starts again from zero, which Prometheus
reads as a counter reset. A downgrade deletes the new, label-less rows for
the same reason.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05 22:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

METRIC = "rota_scheduler_delay_seconds"
TABLES = ("metric_totals", "metric_minutes", "metric_inbox")


def _forget() -> None:
    for table in TABLES:
        op.execute(sa.text(f"DELETE FROM {table} WHERE metric = :m").bindparams(m=METRIC))


def upgrade() -> None:
    _forget()


def downgrade() -> None:
    _forget()
