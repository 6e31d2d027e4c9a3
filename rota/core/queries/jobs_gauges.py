"""Counting what waits and what runs, from partial indexes: the gauges and backpressure.

Every statement here reads only rows in a partial index (unfinished, claimable,
leased or FAILED jobs), never the history of finished jobs, and writes its
state predicate exactly as the index does (``state IN ('QUEUED', ...)``): SQLite
uses a partial index only when the query repeats its WHERE term.

* ``unfinished_by_state``: unfinished jobs per (state, job type, pool): the
  waiting ones counted from ``ix_jobs_state`` alone, the leased ones (as many
  as the executors' slots) through ``ix_jobs_leased``.
* ``failed_by_type``: FAILED jobs per (job type, pool), from ``ix_jobs_failed``
  alone, and ``failed_at_most``: how many there are, counted up to a cap. FAILED
  jobs stay until a person replays them or retention prunes them, so these are
  the only counts here that grow with the history kept (``rota.api.failed_counts``
  bounds how often the full count runs).
* ``oldest_due_by_pool``: per pool, the ``run_after`` of the job that has been
  due and waiting longest: two probes of ``ix_jobs_state`` per stored job type,
  counted in the pool the job type names (a job left in an older pool after a
  change of its type's pool counts in the new one).
* ``stuck_by_pool``: leased jobs whose lease expired and no sweeper took back yet.
* ``oldest_running_by_pool``: per pool, the start of the longest-running attempt
  of the leased jobs (as many as the executors' slots).
* ``queue_pressure``: one job type's waiting depth (counted up to a cap, so the
  cost is bounded by the limit checked) and its oldest due job (two index probes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache

from sqlalchemy import Connection, TextClause, text

from rota.core.queries.jobs_read import database_now
from rota.core.queries.sqlparams import bind_now, qualified
from rota.core.sqltime import read_utc
from rota.core.states import CLAIMABLE_SQL, LEASED_SQL, JobState

_UNFINISHED_BY_STATE = text(f"""
    SELECT state, job_type, pool, count(*) AS n FROM jobs
    WHERE state IN {CLAIMABLE_SQL}
    GROUP BY state, job_type, pool
    UNION ALL
    SELECT state, job_type, pool, count(*) AS n FROM jobs
    WHERE state IN {LEASED_SQL}
    GROUP BY state, job_type, pool
""")

_FAILED_BY_TYPE = text("""
    SELECT job_type, pool, count(*) AS n FROM jobs
    WHERE state = 'FAILED'
    GROUP BY job_type, pool
""")

_FAILED_UP_TO = text("""
    SELECT count(*) FROM (SELECT 1 FROM jobs WHERE state = 'FAILED' LIMIT :cap) AS failed
""")


def _first_waiting(state: str) -> str:
    """The oldest ``run_after`` of one waiting state and job type: the first index entry."""
    return f"""(SELECT min(j.run_after) FROM jobs j
                WHERE j.state IN {CLAIMABLE_SQL} AND j.state = '{state}'
                  AND j.job_type = t.name)"""


# Two index probes per job type (not a scan of the waiting jobs), attributed to
# the job type's pool.
_OLDEST_DUE = text(f"""
    SELECT pool, min(oldest) AS oldest FROM (
        SELECT t.pool AS pool, {_first_waiting("QUEUED")} AS oldest FROM job_types t
        UNION ALL
        SELECT t.pool AS pool, {_first_waiting("RETRY_WAIT")} AS oldest FROM job_types t
    ) AS firsts
    WHERE oldest <= :now
    GROUP BY pool
""")

_STUCK = text(f"""
    SELECT pool, count(*) AS n FROM jobs
    WHERE state IN {LEASED_SQL} AND lease_expires_at <= :now
    GROUP BY pool
""")

_OLDEST_RUNNING = text(f"""
    SELECT pool, min(started_at) AS oldest FROM jobs
    WHERE state IN {LEASED_SQL} AND started_at IS NOT NULL
    GROUP BY pool
