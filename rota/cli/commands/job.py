"""``rota job ID``: one job, what it is doing, its attempt history and operator actions.

ID is the job's id or a unique prefix of it (at least 8 hex digits).

``--output`` prints instead the tail of what one attempt's handler wrote (its
command's stdout and stderr, its log records), exactly as kept (on a terminal,
control characters but tab and newline show as ``\\xNN``): the latest
attempt, or ``--attempt N`` (1 for the first, in the order they started). A
note on stderr says when earlier output was not kept.

``--follow`` then keeps printing what that attempt writes, as its lease
renewals keep it (at most once every third of the lease) and as its outcome
ends it, polling every ``FOLLOW_SECONDS``; it ends with the attempt, saying
how on stderr. Each poll is a connection of its own: a read transaction kept
open would see one snapshot for ever (SQLite in WAL mode).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any

from sqlalchemy import Connection, Engine

from rota.cli.common import UserError, add_db_option, open_database
from rota.cli.status import action_json, attempt_json, job_detail, job_json, visible
from rota.core.queries.attempt_output import AttemptOutput, attempt_output
from rota.core.queries.job_ids import JobRefError, resolve_job_id
from rota.core.queries.jobs_read import database_now, get_attempts, get_job
from rota.core.queries.operator_actions import actions_of_job
from rota.core.storable import ATTEMPT_OUTPUT_MAX_BYTES


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser("job", help="show one job")
    p.add_argument("job_id", metavar="ID", help="the job's id, or at least 8 of its first digits")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--output",
        action="store_true",
        help="print the tail of what an attempt's handler wrote (default: the latest attempt)",
    )
    p.add_argument(
        "--follow",
        action="store_true",
        help="with --output: go on printing what the attempt writes, until it ends",
    )
    p.add_argument(
        "--attempt",
        metavar="N",
        help="with --output: the job's Nth attempt, 1 for the first, in the order they started",
    )
    add_db_option(p)
    p.set_defaults(func=run)


def _attempt_number(text: str | None) -> int | None:
    if text is None:
        return None
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 18 or int(value) < 1:
        raise UserError(f"--attempt: {text[:40]!r} is not an attempt number (1, 2, ...)")
    return int(value)


FOLLOW_SECONDS = 1.0


def run(args: argparse.Namespace) -> int:
    if args.attempt is not None and not args.output:
        raise UserError("--attempt goes with --output: rota job ID --output --attempt N")
    if args.follow and not args.output:
        raise UserError("--follow goes with --output: rota job ID --output --follow")
    if args.follow and args.json:
        raise UserError("--follow prints text as it comes: leave out --json")
    number = _attempt_number(args.attempt)
    with open_database(args) as engine:
        with engine.connect() as conn:
            try:
                job_id = resolve_job_id(conn, args.job_id)
            except JobRefError as exc:
                raise UserError(str(exc)) from None
            if not args.output:
                return _print_job(conn, job_id, args.json)
            kept = attempt_output(conn, job_id, number)
        if kept is None:
            which = "no attempts yet" if number is None else f"no attempt {number}"
            raise UserError(f"job {job_id} has {which}")
        _print_output(job_id, kept, args.json)
        return _follow(engine, job_id, kept) if args.follow else 0


def _print_job(conn: Connection, job_id: uuid.UUID, as_json: bool) -> int:
    now = database_now(conn)
    job = get_job(conn, job_id)
    if job is None:  # pruned since the lookup
        raise UserError(f"no job {job_id}")
    attempts = get_attempts(conn, job_id)
    actions = actions_of_job(conn, job_id)
    if as_json:
        data = job_json(job, now)
        data["attempts"] = [attempt_json(a) for a in attempts]
        data["operator_actions"] = [action_json(a) for a in actions]
        print(json.dumps(data, indent=2))
    else:
        print(job_detail(job, attempts, now, actions))
    return 0


def _follow(engine: Engine, job_id: uuid.UUID, kept: AttemptOutput) -> int:
    """Print what attempt ``kept.number`` writes after ``kept``, until it ends."""
    seen = kept.dropped_bytes + len(kept.output.encode())  # bytes written so far
    while kept.outcome is None:
        time.sleep(FOLLOW_SECONDS)
        with engine.connect() as conn:
            latest = attempt_output(conn, job_id, kept.number)
        if latest is None:  # the job was pruned meanwhile
            raise UserError(f"job {job_id} is gone")
        kept = latest
        data = kept.output.encode()
        fresh = kept.dropped_bytes + len(data) - seen
        if fresh > len(data):
            print(f"({fresh - len(data):,} bytes not kept)", file=sys.stderr)
        if fresh > 0:
            _write(data[-fresh:].decode(errors="replace"))
            seen += fresh
    print(f"(attempt {kept.number} ended: {kept.outcome})", file=sys.stderr)
    return 0


def _write(text: str) -> None:
    # A terminal gets the control characters shown; a pipe or a file gets them as kept.
    sys.stdout.write(visible(text) if sys.stdout.isatty() else text)
    sys.stdout.flush()


def _print_output(job_id: object, kept: AttemptOutput, as_json: bool) -> None:
    if as_json:
        data = {
            "job_id": str(job_id),
            "attempt": kept.number,
            "lease_generation": kept.lease_generation,
            "outcome": kept.outcome,
            "output": kept.output,
            "dropped_bytes": kept.dropped_bytes,
        }
        print(json.dumps(data, indent=2))
        return
    if kept.dropped_bytes:
        print(
            f"(attempt {kept.number}: {kept.dropped_bytes:,} earlier bytes not kept; the last "
            f"{ATTEMPT_OUTPUT_MAX_BYTES // 1024} KiB follow)",
            file=sys.stderr,
        )
    if kept.outcome is None:
        print(
            f"(attempt {kept.number} is still running: "
            + (
                "its output up to its last lease renewal follows)"
                if kept.output
                else "it had written nothing at its last lease renewal)"
            ),
            file=sys.stderr,
        )
    _write(kept.output)
