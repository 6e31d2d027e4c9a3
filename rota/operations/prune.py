"""Pruning finished jobs by hand (``rota prune``), in bounded batches, on record.

The rules are the executors' own (``rota.core.retention``: each job type's
``retain``), or one age for every job type (``older_than``), for every final
state or one (``state``). Each batch is one short transaction
(``prune_finished_batch``), so running executors are never held up; the
skip ledger is folded when every state is pruned. The metric series of a
removed schedule go with its last job (``forget_series_of_gone``).

A prune is ONE operator action, not one per deleted job (a prune can delete
millions): its target is the jobs it chose, in words (``describe``), written
with the first batch, so a prune stopped half-way is on record. The jobs'
own actions go with them (their rows cascade); a prune's row stays.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine

from rota.core.durations import format_duration
from rota.core.operator_notes import ActionNote, OperatorAction
from rota.core.queries.job_types import load_job_types
from rota.core.queries.jobs_prune import (
    PRUNE_BATCH,
    PruneRule,
    count_prunable,
    fold_old_skips,
    prune_finished_batch,
)
from rota.core.queries.late_occurrences import prune_old_late
from rota.core.queries.metric_tables import forget_series_of_gone
from rota.core.queries.operator_actions import record_jobs_action
from rota.core.queries.schedules import live_schedule_names
from rota.core.retention import LATE_RETAIN, SKIP_LEDGER_RETAIN, prune_rules
from rota.core.states import TERMINAL
from rota.runtime.events import emit

log = logging.getLogger("rota.operator")


@dataclass(frozen=True)
class RulePruned:
    rule: PruneRule
    jobs: int


@dataclass(frozen=True)
class PruneResult:
    jobs: int
    attempts: int
    by_rule: list[RulePruned]  # the rules that deleted something, in order
    folded: int | None  # skip-ledger rows folded; None when one state was pruned
    folded_older_than: timedelta | None
    late: int | None = None  # late records deleted; None when one state was pruned
    late_older_than: timedelta | None = None


def describe(state: str | None, older_than: timedelta | None) -> str:
    """The jobs a prune chooses, as its audit row names them."""
    if older_than is None:
        return f"{state or 'finished'} jobs past their job type's retain"
    jobs = f"{state} jobs" if state else "jobs"
    return f"{jobs} finished more than {format_duration(older_than)} ago"


def rules_for(conn: Connection, state: str | None, older_than: timedelta | None) -> list[PruneRule]:
    states = (state,) if state is not None else TERMINAL
    return prune_rules(conn, load_job_types(conn), states=states, older_than=older_than)


def count(engine: Engine, state: str | None, older_than: timedelta | None) -> list[RulePruned]:
    """What a prune would delete, per rule (a dry run: nothing changes, nothing recorded)."""
    with engine.connect() as conn:
        return [RulePruned(r, count_prunable(conn, r)) for r in rules_for(conn, state, older_than)]


def prune(
    engine: Engine,
    *,
    state: str | None = None,
    older_than: timedelta | None = None,
    note: ActionNote | None = None,
    now: datetime | None = None,
) -> PruneResult:
    """Delete the finished jobs the rules choose; with ``note``, record one operator action."""
    job_filter = describe(state, older_than)
    unrecorded = note  # until the first transaction that deletes records it
    with engine.connect() as conn:
        rules = rules_for(conn, state, older_than)
    jobs = attempts = 0
    by_rule = []
    for rule in rules:
        n = 0
        while True:
            with engine.begin() as conn:  # one short transaction per batch
                pruned = prune_finished_batch(conn, rule, limit=PRUNE_BATCH, now=now)
                if unrecorded is not None:
                    record_jobs_action(conn, OperatorAction.PRUNE, job_filter, unrecorded, now)
                    unrecorded = None
            n += pruned.jobs
            attempts += pruned.attempts
            if pruned.jobs < PRUNE_BATCH:
                break
        jobs += n
        if n:
            by_rule.append(RulePruned(rule, n))
    if unrecorded is not None:  # nothing finished at all: asked for all the same
        with engine.begin() as conn:
            record_jobs_action(conn, OperatorAction.PRUNE, job_filter, unrecorded, now)
    folded: int | None = None
    keep: timedelta | None = None
    late: int | None = None
    keep_late: timedelta | None = None
    if state is None:
        keep = older_than if older_than is not None else SKIP_LEDGER_RETAIN
        folded = _fold(engine, keep)
        keep_late = older_than if older_than is not None else LATE_RETAIN
        late = _prune_late(engine, keep_late, now)
    with engine.begin() as conn:  # the series of removed schedules whose last job went
        forgotten = forget_series_of_gone(conn, "schedule", live_schedule_names(conn))
    if forgotten:
        emit(log, "metric_series_forgotten", schedules=",".join(forgotten)[:1000])
    emit(
        log,
        "jobs_pruned",
        jobs=jobs,
        attempts=attempts,
        target=job_filter,
        actor=note.actor if note else None,
        reason=note.reason if note else None,
    )
    return PruneResult(jobs, attempts, by_rule, folded, keep, late, keep_late)


def _prune_late(engine: Engine, keep: timedelta, now: datetime | None) -> int:
    return _in_batches(
        engine, lambda conn: prune_old_late(conn, keep, limit=PRUNE_BATCH, now=now), PRUNE_BATCH
    )


def _fold(engine: Engine, keep: timedelta) -> int:
    return _in_batches(engine, lambda conn: fold_old_skips(conn, keep), 1)


def _in_batches(engine: Engine, batch: Callable[[Connection], int], full: int) -> int:
    """Run ``batch`` in a short transaction of its own until it changes fewer than
    ``full`` rows (it had no more to do); the rows changed in all."""
    total = 0
    while True:
        with engine.begin() as conn:
            n = batch(conn)
        total += n
        if n < full:
            return total
