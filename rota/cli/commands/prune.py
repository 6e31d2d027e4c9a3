"""``rota prune [--older-than D] [--state S] [--dry-run]``: delete finished jobs now.

Executors prune on their own while idle, by each job type's ``retain`` block
(defaults: SUCCEEDED and CANCELLED 7d, FAILED 30d). This command does the
same by hand, in the same bounded batches (one short transaction each, so
running executors are never held up), until nothing is left to prune.
``--older-than D`` replaces every job type's retention for this run;
``--state S`` limits it to one final state. Attempt rows go with their job;
skip-ledger rows older than the retention are folded (totals kept), and late
records of occurrences older than 90 days (or ``--older-than``) deleted, unless
``--state`` is given. An occurrence whose job is pruned is never created again
(see ``rota backfill``). The run is one operator action (``rota audit``) with
``--reason`` and ``--actor``; see ``rota.operations.prune``.
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from rota.cli.common import (
    EXIT_OK,
    UserError,
    add_config_option,
    add_db_option,
    add_note_options,
    open_database,
    operator_note,
)
from rota.core.durations import DurationError, format_duration, parse_duration
from rota.core.queries.jobs_prune import PruneRule
from rota.core.states import TERMINAL
from rota.operations.prune import count, prune


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
    add_note_options(p)
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
    note = operator_note(args)
    with open_database(args) as engine:
        if args.dry_run:
            total = 0
            for counted in count(engine, args.state, older_than):
                total += counted.jobs
                if counted.jobs:
                    print(f"{_rule(counted.rule)}: {counted.jobs} would be pruned")
            print(f"dry run: {total} finished job(s) would be pruned; nothing was deleted")
            return EXIT_OK
        result = prune(engine, state=args.state, older_than=older_than, note=note)
    for done in result.by_rule:
        print(f"{_rule(done.rule)}: {done.jobs} pruned")
    line = f"pruned {result.jobs} finished job(s) and {result.attempts} attempt row(s)"
    if result.folded is not None and result.folded_older_than is not None:
        line += f"; folded {result.folded} skip-ledger row(s) older than "
        line += format_duration(result.folded_older_than)
    if result.late is not None and result.late_older_than is not None:
        line += f"; deleted {result.late} late record(s) of occurrences older than "
        line += format_duration(result.late_older_than)
    print(line)
    return EXIT_OK


def _rule(rule: PruneRule) -> str:
    return (
        f"{rule.state} {rule.job_type}: finished more than {format_duration(rule.older_than)} ago"
    )
