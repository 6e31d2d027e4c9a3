"""The single and bulk forms shared by ``rota cancel`` and ``rota replay``.

``rota cancel ID`` / ``rota replay ID``: one job, by id or unique prefix.
``rota cancel --type T --state QUEUED`` / ``rota replay --state FAILED --type T``:
every matching job, in bounded batches (``--batch-size``, default 1000 per
transaction), printing the count; ``--dry-run`` counts and changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import Engine

from rota.cli import bounds
from rota.cli.common import RuntimeFailure, UserError, add_db_option, add_note_options
from rota.cli.filters import add_filter_options, has_filter, job_filter
from rota.core.database import short_error
from rota.core.operator_notes import ActionNote
from rota.core.queries.jobs_read import JobFilter
from rota.operations.jobs import (
    BULK_BATCH,
    BulkInterrupted,
    BulkResult,
    StateNotAllowed,
    count_matching,
)

BulkRun = Callable[[Engine, JobFilter, ActionNote, int], BulkResult]


def add_single_and_bulk_options(p: argparse.ArgumentParser, states_help: str) -> None:
    p.add_argument(
        "job_id",
        metavar="ID",
        nargs="?",
        help="the job's id, or at least 8 of its first hex digits; or filters instead",
    )
    add_note_options(p)
    add_filter_options(p, states_help=states_help)
    p.add_argument("--dry-run", action="store_true", help="bulk form: count, change nothing")
    p.add_argument(
        "--batch-size",
        type=bounds.BULK_BATCH_SIZE,
        default=BULK_BATCH,
        metavar="N",
        help=f"bulk form: jobs changed per transaction (default {BULK_BATCH})",
    )
    add_db_option(p)


def check_form(args: argparse.Namespace, command: str) -> bool:
    """True for the bulk form; mixing an ID with filters, or giving neither, is exit 2."""
    bulk = has_filter(args)
    if args.job_id is not None and bulk:
        raise UserError(
            f"give a job ID or filters (--state, --type, --schedule, --since), not both: "
            f"`rota {command} ID` acts on one job, the filters on every job they match"
        )
    if args.job_id is None and not bulk:
        raise UserError(
            f"give a job ID, or filters for the bulk form (like `rota {command} --type T "
            "--state ...`)"
        )
    if not bulk and args.dry_run:
        raise UserError("--dry-run is for the bulk form (with filters)")
    return bulk


def run_bulk(
    engine: Engine,
    args: argparse.Namespace,
    note: ActionNote,
    states_of: Callable[[JobFilter], tuple[str, ...]],
    run: BulkRun,
    verb: str,
    done: str,
) -> None:
    """Count (``--dry-run``) or change every job the filters match, and print how many."""
    with engine.connect() as conn:
        where = job_filter(conn, args)
        try:
            states = states_of(where)
        except StateNotAllowed as exc:
            raise UserError(f"--state: {exc}") from None
        counts = count_matching(conn, replace(where, states=states)) if args.dry_run else {}
    if args.dry_run:
        parts = ", ".join(f"{counts[s]} {s}" for s in states if counts.get(s))
        print(
            f"would {verb} {sum(counts.values())} job(s)"
            f"{f' ({parts})' if parts else ''}; dry run: nothing changed"
        )
        return
    try:
        result = run(engine, where, note, args.batch_size)
    except BulkInterrupted as exc:
        raise RuntimeFailure(
            f"stopped by a database error after {exc.done.total} job(s) {done} in "
            f"{exc.done.batches} committed transaction(s): {short_error(exc.cause)}; "
            "those changes stay: run the same command again to go on"
        ) from None
    parts = ", ".join(f"{n} now {state.value}" for state, n in sorted(result.changed.items()))
    print(f"{result.total} job(s) {done}{f' ({parts})' if parts else ''}")
    if result.batches > 1:
        print(f"(in {result.batches} transactions of at most {args.batch_size})", file=sys.stderr)
