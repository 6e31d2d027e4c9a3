"""Claiming due jobs: one guarded statement per batch, on both backends.

A claim moves up to ``limit`` claimable jobs (QUEUED or RETRY_WAIT,
due by the database clock, in the executor's pools) to RUNNING for one worker:
``lease_generation`` and ``attempt_count`` go up by one, the lease runs until
database now + the row's ``lease_seconds``, and a ``job_attempts`` row is
opened for each claim in the same transaction. Order: ``priority`` (0 first),
then ``run_after``, then ``created_at``.

Two limits hold under any number of concurrent claimers, because they are
checked inside the claim itself:

* at most one RUNNING (or CANCEL_REQUESTED) job per ``concurrency_key``;
* with ``tenant_limit``, at most that many running jobs per ``tenant``.

On PostgreSQL the candidate rows are locked with ``FOR UPDATE SKIP LOCKED``, so
claimers never take the same row. The "how many are running" checks of keys
and tenants need more: two claimers must not both read the same count, so the
*limited* claim first takes a transaction-scoped advisory lock (held until
COMMIT: one limited claim at a time). Most claims need no count: with no
``tenant_limit`` and no keyed job waiting (due, in the pools, its key not
running), ``claim_unkeyed_jobs`` claims jobs without a key in ONE statement
that takes no advisory lock, runs in autocommit and opens the attempt rows
itself; the keyed check is part of that statement (a partial index of
claimable keyed jobs keeps it to an index probe). When a keyed job waits it
returns None and the caller runs the limited claim, which orders keyed and
plain jobs together by priority (``rota.executor.claim.claim_jobs`` runs the
two in that order: the executor and the tests call it). A keyed job that becomes claimable while an
unkeyed claim runs waits for the next round. On SQLite the claim is a single
``UPDATE ... WHERE job_id IN (SELECT ... LIMIT n) RETURNING`` inside a
``BEGIN IMMEDIATE`` transaction: the write lock serialises claimers (SKIP
LOCKED does not exist there and is never relied on).

Which jobs a limited claim considers, and how the scans of several pools merge,
is in ``jobs_claim_scan``; this module holds the statements that take them, and
the lock-free claim whole. On PostgreSQL the lock-free claim runs as a function
(``CLAIM_UNKEYED``, see ``server_functions``), so its plan is kept even behind
a transaction pooler.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from sqlalchemy import Connection, TextClause, text

from rota.core.claimed import ClaimedJob
from rota.core.queries.jobs_claim_scan import (
    CLAIM_ORDER,
    MAX_MERGED_POOLS,
    PG_RUNNABLE,
    SQLITE_RUNNABLE,
    candidates_sql,
    merged_scans,
    picked_sql,
)
from rota.core.queries.server_functions import ServerFunction
from rota.core.queries.sqlparams import (
    PG_NOW,
    SQLITE_NOW,
    bind_now,
    is_pg,
    pg_now_plus,
    read_id,
    read_json,
    sqlite_now_plus,
)
from rota.core.sqltime import read_utc
from rota.core.states import CLAIMABLE_SQL, LEASED_SQL

# Any constant works; it only has to be the same for every claimer.
CLAIM_LOCK_KEY = 0x726F7461_636C6D  # "rota" "clm"

_RETURNED = (
    "job_id, job_type, pool, lease_generation, attempt_count, max_attempts, lease_seconds, "
    "idempotent, needs_reconcile, payload_ref, args, scheduled_for, covers_from, covers_count, "
    "last_error_code, tenant, concurrency_key, schedule_name, run_after, created_at, started_at, "
    "priority"
)


class ScanStart(NamedTuple):
    """A place in claim order, (priority, run_after, created_at): see ``claim_unkeyed_jobs``."""

    priority: int
    run_after: datetime
    created_at: datetime

    @classmethod
    def of(cls, job: ClaimedJob) -> ScanStart | None:
        if job.run_after is None or job.created_at is None:
            return None
        return cls(job.priority, job.run_after, job.created_at)


# The claim itself, on PostgreSQL: the rows of a ``picked`` CTE become RUNNING under
# a new generation and attempt, and each gets its job_attempts row, in one statement.
# The guard is the generation ``picked`` read: ``picked`` locked each row FOR UPDATE
# after checking it is claimable, so nothing can change it before this UPDATE, and the
# generation says it is the same row version. Not ``j.state IN (claimable)``: that
# matches the partial index of the whole queue, and with statistics taken while the
# queue was empty (an aged table that autovacuum has not re-analysed since a burst of
# jobs) PostgreSQL joins ``picked`` against a scan of that index, so each claim reads
# the whole queue (200 ms at 20,000 queued beside a million finished jobs, against
# 6 ms through the primary key).
_PG_CLAIM_PICKED = f"""        claimed AS (
            UPDATE jobs AS j
            SET state = 'RUNNING',
                lease_owner = :owner,
                lease_expires_at = {pg_now_plus("j.lease_seconds")},
                lease_generation = j.lease_generation + 1,
                attempt_count = j.attempt_count + 1,
                started_at = {PG_NOW},
                heartbeat_at = {PG_NOW},
                updated_at = {PG_NOW}
            FROM picked
            WHERE j.job_id = picked.job_id
              AND j.lease_generation = picked.lease_generation
            RETURNING j.*
        ),
        opened AS (
            INSERT INTO job_attempts (job_id, attempt, lease_generation, worker_id, started_at)
            SELECT job_id, attempt_count, lease_generation, :owner, started_at FROM claimed
        )"""


@cache
def _pg_claim(n_pools: int) -> TextClause:
    def scan(pool: str) -> str:
        return candidates_sql(PG_NOW, pool, PG_RUNNABLE) + "\n        FOR UPDATE OF c SKIP LOCKED"

    cand = merged_scans(n_pools, scan, ":scan")
    return text(f"""
        WITH picked AS ({picked_sql(cand)}),
{_PG_CLAIM_PICKED}
        SELECT {_RETURNED} FROM claimed
        ORDER BY {CLAIM_ORDER}
    """)


_PG_LOCK = text("SELECT pg_advisory_xact_lock(:key)")

# The claimable keyed jobs a limited claim could take now (keys not running).
_KEYED_WAITING = f"""
    SELECT EXISTS (
        SELECT 1 FROM jobs w
        WHERE w.state IN {CLAIMABLE_SQL}
          AND w.concurrency_key IS NOT NULL
          AND w.pool = ANY(CAST(:pools AS text[]))
          AND {PG_RUNNABLE.format(j="w")}
          AND w.run_after <= {PG_NOW}
          AND w.attempt_count < w.max_attempts
          AND NOT EXISTS (
                SELECT 1 FROM jobs k
                WHERE k.concurrency_key = w.concurrency_key AND k.state IN {LEASED_SQL}))"""

# Above every priority a row can hold (an integer): a claim with no start reads
# all of each pool's index from the head.
HEAD_BELOW_ALL = 2**31

# A claim reads two ranges of each pool's index: the jobs of a priority number
# below ``:head_below``, from the head, and the jobs at or after the start in
# claim order. With a start (``claim_unkeyed_jobs``'s ``start``), ``:head_below``
# is its priority; with none, every priority, and the start is NULL, a range
# the B-tree knows to be empty without reading a page. Both are conditions on
# the index's columns after ``pool``, so each scan descends to where its range
# begins, in a generic plan as well as a custom one.
_HEAD_PART = "\n              AND c.priority < CAST(:head_below AS bigint)"
_START_PART = (
    "\n              AND (c.priority, c.run_after, c.created_at) >= ("
    "CAST(:start_priority AS integer), CAST(:start_run_after AS timestamptz), "
    "CAST(:start_created_at AS timestamptz))"
)


def _unkeyed_scan(part: str) -> str:
    """One pool's (``p.pool``) claimable jobs without a key in ``part``, locked, in claim order."""
    return f"""
            SELECT c.job_id, c.lease_generation, c.priority, c.run_after, c.created_at
            FROM jobs c
            WHERE c.state IN {CLAIMABLE_SQL}
              AND c.concurrency_key IS NULL
              AND c.pool = p.pool
              AND {PG_RUNNABLE.format(j="c")}
              AND c.run_after <= {PG_NOW}
              AND c.attempt_count < c.max_attempts
              AND NOT (SELECT waiting FROM keyed){part}
            ORDER BY {CLAIM_ORDER}
            LIMIT :limit
            FOR UPDATE OF c SKIP LOCKED"""


