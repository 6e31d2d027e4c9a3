"""The outcome writer: one thread flushing finished attempts in batches.

Handlers hand their outcome over and free their slot at once; the writer
writes everything pending in ONE fenced statement per flush (each row fenced
on its own, see ``shared.queries.jobs_outcome``). Until its outcome is written
a job stays in the executor's held set, so its lease keeps being renewed. A
failed flush (database unreachable) is retried; the fence makes a late write
safe, since it only lands if no one else took the job meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from rota.executor.lease import HeldJob
from rota.executor.transactions import LoopConnection
from rota.shared.queries.jobs_notify import notify_claimable
from rota.shared.queries.jobs_outcome import Finish, Finished, finish_if_lease_held
from rota.shared.states import JobState

log = logging.getLogger("rota.executor")

MAX_BATCH = 500
_RETRY_SECONDS = 0.5
# Under load, wait this long after the first pending outcome for more to join
# it (up to ``linger_batch``): one transaction for many jobs. At most this much
# is added to when an outcome reaches the row; the slot is free at once anyway.
LINGER_SECONDS = 0.002

# (held job, what was asked, the state written or None when the lease was lost)
DoneCallback = Callable[[HeldJob, Finish, JobState | None], None]


class OutcomeWriter:
    def __init__(
        self,
        db: LoopConnection,
        owner: str,
        on_done: DoneCallback,
        *,
        linger: float = LINGER_SECONDS,
        linger_batch: int = 1,
    ) -> None:
        self._db = db
        self._owner = owner
        self._on_done = on_done
        self._linger = linger
        self._linger_batch = linger_batch
        self._pending: deque[tuple[HeldJob, Finish]] = deque()
        self._cond = threading.Condition()
        self._busy = 0
        self._stopping = False
        self._thread: threading.Thread | None = None

    def submit(self, held: HeldJob, finish: Finish) -> None:
        with self._cond:
            self._pending.append((held, finish))
            self._cond.notify_all()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="rota-outcomes", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is pending (trying for up to ``timeout`` seconds), then stop."""
        self.wait_idle(timeout)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
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
        """Write one batch of what is pending, in the caller's thread; returns how many."""
        with self._cond:
            batch = [self._pending.popleft() for _ in range(min(MAX_BATCH, len(self._pending)))]
            self._busy += 1
        try:
            if batch:
                self._write(batch)
            return len(batch)
        except BaseException:
            with self._cond:
                self._pending.extendleft(reversed(batch))
            raise
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                self._gather()
            try:
                self.flush_once()
            except Exception as exc:  # database unreachable: keep the batch, try again
                log.warning("could not write outcomes, will retry: %s", exc)
                time.sleep(_RETRY_SECONDS)

    def _gather(self) -> None:
        """Linger briefly (lock held by the caller) while a bigger batch is forming."""
        until = time.monotonic() + self._linger
        while len(self._pending) < self._linger_batch and not self._stopping:
            left = until - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)

    def _write(self, batch: list[tuple[HeldJob, Finish]]) -> None:
        finishes = [f for _, f in batch]
        # One statement on PostgreSQL (autocommit), fenced per row.
        with self._db.statement() as conn:
            results = finish_if_lease_held(conn, owner=self._owner, finishes=finishes)
        if any(isinstance(r, Finished) and r.state is JobState.QUEUED for r in results):
            # After the outcomes are committed: a failure here must not make the
            # batch be written again (it would match no row and read as lost).
            try:
                with self._db.statement() as conn:
                    notify_claimable(conn)
            except Exception as exc:  # idle executors poll; nothing is lost
                log.warning("could not notify idle executors: %s", exc)
        for (held, finish), result in zip(batch, results, strict=True):
            self._on_done(held, finish, result.state if isinstance(result, Finished) else None)
