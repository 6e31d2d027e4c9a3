"""Keeping leases alive, and taking back the ones that expired.

``renew_leases_if_held`` is the heartbeat: one statement renews every lease a
worker holds, each fenced on its own (id, generation, owner, a leased state,
and a lease that has not yet expired: a heartbeat never revives an expired
claim). It also stores progress reported since the last beat (the stage made
storable: cut to its column, NUL and lone surrogates replaced) and the tail of
what each attempt has written so far, when it wrote more since the last beat
(its ``job_attempt_output`` row, replaced by the next tail and by the
outcome's: ``jobs_outcome``), for the renewed leases only. It returns the state
of each renewed job, so a CANCEL_REQUESTED reaches the worker. A job missing
from the result has lost its lease.

``sweep_expired_leases`` is the sweeper, safe to run from every executor at
once: one guarded UPDATE re-checks state and expiry by the database clock in
the statement itself (never from an earlier read). An expired lease turns into
RETRY_WAIT (due now), FAILED (no attempt left) or CANCELLED (cancellation was
requested); ``last_error_code`` becomes LEASE_EXPIRED; a job type that is not
idempotent is marked ``needs_reconcile``, since the lost attempt may have done
its work; the open attempt row is closed as LEASE_EXPIRED, and a scheduled
job that ended is recorded in ``schedule_outcomes``, in the same statement.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cache

from sqlalchemy import Connection, TextClause, text

from rota.core.claimed import Renewal
from rota.core.queries.attempt_output import SQLITE_KEEP_OUTPUT, pg_keep_output
from rota.core.queries.fence import PG_BATCH_COLUMNS, lease_fence, pg_batch_fence
from rota.core.queries.schedule_outcomes import pg_record_outcomes, record_outcomes_of
from rota.core.queries.sqlparams import (
    PG_NOW,
    SQLITE_NOW,
    bind_now,
    is_pg,
    pg_now_plus,
    read_id,
    sqlite_batch,
    sqlite_now_plus,
)
from rota.core.sqltime import read_utc
from rota.core.states import LEASED_SQL, TERMINAL, JobState
from rota.core.storable import ATTEMPT_OUTPUT_MAX_BYTES, PROGRESS_STAGE_MAX, storable_text

SWEEP_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Swept:
    job_id: uuid.UUID
    generation: int
    state: JobState
    attempt_count: int
    detail: str
    # For the metrics: what expired, and when it was created / finished / asked to cancel.
    job_type: str = ""
    created_at: datetime | None = None
    finished_at: datetime | None = None
    cancel_requested_at: datetime | None = None


def _renew_set(j: str, now: str, expires: str) -> str:
    return f"""
            lease_expires_at = {expires},
            heartbeat_at = {now},
            updated_at = {now},
            progress_stage = coalesce(b.stage, {j}.progress_stage),
            progress_done = coalesce(b.done, {j}.progress_done),
            progress_total = coalesce(b.total, {j}.progress_total)"""


def _renew_fence(j: str, now: str) -> str:
    return f"{lease_fence(j)}\n          AND {j}.lease_expires_at > {now}"


@cache
def _pg_renew() -> TextClause:
    return text(f"""
        WITH b AS MATERIALIZED (
            SELECT *, {PG_BATCH_COLUMNS}, {PG_NOW} AS now
            FROM unnest(
                CAST(:ids AS uuid[]), CAST(:gens AS bigint[]), CAST(:stages AS text[]),
                CAST(:dones AS bigint[]), CAST(:totals AS bigint[]), CAST(:outputs AS text[]),
                CAST(:dropped AS bigint[])
            ) AS b(job_id, gen, stage, done, total, output, dropped)
        ),
        renewed AS (
            UPDATE jobs AS j SET {_renew_set("j", PG_NOW, pg_now_plus("j.lease_seconds"))}
            FROM b
            WHERE {pg_batch_fence("j")}
              AND j.lease_expires_at > b.now
            RETURNING j.job_id, j.state, j.lease_generation, b.output, b.dropped
        ),
        {pg_keep_output("renewed")}
        SELECT job_id, state FROM renewed
    """)


@cache
def _sqlite_renew() -> TextClause:
    return text(f"""
        WITH b AS MATERIALIZED (
            SELECT json_extract(value, '$.id') AS job_id,
                   json_extract(value, '$.gen') AS gen,
                   json_extract(value, '$.stage') AS stage,
                   json_extract(value, '$.done') AS done,
                   json_extract(value, '$.total') AS total
            FROM json_each(:batch)
        )
        UPDATE jobs SET {_renew_set("jobs", SQLITE_NOW, sqlite_now_plus("jobs.lease_seconds"))}
        FROM b
        WHERE {_renew_fence("jobs", SQLITE_NOW)}
        RETURNING jobs.job_id, jobs.state, jobs.lease_generation
    """)


def _storable(r: Renewal) -> Renewal:
    """``r`` with its stage cut to its column and its output to the kept tail, NUL and
    lone surrogates replaced."""
    if r.stage is not None:
        r = replace(r, stage=storable_text(r.stage, PROGRESS_STAGE_MAX))
    if r.output is not None:
        r = replace(r, output=storable_text(r.output, ATTEMPT_OUTPUT_MAX_BYTES, keep="tail"))
    return r


def renew_leases_if_held(
    conn: Connection, *, owner: str, renewals: Sequence[Renewal], now: datetime | None = None
) -> dict[uuid.UUID, JobState]:
    """Renew the leases ``owner`` still holds; return {job_id: state} of those renewed."""
    if not renewals:
        return {}
    if any(r.stage is not None or r.output is not None for r in renewals):
        renewals = [_storable(r) for r in renewals]
    if is_pg(conn):
        rows = conn.execute(
            _pg_renew(),
            {
                "owner": owner,
                "now": bind_now(conn, now),
                "ids": [r.job_id for r in renewals],
                "gens": [r.generation for r in renewals],
                "stages": [r.stage for r in renewals],
                "dones": [r.done for r in renewals],
                "totals": [r.total for r in renewals],
                "outputs": [r.output for r in renewals],
                "dropped": [r.output_dropped for r in renewals],
            },
        ).all()
    else:
        batch = [
            {
                "id": r.job_id.hex,
                "gen": r.generation,
                "stage": r.stage,
                "done": r.done,
                "total": r.total,
            }
            for r in renewals
        ]
        rows = conn.execute(
            _sqlite_renew(),
            {"owner": owner, "now": bind_now(conn, now), "batch": sqlite_batch(batch)},
        ).all()
        renewed = {(read_id(r[0]), int(r[2])) for r in rows}
        kept = [
            {
                "id": r.job_id.hex,
                "gen": r.generation,
                "output": r.output,
                "dropped": r.output_dropped,
            }
            for r in renewals
            if r.output is not None and (r.job_id, r.generation) in renewed
        ]
        if kept:
            conn.execute(SQLITE_KEEP_OUTPUT, {"batch": sqlite_batch(kept)})
    return {read_id(r[0]): JobState(r[1]) for r in rows}


def _sweep_set(now: str, detail: str) -> str:
    return f"""
            state = CASE WHEN state = 'CANCEL_REQUESTED' THEN 'CANCELLED'
                         WHEN attempt_count >= max_attempts THEN 'FAILED'
                         ELSE 'RETRY_WAIT' END,
            run_after = {now},
            last_error_code = 'LEASE_EXPIRED',
            last_error_detail = {detail},
            needs_reconcile = CASE WHEN state = 'RUNNING' AND NOT idempotent THEN TRUE
                                   ELSE needs_reconcile END,
            finished_at = CASE WHEN state = 'CANCEL_REQUESTED' OR attempt_count >= max_attempts
                               THEN {now} ELSE NULL END,
            lease_owner = NULL,
            lease_expires_at = NULL,
            updated_at = {now}"""


_EXPIRED = f"state IN {LEASED_SQL} AND lease_expires_at <= {{now}}"


@cache
def _pg_sweep() -> TextClause:
    detail = (
        "'the lease of ' || lease_owner || ' (generation ' || lease_generation "
        "|| ') expired at ' || lease_expires_at || ' with no report'"
    )
    expired = _EXPIRED.format(now=PG_NOW)
    return text(f"""
        WITH expired AS (
            SELECT job_id FROM jobs WHERE {expired}
            LIMIT {SWEEP_BATCH}
            FOR UPDATE SKIP LOCKED
        ),
        swept AS (
            UPDATE jobs SET {_sweep_set(PG_NOW, detail)}
            WHERE job_id IN (SELECT job_id FROM expired) AND {expired}
            RETURNING job_id, lease_generation, state, attempt_count, last_error_detail,
                      job_type, created_at, finished_at, cancel_requested_at,
                      schedule_name, scheduled_for
        ),
        closed AS (
            UPDATE job_attempts AS a
            SET ended_at = {PG_NOW}, outcome = 'LEASE_EXPIRED', error_code = 'LEASE_EXPIRED'
            FROM swept
            WHERE a.job_id = swept.job_id AND a.lease_generation = swept.lease_generation
              AND a.ended_at IS NULL
        ),
        {pg_record_outcomes("swept")}
        SELECT * FROM swept
    """)


@cache
def _sqlite_sweep() -> TextClause:
    detail = (
        "'the lease of ' || lease_owner || ' (generation ' || lease_generation "
        "|| ') expired at ' || lease_expires_at || ' UTC with no report'"
    )
    expired = _EXPIRED.format(now=SQLITE_NOW)
    return text(f"""
        UPDATE jobs SET {_sweep_set(SQLITE_NOW, detail)}
        WHERE job_id IN (SELECT job_id FROM jobs WHERE {expired} LIMIT {SWEEP_BATCH})
          AND {expired}
        RETURNING job_id, lease_generation, state, attempt_count, last_error_detail,
                      job_type, created_at, finished_at, cancel_requested_at
    """)


_SQLITE_CLOSE_EXPIRED = text(f"""
    UPDATE job_attempts
    SET ended_at = {SQLITE_NOW}, outcome = 'LEASE_EXPIRED', error_code = 'LEASE_EXPIRED'
    FROM json_each(:batch) AS b
    WHERE job_attempts.job_id = json_extract(b.value, '$.id')
      AND job_attempts.lease_generation = json_extract(b.value, '$.gen')
      AND job_attempts.ended_at IS NULL