# One statement for any number of pools and either range: nothing keyed waiting ->
# claim unkeyed jobs; always one row back. The first column says whether a keyed
# job waits (then nothing was claimed); the claimed jobs follow, or one row of
# NULLs when none was. Each pool's ranges are scanned on their own, in index
# order (neither backend reads a B-tree in order across the values of ``pool IN
# (...)``, see ``jobs_claim_scan.merged_scans``), and merged. A scan may lock up
# to ``:limit`` rows, more than the merge keeps: those stay queued, locked until
# the statement ends.
_PG_CLAIM_UNKEYED = text(f"""
        WITH keyed AS MATERIALIZED ({_KEYED_WAITING} AS waiting),
        picked AS (
            SELECT u.job_id, u.lease_generation FROM (
                SELECT h.* FROM unnest(CAST(:pools AS text[])) AS p(pool)
                CROSS JOIN LATERAL ({_unkeyed_scan(_HEAD_PART)}
                ) AS h
                UNION ALL
                SELECT s.* FROM unnest(CAST(:pools AS text[])) AS p(pool)
                CROSS JOIN LATERAL ({_unkeyed_scan(_START_PART)}
                ) AS s
            ) AS u
            ORDER BY {CLAIM_ORDER}
            LIMIT :limit
        ),
{_PG_CLAIM_PICKED}
        SELECT keyed.waiting, {", ".join("claimed." + c.strip() for c in _RETURNED.split(","))}
        FROM keyed LEFT JOIN claimed ON TRUE
        ORDER BY {", ".join("claimed." + c.strip() for c in CLAIM_ORDER.split(","))}
    """)

