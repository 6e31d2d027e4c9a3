"""Retention in the executor: prune finished jobs in bounded steps while the queue is empty.

Every executor has a ``Pruner``; the claim loop calls ``step()`` only when
its last claim found nothing due at all (a claim that merely came back short
may have lost rows to another executor's SKIP LOCKED) and a pass is due, so
pruning never takes a turn a claim could have used. A pass starts every
``interval`` seconds: it lists the (state, job type) rules
(``core.retention.prune_rules``), then each ``step()`` deletes at most
``batch`` jobs in one short transaction (PostgreSQL: ``SKIP LOCKED``, so
executors pruning at once take different rows; SQLite: one short write
transaction), and the claim loop claims again between steps. Then each step
deletes up to ``batch`` late records of occurrences older than
``LATE_RETAIN``; the one that finds fewer also folds old skip-ledger rows and
deletes the metric series of removed schedules whose last job went
(``forget_series_of_gone``), and ends the pass.

An executor that never finds the queue empty (a steady backlog) would never
prune, and its history would grow without end: once a pass is ``OVERDUE_INTERVALS``
intervals late, the claim loop takes its steps between claims even while busy,
one step per claim, until the pass is done.

Pruning is upkeep: a step that fails (a role that may not DELETE, a lock or
statement timeout, a busy SQLite file) never stops the executor or pauses its
claims. The pass goes on with its other rules and the fold, one
``prune_failed`` WARNING a pass (at most one a minute) says what failed and
why, and the next pass tries again an interval later. While the claim loop
is riding out an outage (``Outage.ongoing``), its own line says it all and
the pruner says nothing more.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime

from rota.core.config import JobTypeSpec
from rota.core.queries.jobs_prune import (
    PRUNE_BATCH,
    PruneRule,
    fold_old_skips,
    prune_finished_batch,
)
from rota.core.queries.late_occurrences import prune_old_late
from rota.core.queries.metric_tables import forget_series_of_gone
from rota.core.queries.schedules import live_schedule_names
from rota.core.retention import LATE_RETAIN, SKIP_LEDGER_RETAIN, prune_rules
from rota.executor.transactions import LoopConnection
from rota.executor.upkeep import DEFAULT_PRUNE_INTERVAL
from rota.runtime.events import emit
from rota.runtime.outage import Outage, describe

log = logging.getLogger("rota.executor")

SQLITE_PRUNE_BATCH = 500  # one write transaction holds the database's only write lock
OVERDUE_INTERVALS = 10  # a pass this many intervals late is taken while busy, too
PRUNE_FAILED_EVERY = 60.0  # seconds: at most one prune_failed line this often


class Pruner:
    def __init__(
        self,
        db: LoopConnection,
        specs: Callable[[], Mapping[str, JobTypeSpec]],
        interval: float = DEFAULT_PRUNE_INTERVAL,
        batch: int | None = None,
        outage: Outage | None = None,
        born: float | None = None,
    ) -> None:
        """``born``: when the executor started (monotonic; default now): a busy start
        is not a late pass."""
        self._db = db
        self._specs = specs
        self._outage = outage
        self.interval = interval
        self.batch = batch or (
            PRUNE_BATCH if db.engine.dialect.name == "postgresql" else SQLITE_PRUNE_BATCH
        )
        self._next_pass = 0.0  # monotonic; the first pass comes at the first idle moment
        self._born = time.monotonic() if born is None else born
        self._rules: list[PruneRule] | None = None  # the pass under way, rules left
        self._said_failed = False  # this pass has logged its prune_failed line
        self._said_at = -PRUNE_FAILED_EVERY  # monotonic, when one was last logged

    def due(self, mono: float | None = None) -> bool:
        return (
            self._rules is not None
            or (time.monotonic() if mono is None else mono) >= self._next_pass
        )

    def overdue(self, mono: float | None = None) -> bool:
        """A pass is due and ``OVERDUE_INTERVALS`` intervals late (or under way, late).

        Never with no interval: a pass every claim would be no better than none."""
        if self.interval <= 0:
            return False
        late = max(self._next_pass, self._born) + OVERDUE_INTERVALS * self.interval
        return (time.monotonic() if mono is None else mono) >= late

    def step(self, now: datetime | None = None) -> bool:
        """One bounded piece of the current pass; True while the pass has more to do.

        Never raises an ``Exception``: a failing step is logged (once a pass) and
        skipped. One with no rule left to try (listing the rules, folding the
        skip ledger, or the last rule) ends the pass: the next comes an interval
        later, instead of being retried after every claim."""
        doing = "listing the retention rules"
        ends = True  # a failure here ends the pass (listing the rules, folding)
        try:
            if self._rules is None:
                self._said_failed = False
            elif self._rules:
                rule = self._rules[0]
                doing = f"pruning {rule.state} jobs of {rule.job_type}"
                ends = False  # the rule is dropped; the next one, or the fold, follows
            else:
                doing = "pruning old late records and folding the skip ledger"
            return self._step(now)
        except Exception as exc:
            self._failed(doing, exc)
            if ends:
                self._end_pass()
                return False
            return True

    def _failed(self, doing: str, exc: Exception) -> None:
        if self._said_failed or (self._outage is not None and self._outage.ongoing):
            return
        mono = time.monotonic()
        if mono < self._said_at + PRUNE_FAILED_EVERY:  # passes close together (interval 0)
            return
        self._said_failed, self._said_at = True, mono
        emit(
            log,
            "prune_failed",
            logging.WARNING,
            step=doing,
            error=describe(exc, self._db.engine.url.render_as_string(hide_password=False)),
            retry_in_seconds=round(self.interval, 1),
        )

    def _end_pass(self) -> None:
        self._rules = None
        self._next_pass = time.monotonic() + self.interval

    def _step(self, now: datetime | None) -> bool:
        if self._rules is None:
            with self._db.statement() as conn:
                self._rules = prune_rules(conn, self._specs())
            return True
        if self._rules:
            rule = self._rules[0]
            try:
                with self._db.begin() as conn:
                    pruned = prune_finished_batch(conn, rule, limit=self.batch, now=now)
            except Exception:
                self._rules.pop(0)  # one failing rule does not hold up the rest of the pass
                raise
            if pruned.jobs < self.batch:
                self._rules.pop(0)
            if pruned.jobs:
                emit(
                    log,
                    "jobs_pruned",
                    state=rule.state,
                    job_type=rule.job_type,
                    jobs=pruned.jobs,
                    attempts=pruned.attempts,
                )
            return True
        with self._db.begin() as conn:
            late = prune_old_late(conn, LATE_RETAIN, limit=self.batch, now=now)
        if late:
            emit(log, "late_pruned", rows=late)
        if late == self.batch:
            return True  # more old late records: the next step takes them, then the fold
        with self._db.begin() as conn:
            folded = fold_old_skips(conn, SKIP_LEDGER_RETAIN, now=now)
            forgotten = forget_series_of_gone(conn, "schedule", live_schedule_names(conn))
        if folded:
            emit(log, "skips_folded", rows=folded)
        if forgotten:
            emit(log, "metric_series_forgotten", schedules=",".join(forgotten)[:1000])
        self._end_pass()
        return False
