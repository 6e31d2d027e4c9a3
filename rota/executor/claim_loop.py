"""The executor's claim loop, in the caller's thread: sweep, claim, prune, sleep.

Each pass sweeps expired leases when a sweep is due (every
``sweep_interval``), claims what the slots have room for, and reads the job
types again when they are stale. Then:

* busy (no room, or the claim filled all it asked for): it waits for a good
  batch of slots to free (``Slots.wait_for_room``) and claims again;
* the queue drained for now: it sleeps until a wake-up, a poll
  (``poll_interval``; without notifications, sooner in a small fleet:
  ``poll_wait``), a sweep or the next scan from the head of the queue
  index (``ScanStarts``), whichever comes first. A pass after a sleep that no
  wake-up ended asks first whether any job is due at all
  (``Claimer.nothing_due``, PostgreSQL) and claims only if one is: idle
  executors that poll (behind a transaction pooler, without LISTEN, on every
  poll) cost the database a small read each, not a claim.

Wake-ups: on PostgreSQL a LISTEN connection (``listener``), on SQLite a watch
of ``PRAGMA data_version`` (``sqlite_watch``), set the loop's ``wake`` event.

Upkeep in idle moments: retention (``pruner``) takes one bounded step when a
claim found nothing at all, or between claims once a pass is overdue; index
upkeep (``reindexer``, PostgreSQL) runs in a thread of its own while the last
claim found nothing due. Neither is imported before the first claim: the
pruner is made at its first use, the index upkeep started after the first
claim (its first check is minutes away).

A failed pass never ends the loop: a database outage is logged once and
retried with backoff (``runtime.outage``), a bug of ours is logged each time;
a database that can never serve (read-only, not migrated) stops it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Engine

from rota.core.metric_deltas import MetricsRecorder
from rota.core.states import WorkerKind
from rota.executor.claimer import MAX_CLAIM_BATCH, Claimer
from rota.executor.held import HeldJobs
from rota.executor.listener import Listener
from rota.executor.runnable import RunnableTypes
from rota.executor.slots import Slots
from rota.executor.sqlite_watch import SqliteWatcher
from rota.executor.transactions import LoopConnection
from rota.executor.upkeep import (
    DEFAULT_FIRST_CHECK,
    DEFAULT_PRUNE_INTERVAL,
    DEFAULT_REINDEX_INTERVAL,
)
from rota.runtime.events import emit
from rota.runtime.liveness import Liveness
from rota.runtime.outage import Outage, describe, is_database_error
from rota.runtime.startstop import Service, spawn

if TYPE_CHECKING:  # imported where first made (pruner, reindexer): not on the way to a claim
    from rota.executor.pruner import Pruner
    from rota.executor.reindexer import Reindexer

log = logging.getLogger("rota.executor")
T = TypeVar("T")

DEFAULT_POLL_INTERVAL = 1.0
DEFAULT_SWEEP_INTERVAL = 5.0
# Without notifications (behind a transaction pooler, with no listen URL, or
# before the listener knows) every executor finds new jobs by polling. Each
# waits the live executors divided by FLEET_POLLS_PER_SECOND between polls
# (SHORTEST_POLL_SECONDS at least, the poll interval at most): a few executors
# find a job within a tenth of a second, and a fleet of any size asks the
# database about as often as twenty executors do, or once a second each. The
# count is read again every FLEET_RECOUNT_SECONDS.
FLEET_POLLS_PER_SECOND = 20.0
SHORTEST_POLL_SECONDS = 0.1
FLEET_RECOUNT_SECONDS = 30.0


class ClaimLoop:
    def __init__(
        self,
        engine: Engine,
        db: LoopConnection,
        owner: str,
        pools: Sequence[str],
        jobs: HeldJobs,
        slots: Slots,
        outage: Outage,
        metrics: MetricsRecorder,
        liveness: Liveness,
        *,
        tenant_limit: int | None = None,
        max_claim_batch: int = MAX_CLAIM_BATCH,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
        prune_interval: float | None = DEFAULT_PRUNE_INTERVAL,
        reindex_interval: float | None = DEFAULT_REINDEX_INTERVAL,
        reindex_first_check: float = DEFAULT_FIRST_CHECK,
        listen: bool = True,
        secret_url: str | None = None,
    ) -> None:
        types = RunnableTypes(engine, slots.handlers, pools)
        self.claimer = Claimer(
            db,
            owner,
            pools,
            types,
            jobs,
            slots,
            outage,
            metrics,
            tenant_limit=tenant_limit,
            max_batch=max_claim_batch,
        )
        self._slots = slots
        self._outage = outage
        self._liveness = liveness
        self.poll_interval = poll_interval
        self.sweep_interval = sweep_interval
        self._executors: int | None = None  # live executors, counted while polling for wake-ups
        self._recount_at = 0.0
        self._due_unclaimed = False  # the last poll's claim took nothing though a job was due
        self.wake = threading.Event()
        self.idle = False  # the last claim found nothing due
        # Retention in bounded steps, over this loop's connection (no interval: never).
        self._pruner: Pruner | None = None  # made at first use (``pruner``)
        self._prune_interval = prune_interval or 0.0
        self._prunes = prune_interval is not None
        self._born = time.monotonic()
        # Index upkeep (PostgreSQL; no interval: never), in a thread of its own,
        # made at first use (``reindexer``), started after the first claim.
        self._engine = engine
        self._reindexes = reindex_interval is not None and engine.dialect.name == "postgresql"
        self._reindex_interval = reindex_interval or 0.0
        self._reindex_first_check = reindex_first_check
        self._secret_url = secret_url
        self._reindexer: Reindexer | None = None
        self._wakeups: Service | None = None
        if listen and engine.dialect.name == "postgresql":
            self._wakeups = Listener(engine, self.wake, outage)
        elif listen and engine.dialect.name == "sqlite":
            self._wakeups = SqliteWatcher(engine, self.wake)

    @property
    def pruner(self) -> Pruner:
        """Retention's stepper, made at first use (after the first claim, in ``run``)."""
        if self._pruner is None:
            from rota.executor.pruner import Pruner  # here: not on the way to the first claim

            self._pruner = Pruner(
                self.claimer.db,
                self.claimer.types.all,
                self._prune_interval,
                outage=self._outage,
                born=self._born,
            )
        return self._pruner

    @property
    def reindexer(self) -> Reindexer | None:
        """The index upkeep (None: off), made at first use; ``run`` starts it."""
        if self._reindexer is None and self._reindexes:
            from rota.executor.reindexer import Reindexer  # here: not on the way to a claim

            claimer = self.claimer
            self._reindexer = Reindexer(
                self._engine,
                lambda: self.idle and claimer.claiming,
                interval=self._reindex_interval,
                first_check=self._reindex_first_check,
                secret_url=self._secret_url,
            )
        return self._reindexer

    def start(self) -> None:
        """Start what runs beside the loop: the wake-ups (the index upkeep: ``run``)."""
        if self._wakeups is not None:
            self._wakeups.start()

    def _start_index_upkeep(self) -> None:
        """Start the index upkeep's thread, once the first claim is made: the first
        check is ``reindex_first_check`` (minutes) away, and its module is then
        imported off the path to that claim."""
        reindexer = self.reindexer
        if reindexer is not None and self.claimer.claiming:
            reindexer.start()

    def stop_claiming(self) -> None:
        """Claim nothing more; cancel a rebuild under way (it holds no job)."""
        self.claimer.claiming = False
        if self._reindexer is not None:  # none was made: none to stop
            self._reindexer.stop()

    def stop(self) -> None:
        """Stop the wake-ups and give the loop's connection back."""
        if self._wakeups is not None:
            self._wakeups.stop()
        self.claimer.db.close()

    def run(self, stop: threading.Event) -> None:
        """Claim and run jobs until ``stop`` is set."""

        def wake_on_stop() -> None:
            stop.wait()
            self.wake.set()
            self._slots.notify()

        spawn(wake_on_stop, "rota-stop")
        claimer = self.claimer
        next_sweep = 0.0
        upkeep_started = False
        polled = False  # the last wait ended by its timeout, not by a wake-up
        while not stop.is_set():
            self._outage.check()  # a permanent fault, met by any loop: stop
            self._liveness.passed("claim")
            handed_back = self._slots.hand_back_stale()
            if handed_back:  # the jobs running turned out long: others may take these
                emit(log, "prefetch_handed_back", logging.INFO, jobs=handed_back)
            if time.monotonic() >= next_sweep:
                self._guarded(claimer.sweep_once)
                next_sweep = time.monotonic() + self.sweep_interval
            self.wake.clear()
            asked = claimer.limit()
            if polled and asked > 0 and self._guarded(claimer.nothing_due):
                # A poll of an idle executor: the cheap question said a claim
                # would take nothing (on any error, the claim runs).
                claimed = 0
            else:
                claimed = self._guarded(claimer.claim_once) or 0
                # A poll found a job due that no claim here takes (its key is
                # running, its type is not runnable here, ...): the short poll
                # would repeat the claim ten times a second for nothing.
                self._due_unclaimed = polled and asked > 0 and claimed == 0
            polled = False
            self.idle = asked > 0 and claimed == 0
            if not upkeep_started:
                self._start_index_upkeep()
                upkeep_started = True
            if not self.idle and self._prunes and self.pruner.overdue():
                # A busy spell (every claim found work) has made a pruning pass
                # overdue: one bounded step between claims, until the pass is done.
                self.pruner.step()  # never raises: upkeep (see rota.executor.pruner)
            self._guarded(claimer.types.reload_if_stale)
            if asked == 0 or claimed == asked:
                # Busy, or more may be due: claim again once enough slots are free.
                until = min(next_sweep, time.monotonic() + 1.0)
                self._slots.wait_for_room(stop, until, claimer.max_batch)
                continue
            # The queue is drained for now: sleep until NOTIFY, a poll or a sweep.
            # When the claim found nothing at all (not merely fewer rows than asked,
            # which SKIP LOCKED gives while other executors claim too), first take
            # one bounded pruning step if a pass is due, then claim again.
            wait = min(
                self.poll_wait(),
                max(0.0, next_sweep - time.monotonic()),
                claimer.scan_starts.until_head_scan(),
            )
            if claimed == 0 and self._prunes and self.pruner.due() and self.pruner.step():
                wait = 0.0
            polled = not self.wake.wait(wait)

    def poll_wait(self) -> float:
        """How long an idle pass waits for a wake-up before it polls (see
        FLEET_POLLS_PER_SECOND): the poll interval once notifications are known to
        arrive, or after a poll whose claim took nothing although a job was due.
        Until the listener's probe has answered (up to 5 s after a start, or after
        its connection broke) they may not arrive: the shorter wait then too."""
        if (
            not isinstance(self._wakeups, Listener)
            or self._wakeups.delivering
            or self._due_unclaimed
        ):
            return self.poll_interval
        now = time.monotonic()
        if now >= self._recount_at:
            self._recount_at = now + FLEET_RECOUNT_SECONDS
            counted = self._guarded(self._live_executors)
            if counted is not None:
                self._executors = max(1, counted)
        if self._executors is None:
            return self.poll_interval
        spread = self._executors / FLEET_POLLS_PER_SECOND
        return min(self.poll_interval, max(SHORTEST_POLL_SECONDS, spread))

    def _live_executors(self) -> int:
        # Imported here: only an executor without notifications counts its peers.
        from rota.core.queries.workers import live_worker_counts

        with self.claimer.db.statement() as conn:
            return live_worker_counts(conn)[WorkerKind.EXECUTOR]

    def _guarded(self, fn: Callable[[], T]) -> T | None:
        try:
            done = fn()
        except Exception as exc:  # an outage: logged once, retried with backoff
            if not is_database_error(exc):  # a bug of ours: say so each time, go on
                emit(log, "tick_failed", logging.WARNING, error=describe(exc))
                self.wake.wait(min(self.poll_interval, 1.0))
                return None
            delay = self._outage.failed(exc, "claim")
            self._outage.check()  # a database that can never work: stop
            self.wake.wait(delay)
            return None
        return done