_TIMESTAMP = "timestamptz"
# The SQL types of _RETURNED's columns, in its order (the table's).
_RETURNED_TYPES = (
    "uuid, varchar, varchar, bigint, integer, integer, double precision, boolean, boolean, "
    f"text, json, {_TIMESTAMP}, {_TIMESTAMP}, integer, varchar, varchar, varchar, varchar, "
    f"{_TIMESTAMP}, {_TIMESTAMP}, {_TIMESTAMP}, integer"
)

CLAIM_UNKEYED = ServerFunction(
    "claim_unkeyed",
    _PG_CLAIM_UNKEYED,
    params=(
        ("owner", "text"),
        ("pools", "text[]"),
        ("limit", "integer"),
        ("now", _TIMESTAMP),
        ("excluded_types", "text[]"),
        ("head_below", "bigint"),
        ("start_priority", "integer"),
        ("start_run_after", _TIMESTAMP),
        ("start_created_at", _TIMESTAMP),
    ),
    optional=frozenset({"start_priority", "start_run_after", "start_created_at"}),
    returns=(
        ("waiting", "boolean"),
        *zip(
            (c.strip() for c in _RETURNED.split(",")),
            (t.strip() for t in _RETURNED_TYPES.split(",")),
            strict=True,
        ),
    ),
)


@cache
def _sqlite_claim(n_pools: int) -> TextClause:
    cand = merged_scans(
        n_pools, lambda pool: candidates_sql(SQLITE_NOW, pool, SQLITE_RUNNABLE), ":scan"
    )
    return text(f"""
        UPDATE jobs
        SET state = 'RUNNING',
            lease_owner = :owner,
            lease_expires_at = {sqlite_now_plus("lease_seconds")},
            lease_generation = lease_generation + 1,
            attempt_count = attempt_count + 1,
            started_at = {SQLITE_NOW},
            heartbeat_at = {SQLITE_NOW},
            updated_at = {SQLITE_NOW}
        WHERE job_id IN ({picked_sql(cand, "r.job_id")})
        RETURNING {_RETURNED}
    """)