""")


_PG_ANY_EXPIRED = text(f"SELECT EXISTS (SELECT 1 FROM jobs WHERE {_EXPIRED.format(now=PG_NOW)})")


def any_lease_expired(conn: Connection, *, now: datetime | None = None) -> bool:
    """PostgreSQL: whether a sweep would find an expired lease; a read of the leased jobs.

    The sweep's own WHERE, asked alone: a statement that plans in a fraction of
    the sweep's time, for executors that ask every few seconds and almost always
    hear no (behind a transaction pooler every statement is planned anew).
    """
    return bool(conn.execute(_PG_ANY_EXPIRED, {"now": bind_now(conn, now)}).scalar_one())


def sweep_expired_leases(conn: Connection, *, now: datetime | None = None) -> list[Swept]:
    """Take back up to ``SWEEP_BATCH`` expired leases; call inside a transaction."""
    now_param = bind_now(conn, now)
    if is_pg(conn):
        rows = conn.execute(_pg_sweep(), {"now": now_param}).all()
    else:
        rows = conn.execute(_sqlite_sweep(), {"now": now_param}).all()
        if rows:
            batch = [{"id": r[0], "gen": int(r[1])} for r in rows]
            conn.execute(_SQLITE_CLOSE_EXPIRED, {"now": now_param, "batch": sqlite_batch(batch)})
            record_outcomes_of(conn, [read_id(r[0]) for r in rows if r[2] in TERMINAL])
    return [
        Swept(
            read_id(r[0]),
            int(r[1]),
            JobState(r[2]),
            int(r[3]),
            str(r[4]),
            r[5],
            read_utc(r[6]),
            read_utc(r[7]),
            read_utc(r[8]),
        )
        for r in rows
    ]


_CANCEL_REQUESTED_OF_OWNER = text(
    "SELECT job_id FROM jobs WHERE state = 'CANCEL_REQUESTED' AND lease_owner = :owner"
)


def cancel_requested_of_owner(conn: Connection, *, owner: str) -> set[uuid.UUID]:
    """The jobs ``owner`` holds whose cancellation was requested (a read: the ack is fenced)."""
    return {
        read_id(r) for r in conn.execute(_CANCEL_REQUESTED_OF_OWNER, {"owner": owner}).scalars()
    }
