"""``rota job ID``: one job, what it is doing, its attempt history and operator actions.

ID is the job's id or a unique prefix of it (at least 8 hex digits).

``--output`` prints instead the tail of what one attempt's handler wrote (its
command's stdout and stderr, its log records), exactly as kept (on a terminal,
control characters but tab and newline show as ``\\xNN``): the latest
attempt, or ``--attempt N`` (1 for the first, in the order they started). A
note on stderr says when earlier output was not kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

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


def run(args: argparse.Namespace) -> int:
    if args.attempt is not None and not args.output:
        raise UserError("--attempt goes with --output: rota job ID --output --attempt N")
    number = _attempt_number(args.attempt)
    with open_database(args) as engine, engine.connect() as conn:
        try:
            job_id = resolve_job_id(conn, args.job_id)
        except JobRefError as exc:
            raise UserError(str(exc)) from None
        if args.output:
            kept = attempt_output(conn, job_id, number)
            if kept is None:
                which = "no attempts yet" if number is None else f"no attempt {number}"
                raise UserError(f"job {job_id} has {which}")
            return _print_output(job_id, kept, args.json)
        now = database_now(conn)
        job = get_job(conn, job_id)
        if job is None:  # pruned since the lookup
            raise UserError(f"no job {job_id}")
        attempts = get_attempts(conn, job_id)
        actions = actions_of_job(conn, job_id)
    if args.json:
        data = job_json(job, now)
        data["attempts"] = [attempt_json(a) for a in attempts]
        data["operator_actions"] = [action_json(a) for a in actions]
        print(json.dumps(data, indent=2))
    else:
        print(job_detail(job, attempts, now, actions))
    return 0


def _print_output(job_id: object, kept: AttemptOutput, as_json: bool) -> int:
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
        return 0
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
    # A terminal gets the control characters shown; a pipe or a file gets them as kept.
    sys.stdout.write(visible(kept.output) if sys.stdout.isatty() else kept.output)
    sys.stdout.flush()
    return 0
