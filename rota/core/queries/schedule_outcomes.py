"""Statements on ``schedule_outcomes``: each schedule's newest outcome and newest success.

The row is kept by the statements that move a scheduled job to a terminal
state, never recomputed from the jobs, so reading the health of every
schedule (``GET /metrics``, ``GET /schedules``) costs one row per schedule
whatever the size of the history, and pruning finished jobs forgets nothing:

* ``pg_record_outcomes(source)``: a data-modifying CTE for the PostgreSQL
  statements that end jobs in one autocommit statement (the outcome batch,
  the sweeper). It reads the CTE ``source``, whose rows are the jobs the
  statement changed (``schedule_name``, ``scheduled_for``, ``state``,
  ``finished_at``);
* ``record_outcomes_of(conn, job_ids)``: the same upsert as a statement of its
  own, reading those jobs by id, for a transaction of several statements
  (SQLite's outcome batch and sweep, an operator's cancel on either database).

Rule, per schedule, against the row as it is: ``last_*`` move to the ended
occurrence with the latest scheduled instant (at an equal instant, the newer
write: a replayed occurrence's new outcome replaces its old one), and
``last_success_instant`` to the latest SUCCEEDED one. An older occurrence
ending late (a retry, a backfill) changes neither. Jobs without a schedule or
not in a terminal state are left out.

The rows are upserted in schedule-name order, after the statement has locked
its jobs: two batches ending jobs of the same schedules lock their rows in the
same order and never deadlock.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from sqlalchemy import Connection, TextClause, text

from rota.core.queries.sqlparams import is_pg
from rota.core.sqltime import read_utc
from rota.core.states import TERMINAL_SQL, JobState

_NEWER = "excluded.last_instant >= schedule_outcomes.last_instant"


def _upsert(source: str) -> str:
    """The upsert of the newest ended occurrence per schedule among the rows of ``source``."""
    return f"""
        INSERT INTO schedule_outcomes
            (schedule_name, last_state, last_instant, last_finished_at, last_success_instant)
        SELECT schedule_name, state, scheduled_for, finished_at, success FROM (
            SELECT e.schedule_name, e.state, e.scheduled_for, e.finished_at,
                   row_number() OVER (PARTITION BY e.schedule_name
                                      ORDER BY e.scheduled_for DESC, e.finished_at DESC) AS n,
                   max(CASE WHEN e.state = 'SUCCEEDED' THEN e.scheduled_for END)
                       OVER (PARTITION BY e.schedule_name) AS success
            FROM {source} AS e
            WHERE e.schedule_name IS NOT NULL AND e.scheduled_for IS NOT NULL
              AND e.finished_at IS NOT NULL AND e.state IN {TERMINAL_SQL}
        ) AS newest
        WHERE n = 1
        ORDER BY schedule_name
        ON CONFLICT (schedule_name) DO UPDATE SET
            last_state = CASE WHEN {_NEWER} THEN excluded.last_state
                              ELSE schedule_outcomes.last_state END,
            last_finished_at = CASE WHEN {_NEWER} THEN excluded.last_finished_at
                                    ELSE schedule_outcomes.last_finished_at END,
            last_instant = CASE WHEN {_NEWER} THEN excluded.last_instant
                                ELSE schedule_outcomes.last_instant END,
            last_success_instant = CASE
                WHEN schedule_outcomes.last_success_instant IS NULL
                  OR excluded.last_success_instant > schedule_outcomes.last_success_instant
                THEN coalesce(excluded.last_success_instant,
                              schedule_outcomes.last_success_instant)
                ELSE schedule_outcomes.last_success_instant END"""


def pg_record_outcomes(source: str) -> str:
    """``recorded AS (...)``: the CTE to add to a PostgreSQL statement that ends jobs."""
    return f"recorded AS ({_upsert(source)}\n        )"


@cache
def _by_id(pg: bool) -> TextClause:
    ids = (
        "job_id = ANY(CAST(:ids AS uuid[]))"
        if pg
        else "job_id IN (SELECT value FROM json_each(:ids))"
    )
    source = f"""(SELECT schedule_name, scheduled_for, state, finished_at FROM jobs
                  WHERE {ids})"""
    return text(_upsert(source))


def record_outcomes_of(conn: Connection, job_ids: Sequence[uuid.UUID]) -> None:
    """Record the outcome of those of ``job_ids`` that ended, in the caller's transaction."""
    if not job_ids:
        return
    if is_pg(conn):
        conn.execute(_by_id(True), {"ids": list(job_ids)})
    else:
        conn.execute(_by_id(False), {"ids": "[" + ",".join(f'"{i.hex}"' for i in job_ids) + "]"})


# -- reads --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScheduleOutcome:
    """A schedule's newest ended occurrence, and its newest success."""

    state: JobState
    instant: datetime  # the occurrence's scheduled instant
    finished_at: datetime
    success_instant: datetime | None


_ALL = text("""
    SELECT schedule_name, last_state, last_instant, last_finished_at, last_success_instant
    FROM schedule_outcomes
""")
_ONE = text(f"{_ALL.text} WHERE schedule_name = :name")


def _outcome(r: Sequence[object]) -> ScheduleOutcome:
    instant, finished = read_utc(r[2]), read_utc(r[3])
    assert instant is not None and finished is not None
    return ScheduleOutcome(JobState(str(r[1])), instant, finished, read_utc(r[4]))


def schedule_outcomes(conn: Connection) -> dict[str, ScheduleOutcome]:
    """Every schedule's outcome row, by schedule name (schedules that never ended a job: none)."""
    return {str(r[0]): _outcome(r) for r in conn.execute(_ALL).all()}


def outcome_of_schedule(conn: Connection, name: str) -> ScheduleOutcome | None:
    row = conn.execute(_ONE, {"name": name}).first()
    return None if row is None else _outcome(row)


# What ``GET /metrics`` reports of one schedule, instants as Unix seconds in
# text, written into the exposition as they come:
# (name, paused 1/0, set aside 1/0, next fire, last state, last instant, last success).
Seconds = str | None
ScheduleHealth = tuple[str, int, int, Seconds, str | None, Seconds, Seconds]


def _epoch(column: str, pg: bool) -> str:
    """``column`` as Unix seconds, computed by the database (a scrape reads 300,000)."""
    if pg:  # date_part is a double (extract's numeric took twice as long), sent as its
        # shortest exact text: a scrape writes it as it comes, making no float of it
        return f"CAST(date_part('epoch', {column}) AS text)"
    # Stored as 'YYYY-MM-DD HH:MM:SS.ffffff': the whole seconds, then the fraction's digits.
    return f"(strftime('%s', {column}) || substr({column}, 20))"


@cache
def _health(pg: bool) -> str:
    return f"""
        SELECT s.name,
               CASE WHEN s.paused THEN 1 ELSE 0 END,
               CASE WHEN s.set_aside_reason IS NULL THEN 0 ELSE 1 END,
               {_epoch("s.next_fire_at", pg)},
               o.last_state,
               {_epoch("o.last_instant", pg)},
               {_epoch("o.last_success_instant", pg)}
        FROM schedules s LEFT JOIN schedule_outcomes o ON o.schedule_name = s.name
        WHERE NOT s.removed
        ORDER BY s.name
    """


def schedule_health(conn: Connection) -> list[ScheduleHealth]:
    """Every schedule not removed, by name: one plain tuple each, with its outcome row.

    Read through the driver's own cursor: at 100,000 schedules, making result
    rows and then tuples of them took longer than the query.
    """
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(_health(is_pg(conn)))
        return list(cursor.fetchall())
    finally:
        cursor.close()
