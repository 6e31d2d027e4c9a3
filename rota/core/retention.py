"""Which finished jobs are due for pruning: each job type's ``retain``, per final state.

A job type's ``retain`` block (``core.config.Retention``) says how long
its SUCCEEDED, CANCELLED and FAILED jobs are kept; a job whose type is not
stored takes the defaults. ``prune_rules`` turns that into one ``PruneRule``
per (state, job type) that has finished jobs, found with a loose scan of
``ix_jobs_finished`` (one index probe per job type). Executors run the rules
when idle (``rota.executor.pruner``), ``rota prune`` by hand.

The skip ledger is bounded by age: rows older than ``SKIP_LEDGER_RETAIN``
are folded (``core.queries.jobs_prune.fold_old_skips``), totals kept. So are
the late records: those of occurrences older than ``LATE_RETAIN`` are deleted
(``core.queries.late_occurrences.prune_old_late``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta

from sqlalchemy import Connection

from rota.core.config import JobTypeSpec, Retention
from rota.core.queries.jobs_prune import PruneRule, finished_job_types
from rota.core.states import TERMINAL

SKIP_LEDGER_RETAIN = timedelta(days=30)
# A quarter of late records: enough for a monthly review, not a table that only grows.
LATE_RETAIN = timedelta(days=90)


def retention_of(specs: Mapping[str, JobTypeSpec], job_type: str) -> Retention:
    spec = specs.get(job_type)
    return spec.retain if spec is not None else Retention()


def prune_rules(
    conn: Connection,
    specs: Mapping[str, JobTypeSpec],
    *,
    states: Iterable[str] = TERMINAL,
    older_than: timedelta | None = None,
) -> list[PruneRule]:
    """One rule per (state, job type) with finished jobs; ``older_than`` overrides ``retain``."""
    rules = []
    for state in states:
        for job_type in finished_job_types(conn, state):
            keep = (
                older_than
                if older_than is not None
                else (retention_of(specs, job_type).for_state(state))
            )
            if keep is not None:
                rules.append(PruneRule(state, job_type, keep))
    return rules
