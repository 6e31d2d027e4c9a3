"""The executor's claim: the one entry point that production and the tests both call.

On PostgreSQL, with no ``tenant_limit``, it first tries the lock-free claim
of jobs without a concurrency key (one autocommit statement,
``claim_unkeyed_jobs``). When that says a keyed job waits, or on SQLite, or
with a ``tenant_limit``, it runs the limited claim in a transaction
(``claim_limited_jobs``: PostgreSQL takes the claim advisory lock first; on
SQLite the transaction holds the write lock), which counts keys and tenants.
See ``rota.core.queries.jobs_claim`` for the statements themselves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from datetime import datetime

from rota.core.claimed import ClaimedJob
from rota.core.queries.jobs_claim import (
    ScanStart,
    claim_limited_jobs,
    claim_unkeyed_jobs,
)
from rota.executor.transactions import LoopConnection

# How soon a lock-free claim scans from the head again after its last scan from
# there, at first and at most: a job of the same priority made claimable before
# where the claims start waits about this long (see ScanStarts).
RESCAN_SECONDS = 0.25
LONGEST_RESCAN_SECONDS = 2.0


class ScanStarts:
    """Where one executor's next lock-free claim starts its scan (PostgreSQL).

    A claim scans the claimable index from where this executor's last claim
    began (its first job, in claim order), not from the head, where the dead
    entries of every job claimed since the last VACUUM lie; jobs of a lower
    priority number than that first job's are read from the head still. From
    the head again: once the interval has passed since the last scan from
    there, and at once when nothing is found after the start (``claim_jobs``).
    The interval starts at ``rescan`` seconds and doubles, up to ``longest``
    (never below ``rescan``), each time a scan from the head made while there
    was a start finds no job the start hid; one that finds such a job, or
    claims nothing at all, brings it back to ``rescan``.

    A job of the start's priority made claimable before it (a ``run_after`` in
    the past, a row another claimer had locked) waits up to the interval: the
    executor, having claimed fewer jobs than it asked for, waits no longer than
    ``until_head_scan()`` before it claims again. Only the order of jobs of one
    priority is at stake here: every guard of the claim stays in its statement.
    """

    def __init__(
        self,
        rescan: float = RESCAN_SECONDS,
        longest: float = LONGEST_RESCAN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rescan = rescan
        self.longest = longest
        self._clock = clock
        self._start: ScanStart | None = None
        self._from_head_at = -float("inf")
        self._doublings = 0  # times the interval has doubled since it was last reset

    def interval(self) -> float:
        """Seconds between scans from the head, as things stand."""
        return min(self.rescan * float(2**self._doublings), max(self.rescan, self.longest))

    def next(self) -> ScanStart | None:
        """Where the next claim starts; None: from the head."""
        if self._clock() - self._from_head_at >= self.interval():
            return None
        return self._start

    def until_head_scan(self) -> float:
        """Seconds until a claim scans from the head again; infinite if the next one does."""
        if self._start is None:
            return float("inf")
        return max(0.0, self.interval() - (self._clock() - self._from_head_at))

    def claimed(self, start: ScanStart | None, claimed: Sequence[ClaimedJob]) -> None:
        """A claim that started at ``start`` took ``claimed`` (in claim order)."""
        if start is None:
            self._from_head_at = self._clock()
            if not claimed or _hidden_by(self._start, claimed):
                self._doublings = 0
            elif self._start is not None and 0 < self.interval() < self.longest:
                self._doublings += 1
        self._start = ScanStart.of(claimed[0]) if claimed else None


def _hidden_by(start: ScanStart | None, claimed: Sequence[ClaimedJob]) -> bool:
    """Whether a claim from the head took a job that a claim from ``start`` would not
    have reached: one of the start's priority that sorts before it."""
    if start is None:
        return False
    for job in claimed:
        place = ScanStart.of(job)
        if place is not None and place.priority == start.priority and place < start:
            return True
    return False


def claim_jobs(
    db: LoopConnection,
    *,
    owner: str,
    pools: Sequence[str],
    limit: int,
    tenant_limit: int | None = None,
    now: datetime | None = None,
    excluded_types: Collection[str] = (),
    starts: ScanStarts | None = None,
) -> list[ClaimedJob]:
    """Claim up to ``limit`` due jobs of ``pools`` for ``owner``; each now RUNNING, leased.

    Jobs of ``excluded_types`` (types whose handler does not import here) are left alone.
    With ``starts``, the lock-free claim scans from where the last one began.
    """
    if limit <= 0 or not pools:
        return []
    claimed: list[ClaimedJob] | None = None
    if tenant_limit is None and db.engine.dialect.name == "postgresql":
        # Nothing to count: one lock-free statement (None: a keyed job waits).

        def unkeyed(start: ScanStart | None) -> list[ClaimedJob] | None:
            with db.statement() as conn:
                return claim_unkeyed_jobs(
                    conn,
                    owner=owner,
                    pools=pools,
                    limit=limit,
                    now=now,
                    excluded_types=excluded_types,
                    start=start,
                )

        start = starts.next() if starts is not None else None
        claimed = unkeyed(start)
        if claimed == [] and start is not None:  # nothing after the start: from the head
            start = None
            claimed = unkeyed(start)
        if claimed is not None and starts is not None:
            starts.claimed(start, claimed)
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
