"""Pruning finished jobs, in bounded batches, without ever making an occurrence twice.

``prune_finished_batch`` deletes up to ``limit`` jobs of one job type that
have been in one terminal state (SUCCEEDED, FAILED, CANCELLED) for longer
than a given age, with their ``job_attempts`` rows and those attempts'
output (``job_attempt_output``), in the caller's transaction. Rules applied, in SQL:

* only finished rows are looked at, through ``ix_jobs_finished`` (state,
  job_type, finished_at; finished rows only), so a batch costs the rows it
  deletes, not the size of the table;
* on PostgreSQL the rows are taken ``FOR UPDATE SKIP LOCKED``: several
  executors prune side by side without waiting for one another, and a row is
  deleted only while this transaction holds it (the delete re-checks the
  state anyway); on SQLite the write lock of the transaction does the same;
* a scheduled job is pruned only once its schedule's cursor has passed its
  occurrence (the scheduler makes only instants after the cursor, so it can
  never make a pruned occurrence again), and the schedule's
  ``pruned_through`` is raised to the newest regular occurrence pruned,
  BEFORE the rows go: ``rota backfill`` takes the schedule row FOR SHARE and
  creates nothing at or before that watermark, so a backfill running at the
  same time either sees the job still there (its insert conflicts) or sees
  the new watermark. Manual runs (``rota trigger``, keys ``name@manual:...``)
  are never made again by anyone and do not move the watermark.

Ad-hoc jobs' ``dedup_key`` protects against a duplicate only while the job
exists: once pruned, the same key makes a new job (the README says so).

``fold_old_skips`` bounds the skip ledger: per (schedule, reason), ledger
rows recorded before a cutoff are folded into the oldest of them (counts
summed, range widened), except the newest row, which ``rota schedules`` shows;
totals stay exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Connection,
    Select,
    and_,
    bindparam,
    delete,
    exists,
    func,
    or_,
    select,
    text,
    update,
)

from rota.core.queries.sqlparams import is_pg
from rota.core.sqltime import UTCDateTime, now_or_db
from rota.core.states import TERMINAL, TERMINAL_SQL
from rota.core.tables import job_attempt_output, job_attempts, jobs, schedule_skips, schedules
from rota.core.timefmt import MANUAL_KEY_MARK, occurrence_key

PRUNE_BATCH = 1000
SKIP_LEDGER_GROUPS = 500  # (schedule, reason) groups folded per transaction

# The partial index's own predicate, written as it is (SQLite uses a partial
# index only when the query repeats its WHERE term).
_FINISHED = text(f"jobs.state IN {TERMINAL_SQL}")

# Any constant: one ledger fold at a time on PostgreSQL (others skip their turn).
_FOLD_LOCK_KEY = 0x726F7461_736B70  # "rota" "skp"


@dataclass(frozen=True)
class PruneRule:
    """Prune jobs of ``job_type`` that have been in ``state`` for longer than ``older_than``."""

    state: str
    job_type: str
    older_than: timedelta

    def __post_init__(self) -> None:
        if self.state not in TERMINAL:
            raise ValueError(f"only finished jobs are pruned, not {self.state}")
        if self.older_than < timedelta(0):
            raise ValueError("older_than must not be negative")


@dataclass(frozen=True)
class Pruned:
    jobs: int
    attempts: int
    watermarks: Mapping[str, datetime]  # schedule -> newest regular occurrence pruned


_LOOSE_SCAN = text(f"""
    WITH RECURSIVE t(job_type) AS (
        SELECT (SELECT job_type FROM jobs
                WHERE state IN {TERMINAL_SQL} AND state = :state
                ORDER BY job_type LIMIT 1)
        UNION ALL
        SELECT (SELECT j.job_type FROM jobs AS j
                WHERE j.state IN {TERMINAL_SQL} AND j.state = :state
                  AND j.job_type > t.job_type
                ORDER BY j.job_type LIMIT 1)
        FROM t WHERE t.job_type IS NOT NULL
    )
    SELECT job_type FROM t WHERE job_type IS NOT NULL
