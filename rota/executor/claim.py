"""The executor's claim: the one entry point that production and the tests both call.

On PostgreSQL, with no ``tenant_limit``, it first tries the lock-free claim
of jobs without a concurrency key (one autocommit statement,
``claim_unkeyed_jobs``). When that says a keyed job waits, or on SQLite, or
with a ``tenant_limit``, it runs the limited claim in a transaction
(``claim_limited_jobs``: PostgreSQL takes the claim advisory lock first; on
SQLite the transaction holds the write lock), which counts keys and tenants.
See ``rota.shared.queries.jobs_claim`` for the statements themselves.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from rota.executor.transactions import LoopConnection
from rota.shared.queries.jobs_claim import ClaimedJob, claim_limited_jobs, claim_unkeyed_jobs


def claim_jobs(
    db: LoopConnection,
    *,
    owner: str,
    pools: Sequence[str],
    limit: int,
    tenant_limit: int | None = None,
    now: datetime | None = None,
    excluded_types: Collection[str] = (),
) -> list[ClaimedJob]:
    """Claim up to ``limit`` due jobs of ``pools`` for ``owner``; each now RUNNING, leased.

    Jobs of ``excluded_types`` (types whose handler does not import here) are left alone.
    """
    if limit <= 0 or not pools:
        return []
    claimed: list[ClaimedJob] | None = None
    if tenant_limit is None and db.engine.dialect.name == "postgresql":
        # Nothing to count: one lock-free statement (None: a keyed job waits).
        with db.statement() as conn:
            claimed = claim_unkeyed_jobs(
                conn,
                owner=owner,
                pools=pools,
                limit=limit,
                now=now,
                excluded_types=excluded_types,
            )
    if claimed is None:
        with db.begin() as conn:
            claimed = claim_limited_jobs(
                conn,
                owner=owner,
                pools=pools,
                limit=limit,
                tenant_limit=tenant_limit,
                now=now,
                excluded_types=excluded_types,
            )
    return claimed