""")

# The backpressure statements run on the producer's own connection, which may
# not search rota's schema: they name the table in it (``schema``).


@cache
def _depth(schema: str | None) -> TextClause:
    """Waiting jobs of one type, counted up to :cap (the index range is read no further)."""
    return text(f"""
        SELECT count(*) FROM (
            SELECT 1 FROM {qualified("jobs", schema)}
            WHERE state IN {CLAIMABLE_SQL} AND job_type = :job_type
            LIMIT :cap
        ) AS waiting
    """)


@cache
def _oldest_of_type(schema: str | None) -> TextClause:
    """The first entry of (state, job_type, run_after) for one waiting state: an index probe."""
    return text(f"""
        SELECT min(run_after) FROM {qualified("jobs", schema)}
        WHERE state IN {CLAIMABLE_SQL} AND state = :state AND job_type = :job_type
    """)


@dataclass(frozen=True)
class StateCount:
    state: str
    job_type: str
    pool: str
    count: int


def unfinished_by_state(conn: Connection) -> list[StateCount]:
    return [
        StateCount(r.state, r.job_type, r.pool, int(r.n))
        for r in conn.execute(_UNFINISHED_BY_STATE).all()
    ]


def failed_by_type(conn: Connection) -> list[StateCount]:
    """Every FAILED job, counted per (job type, pool): a read of all of ``ix_jobs_failed``."""
    failed = JobState.FAILED.value
    return [
        StateCount(failed, r.job_type, r.pool, int(r.n))
        for r in conn.execute(_FAILED_BY_TYPE).all()
    ]


def failed_at_most(conn: Connection, cap: int) -> int:
    """How many jobs are FAILED, counted no further than ``cap`` index entries."""
    return int(conn.execute(_FAILED_UP_TO, {"cap": cap}).scalar_one())


def oldest_due_by_pool(conn: Connection, now: datetime) -> dict[str, datetime]:
    rows = conn.execute(_OLDEST_DUE, {"now": bind_now(conn, now)}).all()
    out: dict[str, datetime] = {}
    for pool, oldest in rows:
        instant = read_utc(oldest)
        if instant is not None:
            out[pool] = instant
    return out


def stuck_by_pool(conn: Connection, now: datetime) -> dict[str, int]:
    return {pool: int(n) for pool, n in conn.execute(_STUCK, {"now": bind_now(conn, now)}).all()}


def oldest_running_by_pool(conn: Connection) -> dict[str, datetime]:
    """Per pool, when the attempt running longest started (pools with none: absent)."""
    out: dict[str, datetime] = {}
    for pool, oldest in conn.execute(_OLDEST_RUNNING).all():
        instant = read_utc(oldest)
        if instant is not None:
            out[pool] = instant
    return out


@dataclass(frozen=True)
class QueuePressure:
    depth: int  # waiting jobs (QUEUED or RETRY_WAIT), counted up to the cap asked for
    oldest_due: datetime | None  # run_after of the oldest waiting job, if it is due
    now: datetime  # the database clock

    @property
    def oldest_age_seconds(self) -> float:
        if self.oldest_due is None:
            return 0.0
        return max(0.0, (self.now - self.oldest_due).total_seconds())


def queue_pressure(
    conn: Connection,
    job_type: str,
    *,
    count_cap: int | None,
    age: bool,
    schema: str | None = None,
) -> QueuePressure:
    """What backpressure needs of one job type: depth up to ``count_cap``, the oldest due job."""
    now = database_now(conn)
    depth = 0
    if count_cap is not None:
        params = {"job_type": job_type, "cap": count_cap}
        depth = int(conn.execute(_depth(schema), params).scalar_one())
    oldest: datetime | None = None
    if age:
        for state in (JobState.QUEUED, JobState.RETRY_WAIT):
            value = read_utc(
                conn.execute(
                    _oldest_of_type(schema), {"state": state.value, "job_type": job_type}
                ).scalar_one_or_none()
            )
            if value is not None and value <= now and (oldest is None or value < oldest):
                oldest = value
    return QueuePressure(depth, oldest, now)


@cache
def _overdue(schema: str | None) -> TextClause:
    """Due waiting jobs of one type that became due before :before, counted up to :cap."""
    return text(f"""
        SELECT count(*) FROM (
            SELECT 1 FROM {qualified("jobs", schema)}
            WHERE state IN {CLAIMABLE_SQL} AND job_type = :job_type
              AND run_after < :before
            LIMIT :cap
        ) AS overdue
    """)


def count_overdue(
    conn: Connection, job_type: str, before: datetime, cap: int, *, schema: str | None = None
) -> int:
    """Waiting jobs of ``job_type`` due before ``before`` (up to ``cap``): the age backlog."""
    params = {"job_type": job_type, "before": bind_now(conn, before), "cap": cap}
    return int(conn.execute(_overdue(schema), params).scalar_one())
