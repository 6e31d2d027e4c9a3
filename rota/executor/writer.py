"""The outcome writer: one thread flushing finished attempts in batches.

Handlers hand their outcome over and free their slot at once; the writer
writes everything pending in ONE fenced statement per flush (each row fenced
on its own, see ``core.queries.jobs_outcome``). Until its outcome is written
a job stays in the executor's held set, so its lease keeps being renewed. A
failed flush (database unreachable) is retried; the fence makes a late write
safe, since it only lands if no one else took the job meanwhile.

Batching is never a shared fate. Values are made storable before they are
bound, and a batch the database still refuses for what it holds (not for
being unreachable: ``refused_for_its_values``) is split in halves, down to
single rows, so the rows at fault fail alone and the others are written. A
single refused row gets a fallback outcome carrying none of the handler's
values (``outcomes.unstorable``: OUTCOME_UNSTORABLE, fenced like any other);
if even that is refused, the worker gives the job up (logged
``outcome_unstorable``, handed to ``on_given_up``, so it is no longer held
and renewed) and the sweeper takes it back when its lease expires. Splitting happens only
after a refusal: the common case is one statement per flush.

The writer runs in a thread of its own (``runtime.startstop.BackgroundLoop``);
``flush_once`` writes one batch in the caller's thread, for tests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime

from rota.core.database import short_error
from rota.core.queries.jobs_notify import notify_claimable
from rota.core.queries.jobs_outcome import Finish, Finished, Written, finish_if_lease_held
from rota.core.states import JobState
from rota.executor.lease import HeldJob
from rota.executor.outcomes import unstorable
from rota.executor.transactions import LoopConnection, refused_for_its_values
from rota.runtime.events import emit
from rota.runtime.outage import Outage
from rota.runtime.startstop import BackgroundLoop

log = logging.getLogger("rota.executor")

MAX_BATCH = 500
_RETRY_SECONDS = 0.5
# Under load, wait this long after the first pending outcome for more to join
# it (up to ``linger_batch``): one transaction for many jobs. At most this much
# is added to when an outcome reaches the row; the slot is free at once anyway.
LINGER_SECONDS = 0.002

# (held job, what was asked, the state written or None when the lease was lost)
DoneCallback = Callable[[HeldJob, Finish, JobState | None], None]
Item = tuple[HeldJob, Finish]


class OutcomeWriter(BackgroundLoop):
    def __init__(
        self,
        db: LoopConnection,
        owner: str,
        on_done: DoneCallback,
        on_given_up: Callable[[HeldJob], None] | None = None,
        *,
        linger: float = LINGER_SECONDS,
        linger_batch: int = 1,
        outage: Outage | None = None,
    ) -> None:
        super().__init__("rota-outcomes", join_seconds=1.0)
        self._db = db
        self._outage = outage  # logs a database outage once, not every retry
        self._owner = owner
        self._on_done = on_done
        self._on_given_up = on_given_up
        self._linger = linger
        self._linger_batch = linger_batch
        self._pending: deque[tuple[HeldJob, Finish]] = deque()
        self._cond = threading.Condition()
        self._busy = 0

    def submit(self, held: HeldJob, finish: Finish) -> None:
        progress = held.take_progress()
        if progress is not None:  # the handler's last words: written with its outcome
            stage, done, total = progress
            finish = finish._replace(progress_stage=stage, progress_done=done, progress_total=total)
        with self._cond:
            self._pending.append((held, finish))
            self._cond.notify_all()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is pending (trying for up to ``timeout`` seconds), then stop."""
        self.wait_idle(timeout)
        super().stop()

    def _interrupt(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _after_stop(self) -> None:
        self._db.close()

    def wait_idle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def flush_once(self) -> int:
        """Write one batch of what is pending, in the caller's thread; returns how many.

        Raises when the database could not be reached; what was not written is
        pending again.
        """
        with self._cond:
            batch = [self._pending.popleft() for _ in range(min(MAX_BATCH, len(self._pending)))]
            self._busy += 1
        try:
            if batch:
                self._write(batch)
            return len(batch)
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self.stopping:
                    self._cond.wait()
                if self.stopping:
                    return
                self._gather()
            try:
                if self.flush_once() and self._outage is not None:
                    self._outage.ok()
            except Exception as exc:  # database unreachable: keep the batch, try again
                if self._outage is not None:
                    self._outage.failed(exc, "outcomes")
                else:
                    log.warning("could not write outcomes, will retry: %s", short_error(exc))
                time.sleep(_RETRY_SECONDS)

    def _gather(self) -> None:
        """Linger briefly (lock held by the caller) while a bigger batch is forming."""
        until = time.monotonic() + self._linger
        while len(self._pending) < self._linger_batch and not self.stopping:
            left = until - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)

    def _write(self, batch: list[Item]) -> None:
        """Write ``batch``, splitting it where the database refuses rows for their values."""
        todo = [batch]  # a stack of parts; the first half of a split is written first
        while todo:
            part = todo.pop()
            try:
                if len(part) > 1:
                    self._write_part(part)
                else:
                    self._write_single(part[0])
            except BaseException as exc:
                if len(part) > 1 and isinstance(exc, Exception) and refused_for_its_values(exc):
                    mid = len(part) // 2
                    todo += [part[mid:], part[:mid]]
                    continue
                # Unreachable (or stopped): what is not written yet is pending again.
                unwritten = part + [item for rest in reversed(todo) for item in rest]
                with self._cond:
                    self._pending.extendleft(reversed(unwritten))
                raise

    def _write_single(self, item: Item) -> None:
        """One row; if the database refuses it, its fallback; if that too, give the job up."""
        try:
            self._write_part([item])
            return
        except Exception as exc:
            if not refused_for_its_values(exc):
                raise
            refusal = exc
        held, finish = item
        fallback = unstorable(finish, refusal)
        try:
            self._write_part([(held, fallback)])
            return
        except Exception as exc:
            if not refused_for_its_values(exc):
                raise
            second = exc
        c = held.claimed
        emit(
            log,
            "outcome_unstorable",
            logging.ERROR,
            job_id=c.job_id,
            generation=c.lease_generation,
            state=finish.state,
            error=short_error(second)[:500],
        )
        # No longer held or renewed: the sweeper takes it back when its lease expires.
        if self._on_given_up is not None:
            self._on_given_up(held)

    def _write_part(self, part: list[Item]) -> None:
        finishes = [f for _, f in part]
        if any(f.state is JobState.FAILED for f in finishes):
            # A failure is notified in the transaction that writes it: the
            # deliveries exist exactly when the FAILED rows do. Only the rows
            # written: a lost lease's job was (or will be) reported by its holder.
            # Imported on a failure only: a start, or a job that succeeds, needs no webhooks.
            from rota.producer.notify import guarded, notify_failed_jobs

            with self._db.begin() as conn:
                results: list[Written] = finish_if_lease_held(
                    conn, owner=self._owner, finishes=finishes
                )
                failed = [
                    r.job_id
                    for r in results
                    if isinstance(r, Finished) and r.state is JobState.FAILED
                ]
                now = datetime.now(UTC)
                guarded(conn, lambda c: notify_failed_jobs(c, failed, now))
        else:
            # One statement on PostgreSQL (autocommit), fenced per row.
            with self._db.statement() as conn:
                results = finish_if_lease_held(conn, owner=self._owner, finishes=finishes)
        # Committed: nothing below may make the part be written again (it would
        # match no row and read as lost).
        if any(isinstance(r, Finished) and r.state is JobState.QUEUED for r in results):
            try:
                with self._db.statement() as conn:
                    notify_claimable(conn)
            except Exception as exc:  # idle executors poll; nothing is lost
                log.warning("could not notify idle executors: %s", short_error(exc))
        for (held, finish), result in zip(part, results, strict=True):
            try:
                self._on_done(held, finish, result.state if isinstance(result, Finished) else None)
            except Exception:  # a callback's failure is not the write's
                log.exception("outcome callback failed for job %s", held.claimed.job_id)
