"""``rota prune [--older-than D] [--state S] [--dry-run]``: delete finished jobs now.

Executors prune on their own while idle, by each job type's ``retain`` block
(defaults: SUCCEEDED and CANCELLED 7d, FAILED 30d). This command does the
same by hand, in the same bounded batches (one short transaction each, so
running executors are never held up), until nothing is left to prune.
``--older-than D`` replaces every job type's retention for this run;
``--state S`` limits it to one final state. Attempt rows go with their job;
skip-ledger rows older than the retention are folded (totals kept) unless
``--state`` is given. An occurrence whose job is pruned is never created again
(see ``rota backfill``).
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine

from rota.cli.common import EXIT_OK, UserError, add_config_option, add_db_option, open_database
from rota.core.durations import DurationError, format_duration, parse_duration
from rota.core.queries.job_types import load_job_types
from rota.core.queries.jobs_prune import (
    PRUNE_BATCH,
    PruneRule,
    count_prunable,
    fold_old_skips,
    prune_finished_batch,
)
from rota.core.retention import SKIP_LEDGER_RETAIN, prune_rules
from rota.core.states import TERMINAL


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "prune",
        help="delete finished jobs past their retention (executors also do it when idle)",
        description=(
            "Delete finished jobs (and their attempt rows) that have been finished for "
            "longer than their job type's retain: value (default: SUCCEEDED and CANCELLED "
            "7d, FAILED 30d), in short batches. An occurrence whose job was pruned is never "
            "created again."
        ),
    )
    p.add_argument(
        "--older-than",
        metavar="D",
        help="prune jobs finished longer ago than D (like 12h or 30d), whatever retain says",
    )
    p.add_argument(
        "--state",
        type=str.upper,
        metavar="S",
        help="only jobs in this final state: " + ", ".join(TERMINAL),
    )
    p.add_argument("--dry-run", action="store_true", help="count what would go; delete nothing")
    add_db_option(p)
    add_config_option(p)
    p.set_defaults(func=run)


def _older_than(text: str | None) -> timedelta | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise UserError(f"--older-than: {exc}") from None


def run(args: argparse.Namespace) -> int:
    older_than = _older_than(args.older_than)
    if args.state is not None and args.state not in TERMINAL:
        raise UserError(
            f"--state {args.state}: only finished jobs are pruned: one of {', '.join(TERMINAL)}"
        )
    states = (args.state,) if args.state is not None else TERMINAL
    with open_database(args) as engine:
        with engine.begin() as conn:
            rules = prune_rules(conn, load_job_types(conn), states=states, older_than=older_than)
        if args.dry_run:
            _dry_run(engine, rules)
            return EXIT_OK
        jobs = attempts = 0
        for rule in rules:
            n, a = _prune_rule(engine, rule)
            jobs += n
            attempts += a
            if n:
                print(f"{rule.state} {rule.job_type}: {_what(rule)}: {n} pruned")
        line = f"pruned {jobs} finished job(s) and {attempts} attempt row(s)"
        if args.state is None:
            keep = older_than if older_than is not None else SKIP_LEDGER_RETAIN
            line += f"; folded {_fold(engine, keep)} skip-ledger row(s) older than "
            line += format_duration(keep)
        print(line)
    return EXIT_OK


def _what(rule: PruneRule) -> str:
    return f"finished more than {format_duration(rule.older_than)} ago"


def _dry_run(engine: Engine, rules: list[PruneRule]) -> None:
    total = 0
    with engine.connect() as conn:
        for rule in rules:
            n = count_prunable(conn, rule)
            total += n
            if n:
                print(f"{rule.state} {rule.job_type}: {_what(rule)}: {n} would be pruned")
    print(f"dry run: {total} finished job(s) would be pruned; nothing was deleted")


def _prune_rule(engine: Engine, rule: PruneRule) -> tuple[int, int]:
    jobs = attempts = 0
    while True:
        with engine.begin() as conn:  # one short transaction per batch
            pruned = prune_finished_batch(conn, rule, limit=PRUNE_BATCH)
        jobs += pruned.jobs
        attempts += pruned.attempts
        if pruned.jobs < PRUNE_BATCH:
            return jobs, attempts


def _fold(engine: Engine, keep: timedelta) -> int:
    total = 0
    while True:
        with engine.begin() as conn:
            n = fold_old_skips(conn, keep)
        total += n
        if n == 0:
            return total
