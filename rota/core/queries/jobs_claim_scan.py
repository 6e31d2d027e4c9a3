"""The read side of a claim: which claimable jobs it considers, in claim order.

The limited claims of ``jobs_claim`` (both backends) are built from these
fragments: claimable rows of the executor's pools that it can run, due by the database
clock, in claim order (``CLAIM_ORDER``: priority, then ``run_after``, then
``created_at``), and of those at most one per concurrency key and up to the
free slots of each tenant.

An executor of several pools scans each pool's jobs on their own, in index
order, and merges them (``merged_scans``; the lock-free claim on PostgreSQL
does the same with a lateral scan a pool, in one statement for any number).
Only the first ``scan`` candidates in claim order are considered per batch; a
candidate whose key or tenant is already at its limit is skipped by the query,
and a second job of the same key within one batch waits for a later claim.
"""

from __future__ import annotations

from collections.abc import Callable

from rota.core.states import CLAIMABLE_SQL, LEASED_SQL

CLAIM_ORDER = "priority, run_after, created_at"
_TL = "CAST(:tenant_limit AS integer)"

# Job types the claimer cannot run (its handler does not import there, as in a
# rolling deploy): never claimed by it, left QUEUED for an executor that can.
# One bound list whatever its length, so the statement (and its plan) stays one.
PG_RUNNABLE = "NOT ({j}.job_type = ANY(CAST(:excluded_types AS text[])))"
SQLITE_RUNNABLE = "{j}.job_type NOT IN (SELECT value FROM json_each(:excluded_types))"


def candidates_sql(now_sql: str, pool: str, runnable_sql: str) -> str:
    """Claimable rows of the pools ``c.pool {pool}`` says, skipping those whose key or
    tenant is at its limit."""
    return f"""
        SELECT c.job_id, c.lease_generation, c.priority, c.run_after, c.created_at, c.tenant,
               c.concurrency_key
        FROM jobs c
        WHERE c.state IN {CLAIMABLE_SQL}
          AND c.pool {pool}
          AND {runnable_sql.format(j="c")}
          AND c.run_after <= {now_sql}
          AND c.attempt_count < c.max_attempts
          AND (c.concurrency_key IS NULL OR NOT EXISTS (
                SELECT 1 FROM jobs k
                WHERE k.concurrency_key = c.concurrency_key AND k.state IN {LEASED_SQL}))
          AND (c.tenant IS NULL OR {_TL} IS NULL OR (
                SELECT count(*) FROM jobs t
                WHERE t.tenant = c.tenant AND t.state IN {LEASED_SQL}) < {_TL})
        ORDER BY {CLAIM_ORDER}
        LIMIT :scan"""


def picked_sql(cand_sql: str, columns: str = "r.job_id, r.lease_generation") -> str:
    """At most one job per key and up to the tenant's free slots, in claim order."""
    order = CLAIM_ORDER
    return f"""
        SELECT {columns} FROM (
            SELECT cand.*,
                   row_number() OVER (PARTITION BY concurrency_key ORDER BY {order}) AS key_rn,
                   row_number() OVER (PARTITION BY tenant ORDER BY {order}) AS tenant_rn
            FROM ({cand_sql}) AS cand
        ) AS r
        WHERE (r.concurrency_key IS NULL OR r.key_rn = 1)
          AND (r.tenant IS NULL OR {_TL} IS NULL
               OR r.tenant_rn <= {_TL} - (
                SELECT count(*) FROM jobs t
                WHERE t.tenant = r.tenant AND t.state IN {LEASED_SQL}))
        ORDER BY {order}
        LIMIT :limit"""


def pools_sql(n: int) -> str:
    """The bound parameters of ``n`` pools, as a list (``:pool0, :pool1, ...``)."""
    return ", ".join(f":pool{i}" for i in range(n))


# More pools than this: one scan of them all, sorted (SQLite allows 500 terms in a
# compound SELECT, and a statement per pool grows with them). The lock-free claim
# leaves so many pools to the limited claim (``jobs_claim.claim_unkeyed_jobs``).
MAX_MERGED_POOLS = 32


def merged_scans(n_pools: int, scan: Callable[[str], str], limit: str) -> str:
    """The scans ``scan(pool)`` (each in claim order, up to ``limit`` rows) for each
    pool, merged in claim order.

    ``pool`` completes ``c.pool ...``. Neither backend reads a B-tree in order
    across the values of ``pool IN (...)``: one scan of ``c.pool IN (:pool0,
    :pool1)`` reads every claimable job of both pools and sorts them (with
    100,000 queued, 190 ms a claim on PostgreSQL and 39 ms on SQLite, against
    2 ms for one pool). So each pool gets its own scan in index order. A scan
    that locks (PostgreSQL) may lock up to ``limit`` rows per branch, more than
    the merged ``limit`` keeps: those stay queued, locked until the statement
    (lock-free claim) or the transaction (limited claim) ends.
    """
    if n_pools > MAX_MERGED_POOLS:
        pools = [f"IN ({pools_sql(n_pools)})"]
    else:
        pools = [f"= :pool{i}" for i in range(n_pools)]
    branches = [scan(pool) for pool in pools]
    if len(branches) == 1:
        return branches[0]
    each = "\n        UNION ALL".join(
        f"\n        SELECT * FROM ({b}) AS p{i}" for i, b in enumerate(branches)
    )
    return f"""{each}
        ORDER BY {CLAIM_ORDER}
        LIMIT {limit}"""