_SQLITE_OPEN_ATTEMPTS = text("""
    INSERT INTO job_attempts (job_id, attempt, lease_generation, worker_id, started_at)
    SELECT j.job_id, j.attempt_count, j.lease_generation, j.lease_owner, j.started_at
    FROM jobs AS j JOIN json_each(:ids) AS b ON j.job_id = b.value
""")


def _params(
    conn: Connection,
    owner: str,
    pools: Sequence[str],
    limit: int,
    tenant_limit: int | None,
    now: datetime | None,
    scan: int | None,
    excluded_types: Collection[str] = (),
) -> dict[str, Any]:
    excluded = sorted(excluded_types)
    params: dict[str, Any] = {
        "excluded_types": excluded if is_pg(conn) else json.dumps(excluded),
        "owner": owner,
        "limit": limit,
        "scan": scan if scan is not None else max(4 * limit, 32),
        "tenant_limit": tenant_limit,
        "now": bind_now(conn, now),
    }
    params.update({f"pool{i}": p for i, p in enumerate(pools)})
    return params


def claim_unkeyed_jobs(
    conn: Connection,
    *,
    owner: str,
    pools: Sequence[str],
    limit: int,
    now: datetime | None = None,
    excluded_types: Collection[str] = (),
    start: ScanStart | None = None,
) -> list[ClaimedJob] | None:
    """PostgreSQL: claim up to ``limit`` jobs without a concurrency key, taking no lock.

    One statement (safe in autocommit: it is atomic on its own). Returns None
    when a keyed job waits, for more than ``MAX_MERGED_POOLS`` pools, or on
    SQLite: then claim with ``claim_limited_jobs``.
    Only for claimers without a ``tenant_limit``. Jobs of ``excluded_types`` are
    never claimed (nor do they count as a keyed job waiting).

    With ``start``, the jobs of its priority before it in claim order are not
    considered. Every claimed job leaves a dead entry at the head of the
    claimable index until VACUUM removes it, and a scan from the head reads them
    all: at ten million kept jobs autovacuum comes by once per million jobs, and
    by then each claim reads most of a thousand pages. A scan from where the last
    claim began skips them. Jobs of a lower priority number are still read from
    the head (a range of their own); the jobs of the start's priority made
    claimable before it since (a ``run_after`` in the past, a row another claimer
    had locked) wait for the next scan from the head
    (``rota.executor.claim.ScanStarts``).
    """
    if not is_pg(conn):
        return None
    if limit <= 0 or not pools:
        return []
    pools = list(dict.fromkeys(pools))  # a pool named twice would be scanned twice
    if len(pools) > MAX_MERGED_POOLS:
        # A scan a pool, each locking up to ``limit`` rows, would lock that many
        # times more rows than the claim keeps: the limited claim reads them all
        # in one scan (see ``jobs_claim_scan.merged_scans``).
        return None
    params: dict[str, Any] = {
        "owner": owner,
        "pools": pools,
        "limit": limit,
        "now": bind_now(conn, now),
        "excluded_types": sorted(excluded_types),
        "head_below": HEAD_BELOW_ALL if start is None else start.priority,
    }
    if start is not None:
        params.update(
            start_priority=start.priority,
            start_run_after=start.run_after,
            start_created_at=start.created_at,
        )
    rows = CLAIM_UNKEYED.execute(conn, params)
    if rows[0][0]:
        return None
    # In claim order (the caller starts its next scan at the first): a function's
    # rows come in the order it returned them, which SQL does not promise.
    claimed = [_claimed(r[1:]) for r in rows if r[1] is not None]
    return sorted(claimed, key=lambda c: (c.priority, c.run_after, c.created_at))


