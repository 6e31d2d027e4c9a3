"""``rota cancel ID``: request cancellation of a job.

A QUEUED or RETRY_WAIT job is cancelled at once. A RUNNING job is asked to stop
(CANCEL_REQUESTED): its handler learns it at its next ``ctx.checkpoint()`` and
the worker acknowledges (CANCELLED); if the worker died, the sweeper cancels it
when the lease expires. A job that already finished is left as it is: the
command says so and exits 0 (the job is not running, which is what was asked).
An unknown id or a malformed one is bad input (exit 2).
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from rota.cli.common import EXIT_OK, UserError, add_db_option, open_database
from rota.shared.queries.jobs_control import request_cancel
from rota.shared.states import JobState


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "cancel", help="request cancellation of a job (cooperative for a running job)"
    )
    add_db_option(p)
    p.add_argument("job_id", metavar="ID", help="the job's id")
    p.set_defaults(func=run)


def parse_job_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise UserError(f"{text!r} is not a job id (a UUID, as `rota jobs` prints it)") from None


def run(args: argparse.Namespace) -> int:
    job_id = parse_job_id(args.job_id)
    with open_database(args) as engine, engine.begin() as conn:
        result = request_cancel(conn, job_id)
    if result.state is None:
        raise UserError(f"no job {job_id}")
    if result.changed and result.state is JobState.CANCELLED:
        print(f"{job_id}: cancelled")
    elif result.changed:
        print(f"{job_id}: cancellation requested; the running handler stops at its next checkpoint")
    elif result.state is JobState.CANCEL_REQUESTED:
        print(f"{job_id}: cancellation was already requested")
    else:
        print(f"{job_id}: already finished ({result.state.value}); nothing to cancel")
    return EXIT_OK
