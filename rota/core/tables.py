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
    ForeignKeyConstraint,
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

from rota.core.operator_notes import OperatorAction
from rota.core.sqltime import UTCDateTime, db_now
from rota.core.states import (
    ALL_STATES,
    CLAIMABLE_SQL,
    LEASED_SQL,
    TERMINAL_SQL,
    JobState,
    LateReason,
    SkipReason,
    WorkerKind,
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
        f"(state IN {LEASED_SQL}) = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)",
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
    # ...and waiting jobs only (0018): finished ones are most rows, and leased
    # ones are at most as many as the executors' slots, read through
    # ix_jobs_leased. (0008) wide enough that the rota_jobs gauge of waiting
    # jobs is counted from the index alone, and the oldest waiting job of a type
    # (max_queue_age) is one index probe. A claim's RUNNING row version enters
    # no index but the primary key and ix_jobs_leased: every index entry a job
    # writes is PostgreSQL CPU of every job.
    Index(
        "ix_jobs_state",
        "state",
        "job_type",
        "run_after",
        "pool",
        postgresql_where=text(f"state IN {CLAIMABLE_SQL}"),
        sqlite_where=text(f"state IN {CLAIMABLE_SQL}"),
    ),
    # FAILED jobs wait for a person: the gauge, counted from this index alone (0008)...
    Index(
        "ix_jobs_failed",
        "job_type",
        "pool",
        postgresql_where=text("state = 'FAILED'"),
        sqlite_where=text("state = 'FAILED'"),
    ),
    # ...and the dashboard's last to fail, the end of this one (0010). Two narrow
    # indexes, not one wide: the count reads every entry, on each scrape.
    Index(
        "ix_jobs_failed_recent",
        "finished_at",
        "job_id",
        postgresql_where=text("state = 'FAILED'"),
        sqlite_where=text("state = 'FAILED'"),
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
    # `rota jobs`, newest first (0009, job_id 0010): the newest finished jobs of a
    # state are the end of this index's range, whatever the size of the history,
    # in the listing's exact order (jobs made in one transaction share created_at).
    Index(
        "ix_jobs_history",
        "state",
        "created_at",
        "job_id",
        postgresql_where=text(f"state IN {TERMINAL_SQL}"),
        sqlite_where=text(f"state IN {TERMINAL_SQL}"),
    ),
    # ...and the newest waiting jobs of a state the end of this one's (0010,
    # waiting only since 0018): the listing reads a page of them, not the whole
    # queue, however deep it is. Leased jobs are listed from ix_jobs_leased.
    Index(
        "ix_jobs_waiting_created",
        "state",
        "created_at",
        "job_id",
        postgresql_where=text(f"state IN {CLAIMABLE_SQL}"),
        sqlite_where=text(f"state IN {CLAIMABLE_SQL}"),
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
    # No foreign key to jobs (0018): its check ran for every claim, 7% of the
    # PostgreSQL CPU of a job, and guarded nothing the claim does not: an
    # attempt row is only ever written from its job's row, in the statement
    # that claims it. Pruning deletes a job's attempts with the job
    # (``jobs_prune``); a job deleted by hand leaves its attempts behind.
    Column("job_id", Uuid(), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("lease_generation", BigInteger, nullable=False),
    Column("worker_id", String(200), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("ended_at", UTCDateTime()),
    Column("outcome", String(20)),
    Column("error_code", String(200)),
    Column("error_detail", Text),
    Index("ux_job_attempts_generation", "job_id", "lease_generation", unique=True),
    # Half of each page is left for closing its attempts in place (0011).
    postgresql_with={"fillfactor": 50},
)

# What one attempt's handler wrote (0016): the tail of a ``command:``'s stdout and
# stderr, the log records of a Python handler. A row of its own, written with the
# attempt's lease renewals while it runs and with its outcome, and only when there
# was output: the attempt row keeps its
# narrow width (it is rewritten in place when the attempt closes), and an attempt
# that wrote nothing costs nothing here. Rows go with their attempt (CASCADE).
job_attempt_output = Table(
    "job_attempt_output",
    metadata,
    Column("job_id", Uuid(), primary_key=True),
    Column("lease_generation", BigInteger, primary_key=True),
    # At most ATTEMPT_OUTPUT_MAX_BYTES bytes of UTF-8 (rota.core.storable).
    Column("output", Text, nullable=False),
    # How many bytes were written before the tail kept here.
    Column("dropped_bytes", BigInteger, nullable=False, server_default="0"),
    ForeignKeyConstraint(
        ["job_id", "lease_generation"],
        ["job_attempts.job_id", "job_attempts.lease_generation"],
        ondelete="CASCADE",
    ),
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
    # Why the scheduler set this schedule aside (it could not evaluate or
    # insert it); null once it fires again or a corrected `rota apply`.
    Column("set_aside_reason", Text),
    # misfire: coalesce, a long range counted over several transactions: its
    # first instant and the occurrences counted so far, until the one job is made.
    Column("coalesce_from", UTCDateTime()),
    Column("coalesce_count", BigInteger, nullable=False, server_default="0"),
    # The newest regular occurrence whose job was pruned (0009): backfill creates
    # nothing at or before it, so a pruned occurrence is never made again.
    Column("pruned_through", UTCDateTime()),
    # Deadlines (0013): every occurrence at or before ``deadlines_checked_through``
    # was judged on time or late; the next judgment is due at ``deadline_check_at``
    # (the next occurrence's instant + the deadline). Both null: no deadline.
    Column("deadlines_checked_through", UTCDateTime()),
    Column("deadline_check_at", UTCDateTime()),
    Index(
        "ix_schedules_deadline_due",
        "deadline_check_at",
        postgresql_where=text("deadline_check_at IS NOT NULL"),
        sqlite_where=text("deadline_check_at IS NOT NULL"),
    ),
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
    CheckConstraint(f"reason IN {sql_in(SkipReason)}", name="reason_known"),
    Index("ix_schedule_skips_schedule", "schedule_name", "recorded_at"),
    # (0013) the deadline check finds the ranges that cover an instant.
    Index("ix_schedule_skips_schedule_last_instant", "schedule_name", "last_instant"),
)

# Late occurrences (0013): one row per occurrence of a schedule with a deadline
# that was not SUCCEEDED by it. Unique per (schedule, instant): every replica
# may judge the same occurrence, one row is recorded.
late_occurrences = Table(
    "late_occurrences",
    metadata,
    Column(
        "late_id",
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
    Column("instant", UTCDateTime(), nullable=False),  # the nominal instant
    Column("deadline", UTCDateTime(), nullable=False),  # instant + the schedule's deadline
    Column("reason", String(40), nullable=False),
    Column("job_id", Uuid()),  # the occurrence's job (or the one that covers it), if any
    Column("detected_at", UTCDateTime(), nullable=False),
    CheckConstraint(f"reason IN {sql_in(LateReason)}", name="reason_known"),
    Index("ux_late_occurrences_schedule_instant", "schedule_name", "instant", unique=True),
    Index("ix_late_occurrences_instant", "instant"),
)

# The worker registry (0006): one row per running scheduler or executor process,
# refreshed once per interval; silent for GONE_AFTER_INTERVALS intervals = gone.
workers = Table(
    "workers",
    metadata,
    Column("worker_id", String(200), primary_key=True),
    Column("kind", String(20), nullable=False),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("version", String(50), nullable=False),
    Column("pools", JSON),  # a list of pool names; null for a scheduler
    Column("concurrency", Integer),  # null for a scheduler
    Column("started_at", UTCDateTime(), nullable=False),
    Column("last_seen_at", UTCDateTime(), nullable=False),
    Column("interval_seconds", Float, nullable=False),
    # (0014) The job types whose handler this executor cannot import (a list of
    # names, rewritten with every refresh); null for a scheduler.
    Column("unavailable_job_types", JSON),
    CheckConstraint(f"kind IN {sql_in(WorkerKind)}", name="kind_known"),
    CheckConstraint("interval_seconds > 0", name="interval_positive"),
)

# Operations metrics (0008): cumulative buckets per (metric, labels, le), added to
# by the processes that observe them (rota.core.metric_deltas), and the same deltas
# per minute for the dashboard's last hour. A counter is one bucket, le "+Inf".
metric_totals = Table(
    "metric_totals",
    metadata,
    Column("metric", String(100), primary_key=True),
    Column("labels", String(1000), primary_key=True),  # canonical JSON of the label values
    Column("le", String(32), primary_key=True),  # the bucket's upper bound, as exposed
    Column("n", BigInteger, nullable=False),  # observations in this bucket (not cumulative)
    Column("total", Float, nullable=False),  # the sum of those observations
    Column("updated_at", UTCDateTime(), nullable=False),
)

metric_minutes = Table(
    "metric_minutes",
    metadata,
    Column("minute", UTCDateTime(), primary_key=True),
    Column("metric", String(100), primary_key=True),
    Column("labels", String(1000), primary_key=True),
    Column("le", String(32), primary_key=True),
    Column("n", BigInteger, nullable=False),
    Column("total", Float, nullable=False),
)

# Observations written inside another transaction (a cancel, a skipped occurrence):
# appended here, never upserted there, so they take no lock another transaction
# could wait on; the flushers fold them into the two tables above.
metric_inbox = Table(
    "metric_inbox",
    metadata,
    Column(
        "inbox_id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    Column("minute", UTCDateTime(), nullable=False),
    Column("metric", String(100), nullable=False),
    Column("labels", String(1000), nullable=False),
    Column("le", String(32), nullable=False),
    Column("n", BigInteger, nullable=False),
    Column("total", Float, nullable=False),
)

# The newest outcome of each schedule (0014): written by the statement that moves
# one of its jobs to a terminal state, in that statement or its transaction
# (rota.core.queries.schedule_outcomes), so /metrics and /schedules read one row
# per schedule instead of the job history, and pruning the jobs keeps it. No
# foreign key: its check would lock the schedule's row against the scheduler's
# tick at every outcome.
schedule_outcomes = Table(
    "schedule_outcomes",
    metadata,
    Column("schedule_name", String(200), primary_key=True),
    # The newest occurrence (by its scheduled instant) that reached a terminal state...
    Column("last_state", String(20), nullable=False),
    Column("last_instant", UTCDateTime(), nullable=False),
    Column("last_finished_at", UTCDateTime(), nullable=False),
    # ...and the newest one that SUCCEEDED (null: none yet).
    Column("last_success_instant", UTCDateTime()),
    CheckConstraint(f"last_state IN {TERMINAL_SQL}", name="state_terminal"),
)

# Who cancelled, replayed, paused or resumed what, when and why (0007). Not
# columns on jobs: every claim and heartbeat rewrites a job's row, and a
# reason carried there would be copied each time; and a job replayed after a
# cancel keeps both notes. Rows go with their job or schedule (CASCADE).
# One target per row (``rota.core.operator_notes.TargetKind``): exactly one
# of job_id, schedule_name and job_filter is set.
_ONE_TARGET = " + ".join(
    f"(CASE WHEN {column} IS NULL THEN 0 ELSE 1 END)"
    for column in ("job_id", "schedule_name", "job_filter")
)

operator_actions = Table(
    "operator_actions",
    metadata,
    Column(
        "action_id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    # A job's actions go with the job (retention prunes both); a prune's own row
    # names no job, so it stays.
    Column("job_id", Uuid(), ForeignKey("jobs.job_id", ondelete="CASCADE")),
    Column("schedule_name", String(200), ForeignKey("schedules.name", ondelete="CASCADE")),
    Column("job_filter", Text),  # the jobs a prune chose, in words
    Column("action", String(20), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("reason", Text),
    Column("detail", Text),  # what the action covered: a backfill's range, a trigger's job
    Column("at", UTCDateTime(), nullable=False),
    CheckConstraint(f"action IN {sql_in(OperatorAction)}", name="action_known"),
    CheckConstraint(f"{_ONE_TARGET} = 1", name="one_target"),
    Index(
        "ix_operator_actions_job",
        "job_id",
        postgresql_where=text("job_id IS NOT NULL"),
        sqlite_where=text("job_id IS NOT NULL"),
    ),
    Index(
        "ix_operator_actions_schedule",
        "schedule_name",
        "action_id",
        postgresql_where=text("schedule_name IS NOT NULL"),
        sqlite_where=text("schedule_name IS NOT NULL"),
    ),
    # The audit, newest first (GET /audit, rota audit), whole or by actor.
    Index("ix_operator_actions_at", "at", "action_id"),
    Index("ix_operator_actions_actor", "actor", "at", "action_id"),
)

__all__ = [
    "db_now",
    "job_attempt_output",
    "job_attempts",
    "job_types",
    "jobs",
    "metadata",
    "metric_inbox",
    "metric_minutes",
    "metric_totals",
    "operator_actions",
    "schedule_outcomes",
    "schedule_skips",
    "schedules",
    "workers",
]

# Webhook targets of the schedule file's ``notifications:`` section, stored by
# `rota apply` (0015): executors enqueue deliveries from these rows, never from
# the file. ``definition`` is ``NotificationTarget.to_json()``: the secret's
# environment variable's name, never the secret.
notification_targets = Table(
    "notification_targets",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("definition", JSON, nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)