_PG_ANY_DUE = text(f"""
        SELECT EXISTS (
            SELECT 1 FROM jobs
            WHERE state IN {CLAIMABLE_SQL}
              AND pool = ANY(CAST(:pools AS text[]))
              AND run_after <= {PG_NOW})
    """)
ANY_DUE = ServerFunction(
    "any_job_due",
    _PG_ANY_DUE,
    params=(("pools", "text[]"), ("now", _TIMESTAMP)),
    returns=(("due", "boolean"),),
)


def any_job_due(conn: Connection, *, pools: Sequence[str], now: datetime | None = None) -> bool:
    """PostgreSQL: whether any job of ``pools`` is waiting and due; a read, no lock.

    Every job a claim could take passes this test (it is the claim's WHERE
    without the checks of type, attempts, keys and tenants), so when it is
    false a claim would take nothing. It is the cheap question an idle
    executor asks on each poll: where the queue index holds the dead entries
    of a batch just claimed, an empty claim reads 1.5-1.9 ms of the server's
    time, this 0.2-0.3 ms sent unprepared (as behind a transaction pooler),
    less as a function whose plan is kept (``ANY_DUE``).
    """
    if not pools:
        return False
    rows = ANY_DUE.execute(conn, {"pools": list(pools), "now": bind_now(conn, now)})
    return bool(rows[0][0])


def claim_limited_jobs(
    conn: Connection,
    *,
    owner: str,
    pools: Sequence[str],
    limit: int,
    tenant_limit: int | None = None,
    now: datetime | None = None,
    scan: int | None = None,
    excluded_types: Collection[str] = (),
) -> list[ClaimedJob]:
    """Claim keyed and plain jobs together, counting keys and tenants; in a transaction.

    PostgreSQL: takes the claim advisory lock first (held until COMMIT). Jobs of
    ``excluded_types`` are never claimed.
    """
    if limit <= 0 or not pools:
        return []
    params = _params(conn, owner, pools, limit, tenant_limit, now, scan, excluded_types)
    if is_pg(conn):
        conn.execute(_PG_LOCK, {"key": CLAIM_LOCK_KEY})
        rows = conn.execute(_pg_claim(len(pools)), params).all()
    else:
        rows = sorted(
            conn.execute(_sqlite_claim(len(pools)), params).all(),
            key=lambda r: (r[21], r[18], r[19]),  # claim order: priority, run_after, created_at
        )
        if rows:
            conn.execute(_SQLITE_OPEN_ATTEMPTS, {"ids": json.dumps([r[0] for r in rows])})
    return [_claimed(r) for r in rows]


def _read_args(value: Any) -> Any:
    """The stored args; never raises, since the job is already claimed (see ClaimedJob.args)."""
    try:
        args = read_json(value)
    except ValueError:  # a JSON string on PostgreSQL arrives decoded: it is not JSON text
        return value
    return {} if args is None else args


def _claimed(r: Any) -> ClaimedJob:
    # Positional, in the order of _RETURNED and of ClaimedJob's fields.
    return ClaimedJob(
        read_id(r[0]),  # job_id
        r[1],  # job_type
        r[2],  # pool
        int(r[3]),  # lease_generation
        int(r[4]),  # attempt
        int(r[5]),  # max_attempts
        float(r[6]),  # lease_seconds
        bool(r[7]),  # idempotent
        bool(r[8]),  # needs_reconcile
        r[9],  # payload_ref
        _read_args(r[10]),  # args
        read_utc(r[11]),  # scheduled_for
        read_utc(r[12]),  # covers_from
        r[13],  # covers_count
        r[14],  # last_error_code
        r[15],  # tenant
        r[16],  # concurrency_key
        r[17],  # schedule_name
        read_utc(r[18]),  # run_after
        read_utc(r[19]),  # created_at
        read_utc(r[20]),  # started_at
        int(r[21]),  # priority
    )
