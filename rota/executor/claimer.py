"""Claims and sweeps, over the claim loop's own connection.

``claim_once`` claims as many due jobs as the slots have room for (plus
prefetch, at most ``max_batch``), never of a type whose handler does not
import here, and puts each in the held set and the slots' queue. Nothing
after the claim statement may raise for one job: every claimed job is RUNNING
already and must reach an outcome (``runner``), or go back at once when its
type turns out to be unrunnable here. ``sweep_once`` takes back expired
leases, any executor's; it is safe to run concurrently.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from rota.core.metric_deltas import MetricsRecorder
from rota.core.queries.jobs_claim import any_job_due
from rota.core.queries.jobs_lease import Swept, any_lease_expired, sweep_expired_leases
from rota.core.queries.jobs_notify import notify_claimable
from rota.core.states import JobState
from rota.executor import events
from rota.executor.claim import ScanStarts, claim_jobs
from rota.executor.held import HeldJobs
from rota.executor.lease import HeldJob, StopReason
from rota.executor.observations import observe_claim, observe_swept
from rota.executor.runnable import RunnableTypes
from rota.executor.slots import Slots
from rota.executor.transactions import LoopConnection
from rota.runtime.outage import Outage

log = logging.getLogger("rota.executor")

MAX_CLAIM_BATCH = 200


class Claimer:
    def __init__(
        self,
        db: LoopConnection,
        owner: str,
        pools: Sequence[str],
        types: RunnableTypes,
        jobs: HeldJobs,
        slots: Slots,
        outage: Outage,
        metrics: MetricsRecorder,
        *,
        tenant_limit: int | None = None,
        max_batch: int = MAX_CLAIM_BATCH,
    ) -> None:
        self.db = db
        self.types = types
        self.scan_starts = ScanStarts()  # claims skip the dead head of the queue index
        self._owner = owner
        self._pools = tuple(pools)
        self._jobs = jobs
        self._slots = slots
        self._outage = outage
        self._metrics = metrics
        self.tenant_limit = tenant_limit
        self.max_batch = max_batch
        self.claiming = True  # False once shutdown has begun: claims take nothing
        self.rounds = 0  # claim statements run so far

    def limit(self) -> int:
        """How many jobs the next claim asks for."""
        if not self.claiming:
            return 0
        return max(0, min(self._slots.room(), self.max_batch))

    def claim_once(self, now: datetime | None = None) -> int:
        """Claim as many due jobs as there are free slots (plus prefetch) and queue them."""
        limit = self.limit()
        if limit <= 0:
            return 0
        sent_at = time.monotonic()
        claimed = claim_jobs(
            self.db,
            owner=self._owner,
            pools=self._pools,
            limit=limit,
            tenant_limit=self.tenant_limit,
            now=now,
            excluded_types=self.types.unrunnable(),
            starts=self.scan_starts,
        )
        self.rounds += 1
        self._outage.ok()  # the database answered: an outage (if any) is over
        unrunnable = self.types.applied_since(claimed)
        for c in claimed:  # nothing in here may raise: these jobs are RUNNING already
            # started_at: not yet; the execution timeout counts from the handler's start.
            held = HeldJob(c, None, renewed_at=sent_at, started_at=math.inf)
            try:
                held.spec = self.types.get(c.job_type)
            except Exception as exc:  # the handler slot turns it into the job's outcome
                held.load_error = f"{type(exc).__name__}: {exc}"
            self._jobs.add(held)
            self._jobs.summary.claimed(c)
            if held.spec is not None and c.job_type in unrunnable:
                # A type applied after our last check, whose handler does not import
                # here: hand it back at once (attempt refunded) for an executor that can.
                held.interrupt(StopReason.RELEASED)
                self._jobs.release(held)
                continue
            events.claimed(c)
            self._slots.put(held)
            observe_claim(self._metrics, c)
        return len(claimed)

    def nothing_due(self) -> bool:
        """PostgreSQL: no job of this executor's pools is due, so a claim would take none.

        False on SQLite, where a claim is as cheap as the question.
        """
        if not self.db.is_pg:
            return False
        with self.db.statement() as conn:
            due = any_job_due(conn, pools=self._pools)
        self._outage.ok()
        if not due:
            # What a claim from the head would have found: nothing. Recorded as
            # one, so the scan from the head it stands for is not due again at once.
            self.scan_starts.claimed(None, [])
        return not due

    def sweep_once(self, now: datetime | None = None) -> list[Swept]:
        """Take back expired leases (any executor's); safe to run concurrently."""
        if self.db.is_pg:  # most sweeps find nothing: ask first, in one small read
            with self.db.statement() as conn:
                expired = any_lease_expired(conn, now=now)
            if not expired:
                self._outage.ok()
                return []
        # A transaction, not one statement: the failures it writes are notified in it.
        with self.db.begin() as conn:
            swept = sweep_expired_leases(conn, now=now)
            failed = [s.job_id for s in swept if s.state is JobState.FAILED]
            if failed:
                # Imported on a failure only: a start, or a job that succeeds, needs no webhooks.
                from rota.producer.notify import guarded, notify_failed_jobs

                at = now or datetime.now(UTC)
                guarded(conn, lambda c: notify_failed_jobs(c, failed, at))
        self._outage.ok()
        if any(s.state is JobState.RETRY_WAIT for s in swept):
            try:
                with self.db.statement() as conn:
                    notify_claimable(conn)
            except Exception as exc:  # idle executors poll; the sweep stands
                log.warning("could not notify idle executors: %s", exc)
        events.lease_expired(swept)
        observe_swept(self._metrics, swept)
        return swept
