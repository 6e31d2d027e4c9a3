"""metric aggregates; indexes that keep the operations gauges and backpressure cheap

* ``metric_totals``: cumulative histogram buckets and counters, one row per
  (metric, label set, bucket). Executors and schedulers keep observations in
  memory and add their deltas here once per flush interval (an upsert that
  adds), so every ``rota serve`` reports the same numbers, whichever process
  did the work.
* ``metric_minutes``: the same deltas per minute, kept about two hours, for
  the dashboard's last-hour charts and percentiles.
* ``metric_inbox``: observations made inside another transaction (a cancel, a
  skipped occurrence) are appended here, taking no lock on shared rows; the
  flushers fold them into the two tables above.
* ``ix_jobs_state`` gains ``job_type``, ``run_after`` and ``pool``: the same
  rows (unfinished jobs) and the same number of index writes, but the
  ``rota_jobs`` gauge is counted from the index alone, and the oldest waiting
  job of a type (``max_queue_age``) is its first entry.
* ``ix_jobs_failed``: FAILED jobs only (a job enters it once, when it fails),
  for the FAILED gauge and the dashboard's list of failed jobs.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 16:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_UNFINISHED = "state IN ('QUEUED', 'RETRY_WAIT', 'RUNNING', 'CANCEL_REQUESTED')"
_FAILED = "state = 'FAILED'"


def _partial(where: str) -> dict[str, object]:
    return {"postgresql_where": sa.text(where), "sqlite_where": sa.text(where)}


def _aggregate_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("metric", sa.String(length=100), nullable=False),
        sa.Column("labels", sa.String(length=1000), nullable=False),
        sa.Column("le", sa.String(length=32), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("total", sa.Float(), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "metric_totals",
        *_aggregate_columns(),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("metric", "labels", "le", name=op.f("pk_metric_totals")),
    )
    op.create_table(
        "metric_minutes",
        sa.Column("minute", sa.DateTime(timezone=True), nullable=False),
        *_aggregate_columns(),
        sa.PrimaryKeyConstraint("minute", "metric", "labels", "le", name=op.f("pk_metric_minutes")),
    )
    op.create_table(
        "metric_inbox",
        sa.Column(
            "inbox_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("minute", sa.DateTime(timezone=True), nullable=False),
        *_aggregate_columns(),
        sa.PrimaryKeyConstraint("inbox_id", name=op.f("pk_metric_inbox")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_state")
        batch_op.create_index(
            "ix_jobs_state",
            ["state", "job_type", "run_after", "pool"],
            unique=False,
            **_partial(_UNFINISHED),
        )
        batch_op.create_index(
            "ix_jobs_failed", ["job_type", "pool"], unique=False, **_partial(_FAILED)
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_failed", **_partial(_FAILED))
        batch_op.drop_index("ix_jobs_state", **_partial(_UNFINISHED))
        batch_op.create_index("ix_jobs_state", ["state"], unique=False, **_partial(_UNFINISHED))
    op.drop_table("metric_inbox")
    op.drop_table("metric_minutes")
    op.drop_table("metric_totals")