""")


def finished_job_types(conn: Connection, state: str) -> list[str]:
    """The job types that have finished jobs in ``state``: one index probe per type."""
    return [str(t) for t in conn.execute(_LOOSE_SCAN, {"state": state}).scalars()]


def _prunable(rule: PruneRule, now: datetime | None) -> Select[Any]:
    s = schedules.alias("s")
    could_fire_again = exists().where(
        s.c.name == jobs.c.schedule_name,
        or_(s.c.cursor_at.is_(None), s.c.cursor_at < jobs.c.scheduled_for),
    )
    return select(
        jobs.c.job_id, jobs.c.schedule_name, jobs.c.scheduled_for, jobs.c.dedup_key
    ).where(
        _FINISHED,
        jobs.c.state == rule.state,
        jobs.c.job_type == rule.job_type,
        jobs.c.finished_at < now_or_db(now, -rule.older_than.total_seconds()),
        or_(
            jobs.c.schedule_name.is_(None),
            jobs.c.scheduled_for.is_(None),
            jobs.c.dedup_key.like(f"%{MANUAL_KEY_MARK}%"),
            ~could_fire_again,
        ),
    )


def count_prunable(conn: Connection, rule: PruneRule, now: datetime | None = None) -> int:
    """How many jobs ``rule`` would prune now (``rota prune --dry-run``)."""
    sub = _prunable(rule, now).subquery()
    return int(conn.execute(select(func.count()).select_from(sub)).scalar_one())


def prune_finished_batch(
    conn: Connection, rule: PruneRule, *, limit: int = PRUNE_BATCH, now: datetime | None = None
) -> Pruned:
    """Delete up to ``limit`` jobs matched by ``rule``, oldest first; inside a transaction."""
    stmt = (
        _prunable(rule, now)
        .order_by(jobs.c.finished_at)
        .limit(limit)
        .with_for_update(skip_locked=True, of=jobs)
    )
    rows = conn.execute(stmt).all()
    if not rows:
        return Pruned(0, 0, {})
    marks: dict[str, datetime] = {}
    for r in rows:
        name, instant, key = r.schedule_name, r.scheduled_for, r.dedup_key
        regular = name is not None and instant is not None and key == occurrence_key(name, instant)
        if regular and (name not in marks or instant > marks[name]):
            marks[name] = instant
    raise_pruned_through(conn, marks)  # first: see the module docstring
    ids = [r[0] for r in rows]
    finished = select(jobs.c.job_id).where(jobs.c.job_id.in_(ids), _FINISHED)
    # The foreign keys would cascade; said here, the three deletes read as one.
    conn.execute(delete(job_attempt_output).where(job_attempt_output.c.job_id.in_(finished)))
    attempts = conn.execute(delete(job_attempts).where(job_attempts.c.job_id.in_(finished)))
    gone = conn.execute(delete(jobs).where(jobs.c.job_id.in_(ids), _FINISHED))
    return Pruned(int(gone.rowcount), int(attempts.rowcount), marks)


def raise_pruned_through(conn: Connection, marks: Mapping[str, datetime]) -> None:
    """Raise each schedule's ``pruned_through`` to the given instant (never lower it)."""
    if not marks:
        return
    through = bindparam("v_through", type_=UTCDateTime())
    conn.execute(
        update(schedules)
        .where(
            schedules.c.name == bindparam("v_name"),
            or_(schedules.c.pruned_through.is_(None), schedules.c.pruned_through < through),
        )
        .values(pruned_through=through),
        [{"v_name": n, "v_through": t} for n, t in sorted(marks.items())],
    )


def pruned_through_for_share(conn: Connection, name: str) -> datetime | None:
    """The schedule's watermark, its row held FOR SHARE until the transaction ends.

    A prune raises the watermark (an UPDATE of this row) before it deletes, so
    whoever inserts occurrences in this transaction cannot race it.
    """
    stmt = (
        select(schedules.c.pruned_through)
        .where(schedules.c.name == name)
        .with_for_update(read=True)
    )
    value = conn.execute(stmt).scalar_one_or_none()
    return value if isinstance(value, datetime) else None


def fold_old_skips(
    conn: Connection,
    older_than: timedelta,
    *,
    groups: int = SKIP_LEDGER_GROUPS,
    now: datetime | None = None,
) -> int:
    """Fold ledger rows recorded before now - ``older_than``; returns how many rows went.

    Per (schedule, reason) the newest row stays as it is; the older rows
    recorded before the cutoff become one row (the oldest, its count the sum,
    its range the union, its job_id cleared). Inside a transaction.
    """
    if (
        is_pg(conn)
        and not conn.execute(select(func.pg_try_advisory_xact_lock(_FOLD_LOCK_KEY))).scalar_one()
    ):
        return 0  # another executor is folding right now
    clock = conn.execute(select(now_or_db(now))).scalar_one()
    cutoff = clock - older_than
    k = schedule_skips
    ranked = select(
        k.c.skip_id,
        k.c.schedule_name,
        k.c.reason,
        k.c.count,
        k.c.first_instant,
        k.c.last_instant,
        k.c.recorded_at,
        func.row_number()
        .over(partition_by=(k.c.schedule_name, k.c.reason), order_by=k.c.skip_id.desc())
        .label("rn"),
    ).subquery()
    old = (
        select(
            ranked.c.schedule_name,
            ranked.c.reason,
            func.min(ranked.c.skip_id),
            func.max(ranked.c.skip_id),
            func.sum(ranked.c.count),
            func.min(ranked.c.first_instant),
            func.max(ranked.c.last_instant),
        )
        .where(ranked.c.rn > 1, ranked.c.recorded_at < bindparam("cutoff", cutoff, UTCDateTime()))
        .group_by(ranked.c.schedule_name, ranked.c.reason)
        .having(func.count() > 1)
        .limit(groups)
    )
    removed = 0
    for name, reason, keep_id, last_id, total, first, last in conn.execute(old).all():
        conn.execute(
            update(k)
            .where(k.c.skip_id == keep_id)
            .values(count=total, first_instant=first, last_instant=last, job_id=None)
        )
        result = conn.execute(
            delete(k).where(
                and_(
                    k.c.schedule_name == name,
                    k.c.reason == reason,
                    k.c.skip_id > keep_id,
                    k.c.skip_id <= last_id,
                    k.c.recorded_at < bindparam("cutoff", cutoff, UTCDateTime()),
                )
            )
        )
        removed += int(result.rowcount)
    return removed


def skip_ledger_rows(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(schedule_skips)).scalar_one())
