"""The heartbeat: renew every held lease in one statement, watch deadlines.

Each tick it looks at every held job:

* past the job type's execution timeout -> ``on_timeout`` (the lease is no
  longer renewed; the attempt is written off as ambiguous);
* past its *local* lease deadline (the last confirmed renewal + a share of
  the lease, by the monotonic clock) -> ``on_lost``: a worker that cannot renew
  stops its handler before the lease can pass to another worker;
* due for renewal (a third of its lease since the last one), or carrying new
  progress -> renewed.

When any lease is due, every held lease is renewed in ONE statement; a job
missing from its result lost its lease. A renewal is never a shared fate: if
the database refuses the statement for what it carries (not for being
unreachable), it is split in halves down to single rows; a refused row is
renewed again without its progress (which is dropped, logged), and a row
refused even then is left to its local deadline. The returned state carries
CANCEL_REQUESTED to the handler.
Between renewals, while it holds jobs, it also asks once every
``CANCEL_POLL_SECONDS`` which of them a person asked to cancel (one cheap read
per process, not per job), so ``ctx.checkpoint()`` raises within about a second
of ``rota cancel``, not only at the next renewal. It asks only once a job not yet
told has been held that long: a job that ends sooner never needs the answer,
and a request made while it is held is still heard within the second.

It does not tick on a short period: each pass plans the next at the nearest
of every held job's deadlines (``HeldJob.renewal_due``: its renewal or pending
progress; ``timeout_at``; ``local_deadline``), the next cancel poll, and a second at most
(the registry row and liveness are refreshed on every pass). A deadline that
comes into being later wakes it through ``due_by``: a claim, a handler's start,
its progress. A 50 ms tick over every held job took 13% of the CPU of an
executor of ``--concurrency 4`` draining short jobs, and a fifth of its
context switches.

It runs in a thread of its own (``runtime.startstop.BackgroundLoop``);
``beat_once`` is one pass, for tests to drive by hand.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime

from rota.core.claimed import Renewal
from rota.core.database import short_error
from rota.core.queries.jobs_lease import (
    cancel_requested_of_owner,
    renew_leases_if_held,
)
from rota.core.states import JobState
from rota.executor.lease import HeldJob, StopReason
from rota.executor.transactions import LoopConnection, refused_for_its_values
from rota.runtime.outage import Outage
from rota.runtime.startstop import BackgroundLoop

log = logging.getLogger("rota.executor")

# The shortest time between two passes: deadlines a few ms apart share one pass.
TICK_SECONDS = 0.05
# The longest: the registry row and liveness are refreshed on every pass (a third
# of the registry interval, when that is shorter).
IDLE_TICK_SECONDS = 1.0
CANCEL_POLL_SECONDS = 1.0
_RETRY_SECONDS = 0.5


class Heartbeat(BackgroundLoop):
    def __init__(
        self,
        db: LoopConnection,
        owner: str,
        held: Callable[[], Iterable[HeldJob]],
        on_lost: Callable[[HeldJob, str], None],
        on_timeout: Callable[[HeldJob], None],
        on_pass: Callable[[], None] | None = None,
        outage: Outage | None = None,
        idle_tick: float = IDLE_TICK_SECONDS,
    ) -> None:
        super().__init__("rota-heartbeat", join_seconds=5.0)
        # ``on_pass`` refreshes the registry row: an idle tick longer than a third of
        # its interval would let the process read as gone.
        self._idle_tick = idle_tick
        self._db = db
        self._outage = outage  # logs a database outage once, not every beat
        self._owner = owner
        self._held = held
        self._on_lost = on_lost
        self._on_timeout = on_timeout
        self._on_pass = on_pass  # after every pass of the loop (registry, liveness)
        self._retry_at = 0.0
        self._cancel_poll_at = 0.0
        self._nudged = threading.Event()
        # When the loop passes next (monotonic, under _plan_lock); the pass in
        # progress plans the one after it (_planned, from the held jobs' deadlines).
        self._plan_lock = threading.Lock()
        self._next_pass = 0.0
        self._planned = 0.0

    @property
    def db(self) -> LoopConnection:
        """The heartbeat's own connection (the registry row is refreshed over it too)."""
        return self._db

    def _after_stop(self) -> None:
        self._db.close()

    def due_by(self, when: float) -> None:
        """Something held needs a pass by ``when`` (monotonic): wake sooner if the next
        pass is planned later. Cheap when it is not: a comparison. Passes stay
        ``TICK_SECONDS`` apart whatever ``when`` says (a deadline already past,
        reported again and again, must not make the loop spin)."""
        if when >= self._next_pass:
            return
        with self._plan_lock:
            if when < self._next_pass:
                self._next_pass = when
                self._nudged.set()

    def _interrupt(self) -> None:
        self._nudged.set()

    def _run(self) -> None:
        last = -math.inf  # when the last pass started
        while True:
            with self._plan_lock:
                # Cleared before the stop is looked at: ``signal_stop`` sets the stop,
                # then the event, so neither can be missed.
                self._nudged.clear()
                wake_at = max(self._next_pass, last + TICK_SECONDS)
            if self._stop.is_set():
                return
            left = wake_at - time.monotonic()
            if left > 0:
                self._nudged.wait(left)  # a new deadline or the stop: look again
                continue
            last = time.monotonic()
            with self._plan_lock:
                # From here on a new deadline (``due_by``) wakes the next wait: the
                # pass may read the held jobs before it is set.
                self._next_pass = math.inf
            try:
                self.beat_once()
            except Exception:  # never let the heartbeat thread die
                log.exception("heartbeat failed")
            if self._on_pass is not None:
                self._on_pass()
            planned = min(self._planned, last + self._idle_tick)
            with self._plan_lock:
                self._next_pass = min(self._next_pass, planned)

    def _cancel_poll_due(self, live: list[HeldJob]) -> float:
        """When to ask next which held jobs a person asked to cancel: a second after
        the last time, and once a job not yet told has been held a second."""
        untold = (h.held_since for h in live if not h.cancel_requested and not h.settled)
        oldest = min(untold, default=math.inf)
        return max(self._cancel_poll_at, oldest + CANCEL_POLL_SECONDS)

    def _poll_cancellations(self, live: list[HeldJob], mono: float) -> None:
        self._cancel_poll_at = mono + CANCEL_POLL_SECONDS
        try:
            with self._db.statement() as conn:
                wanted = cancel_requested_of_owner(conn, owner=self._owner)
        except Exception as exc:  # the next renewal carries the state too
            self._failed(exc, "could not check for cancellations")
            return
        for held in live:
            if held.claimed.job_id in wanted:
                held.cancel_requested = True

    def beat_once(self, *, force: bool = False, now: datetime | None = None) -> int:  # noqa: C901 - one tick: each held job's timeout, expiry and cancel poll, then one renewal of all
        """One tick; ``force`` renews every held lease. Returns how many were renewed."""
        mono = time.monotonic()
        live: list[HeldJob] = []
        any_due = force
        for held in list(self._held()):
            # A job released at shutdown keeps its lease renewed until its handler has
            # stopped and the release is written (or withheld, when it does not stop).
            if held.stop is not None and (held.stop is not StopReason.RELEASED or held.settled):
                continue
            if mono > held.timeout_at():
                self._on_timeout(held)
                continue
            if not held.settled and held.locally_expired(mono):
                self._on_lost(held, "not renewed in time")
                continue
            live.append(held)
            if mono >= held.renewal_due():
                any_due = True
        if mono >= self._cancel_poll_due(live):
            self._poll_cancellations(live, mono)
        if not any_due or not live or (not force and mono < self._retry_at):
            self._plan(live)
            return 0
        # One lease is due: renew them all in the same statement, which keeps the
        # held set on one cadence (one statement per interval, not one per claim).
        due = live
        renewals = [h.renewal(mono) for h in due]
        sent_at = time.monotonic()
        result, unsent, refused = self._renew(renewals, now)
        if unsent:  # database unreachable: the local deadlines protect us
            self._retry_at = time.monotonic() + _RETRY_SECONDS
            for h, r in zip(due, renewals, strict=True):
                if r.job_id in unsent:
                    h.restore_progress(r)
        for held in due:
            job_id = held.claimed.job_id
            state = result.get(job_id)
            if state is None:
                if not held.settled and job_id not in unsent and job_id not in refused:
                    self._on_lost(held, "heartbeat matched no row")
                continue
            held.renewed_at = sent_at
            if state is JobState.CANCEL_REQUESTED:
                held.cancel_requested = True
        self._plan(live)
        return len(result)

    def _plan(self, live: list[HeldJob]) -> None:
        """When the next pass is due: the nearest deadline of the jobs watched."""
        renewal = expiry = math.inf
        for held in live:
            renewal = min(renewal, held.renewal_due())
            expiry = min(expiry, held.timeout_at(), held.local_deadline)
        expiry = min(expiry, self._cancel_poll_due(live))
        # After a renewal the database did not take, not again before the retry.
        self._planned = min(max(renewal, self._retry_at), expiry)

    def _renew(
        self, renewals: list[Renewal], now: datetime | None
    ) -> tuple[dict[uuid.UUID, JobState], set[uuid.UUID], set[uuid.UUID]]:
        """Renew in one statement, split where refused: (renewed, unsent, refused ids)."""
        renewed: dict[uuid.UUID, JobState] = {}
        refused: set[uuid.UUID] = set()
        todo = [renewals]
        while todo:
            part = todo.pop()
            try:
                with self._db.statement() as conn:  # one statement, fenced per row
                    renewed.update(
                        renew_leases_if_held(conn, owner=self._owner, renewals=part, now=now)
                    )
            except Exception as exc:
                if not refused_for_its_values(exc):
                    unsent = {r.job_id for rest in [part, *todo] for r in rest}
                    self._failed(exc, f"could not renew {len(unsent)} lease(s)")
                    return renewed, unsent, refused
                if len(part) > 1:
                    mid = len(part) // 2
                    todo += [part[mid:], part[:mid]]
                    continue
                (one,) = part
                if (
                    one.stage is not None
                    or one.done is not None
                    or one.total is not None
                    or one.output is not None
                ):
                    log.warning(
                        "progress or output of job %s was refused and dropped: %s",
                        one.job_id,
                        short_error(exc)[:500],
                    )
                    todo.append([Renewal(one.job_id, one.generation)])
                    continue
                refused.add(one.job_id)
                log.error("lease renewal of job %s was refused: %s", one.job_id, short_error(exc))
        if self._outage is not None:
            self._outage.ok()
        return renewed, set(), refused

    def _failed(self, exc: Exception, what: str) -> None:
        if self._outage is not None:
            self._outage.failed(exc, "heartbeat")
        else:
            log.warning("%s: %s", what, short_error(exc))
