"""``rota replay ID``: put a FAILED job back in the queue with a fresh attempt budget.

The job's attempt history (``job_attempts``) is kept and its lease generation
keeps counting up. Only a FAILED job can be replayed: any other state, an
unknown id or a malformed one is bad input (exit 2).
"""

from __future__ import annotations

import argparse
from typing import Any

from rota.cli.commands.cancel import parse_job_id
from rota.cli.common import EXIT_OK, UserError, add_db_option, open_database
from rota.shared.queries.jobs_control import replay_failed


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "replay", help="requeue a FAILED job with a fresh attempt budget, keeping its history"
    )
    add_db_option(p)
    p.add_argument("job_id", metavar="ID", help="the job's id")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    job_id = parse_job_id(args.job_id)
    with open_database(args) as engine, engine.begin() as conn:
        result = replay_failed(conn, job_id)
    if result.state is None:
        raise UserError(f"no job {job_id}")
    if not result.changed:
        raise UserError(f"job {job_id} is {result.state.value}: only a FAILED job can be replayed")
    print(f"{job_id}: queued again with a fresh attempt budget")
    return EXIT_OK
