"""The tables, as SQLAlchemy Core metadata.

Alembic migrations create them (``migrations/versions``); a test compares the
migrated database with this metadata on both backends, so the two cannot drift.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    Uuid,
    false,
    text,
    true,
)

from rota.shared.sqltime import UTCDateTime, db_now
from rota.shared.states import (
    ALL_STATES,
    CLAIMABLE_SQL,
    LEASED_SQL,
    TERMINAL_SQL,
    UNFINISHED_SQL,
    JobState,
    SkipReason,
    sql_in,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


jobs = Table(
    "jobs",
    metadata,
    Column("job_id", Uuid(), primary_key=True),
    Column("job_type", String(200), nullable=False),
    Column("pool", String(100), nullable=False, server_default="default"),
    Column("state", String(20), nullable=False, server_default=JobState.QUEUED.value),
    Column("priority", Integer, nullable=False, server_default="0"),
    Column("tenant", String(200)),
    Column("concurrency_key", String(200)),
    Column("attempt_count", Integer, nullable=False, server_default="0"),
    Column("max_attempts", Integer, nullable=False, server_default="5"),
    Column("run_after", UTCDateTime(), nullable=False),
    Column("lease_owner", String(200)),
    Column("lease_expires_at", UTCDateTime()),
    Column("lease_generation", BigInteger, nullable=False, server_default="0"),
    Column("lease_seconds", Float, nullable=False, server_default="60"),
    Column("heartbeat_at", UTCDateTime()),
    Column("idempotent", Boolean, nullable=False, server_default=true()),
    Column("needs_reconcile", Boolean, nullable=False, server_default=false()),
    Column("payload_ref", Text),
    Column("args", JSON),
    Column("result_ref", Text),
    Column("last_error_code", String(200)),
    Column("last_error_detail", Text),
    Column("progress_stage", String(200)),
    Column("progress_done", BigInteger),
    Column("progress_total", BigInteger),
    Column("dedup_key", String(400)),
    Column("schedule_name", String(200)),
    Column("scheduled_for", UTCDateTime()),
    Column("covers_from", UTCDateTime()),
    Column("covers_count", Integer),
    Column("started_at", UTCDateTime()),
    Column("finished_at", UTCDateTime()),
    Column("cancel_requested_at", UTCDateTime()),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    CheckConstraint(f"state IN {sql_in(ALL_STATES)}", name="state_known"),
    CheckConstraint(
        f"(state IN {LEASED_SQL}) = "
        "(lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)",
        name="lease_iff_running",
    ),
    CheckConstraint(
        "attempt_count >= 0 AND attempt_count <= max_attempts", name="attempts_bounded"
    ),
    CheckConstraint("max_attempts >= 1", name="max_attempts_positive"),
    Index(
        "ix_jobs_claimable",
        "pool",
        "priority",
        "run_after",
        "created_at",
        postgresql_where=text(f"state IN {CLAIMABLE_SQL}"),
        sqlite_where=text(f"state IN {CLAIMABLE_SQL}"),
    ),
    Index(
        "ux_jobs_dedup",
        "job_type",
        "dedup_key",
        unique=True,
        postgresql_where=text("dedup_key IS NOT NULL"),
        sqlite_where=text("dedup_key IS NOT NULL"),
    ),
    Index(
        "ix_jobs_leased",
        "lease_owner",
        postgresql_where=text(f"state IN {LEASED_SQL}"),
        sqlite_where=text(f"state IN {LEASED_SQL}"),
    ),
    # Partial (0003): fewer index entries per job write. Scheduled jobs only...
    Index(
        "ix_jobs_schedule",
        "schedule_name",
        "scheduled_for",
        postgresql_where=text("schedule_name IS NOT NULL"),
        sqlite_where=text("schedule_name IS NOT NULL"),
    ),
    # ...and unfinished jobs only (finished ones are most rows, rarely looked up by state).
    Index(
        "ix_jobs_state",
        "state",
        postgresql_where=text(f"state IN {UNFINISHED_SQL}"),
        sqlite_where=text(f"state IN {UNFINISHED_SQL}"),
    ),
    # "Does a keyed job wait?" before a lock-free claim: an index probe (0003).
    Index(
        "ix_jobs_claimable_keyed",
        "pool",
        "run_after",
        postgresql_where=text(f"state IN {CLAIMABLE_SQL} AND concurrency_key IS NOT NULL"),
        sqlite_where=text(f"state IN {CLAIMABLE_SQL} AND concurrency_key IS NOT NULL"),
    ),
    # At most one leased job per concurrency key; the claim checks it too (0002).
    Index(
        "ux_jobs_leased_concurrency_key",
        "concurrency_key",
        unique=True,
        postgresql_where=text(f"state IN {LEASED_SQL} AND concurrency_key IS NOT NULL"),
        sqlite_where=text(f"state IN {LEASED_SQL} AND concurrency_key IS NOT NULL"),
    ),
    # Pruning (0009): "finished before T, in state S, of type X" is one range of
    # this index. Finished rows only: a job enters it once, at its outcome.
    Index(
        "ix_jobs_finished",
        "state",
        "job_type",
        "finished_at",
        postgresql_where=text(f"state IN {TERMINAL_SQL}"),
        sqlite_where=text(f"state IN {TERMINAL_SQL}"),
    ),
    # `rota jobs`, newest first (0009): the newest finished jobs of a state are
    # the end of this index's range, whatever the size of the history.
    Index(
        "ix_jobs_history",
        "state",
        "created_at",
        postgresql_where=text(f"state IN {TERMINAL_SQL}"),
        sqlite_where=text(f"state IN {TERMINAL_SQL}"),
    ),
    Index(
        "ix_jobs_leased_tenant",
        "tenant",
        postgresql_where=text(f"state IN {LEASED_SQL} AND tenant IS NOT NULL"),
        sqlite_where=text(f"state IN {LEASED_SQL} AND tenant IS NOT NULL"),
    ),
)

job_attempts = Table(
    "job_attempts",
    metadata,
    Column(
        "attempt_id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    Column("job_id", Uuid(), ForeignKey("jobs.job_id", ondelete="CASCADE"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("lease_generation", BigInteger, nullable=False),
    Column("worker_id", String(200), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("ended_at", UTCDateTime()),
    Column("outcome", String(20)),
    Column("error_code", String(200)),
    Column("error_detail", Text),
    Index("ux_job_attempts_generation", "job_id", "lease_generation", unique=True),
)

job_types = Table(
    "job_types",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("pool", String(100), nullable=False, server_default="default"),
    Column("definition", JSON, nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)

schedules = Table(
    "schedules",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("job_type", String(200), nullable=False),
    Column("paused", Boolean, nullable=False, server_default=false()),
    Column("removed", Boolean, nullable=False, server_default=false()),
    Column("next_fire_at", UTCDateTime()),
    Column("cursor_at", UTCDateTime()),
    Column("last_fire_at", UTCDateTime()),
    Column("last_job_id", Uuid()),
    Column("definition", JSON, nullable=False),
    Column("definition_hash", String(64), nullable=False),
    Column("paused_at", UTCDateTime()),
    Column("skipped_count", BigInteger, nullable=False, server_default="0"),
    Column("coalesced_count", BigInteger, nullable=False, server_default="0"),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    # The newest regular occurrence whose job was pruned (0009): backfill creates
    # nothing at or before it, so a pruned occurrence is never made again.
    Column("pruned_through", UTCDateTime()),
    Index(
        "ix_schedules_due",
        "next_fire_at",
        postgresql_where=text("NOT paused AND NOT removed AND next_fire_at IS NOT NULL"),
        sqlite_where=text("NOT paused AND NOT removed AND next_fire_at IS NOT NULL"),
    ),
)

schedule_skips = Table(
    "schedule_skips",
    metadata,
    Column(
        "skip_id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    Column(
        "schedule_name",
        String(200),
        ForeignKey("schedules.name", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("reason", String(20), nullable=False),
    Column("first_instant", UTCDateTime(), nullable=False),
    Column("last_instant", UTCDateTime(), nullable=False),
    Column("count", BigInteger, nullable=False),
    Column("job_id", Uuid()),
    Column("recorded_at", UTCDateTime(), nullable=False),
    CheckConstraint(
        f"reason IN {sql_in(SkipReason)}", name="reason_known"
    ),
    Index("ix_schedule_skips_schedule", "schedule_name", "recorded_at"),
)

__all__ = ["db_now", "job_attempts", "job_types", "jobs", "metadata", "schedule_skips", "schedules"]
