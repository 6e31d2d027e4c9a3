"""``rota cancel ID`` / ``rota cancel --type T --state QUEUED``: request cancellation.

A QUEUED or RETRY_WAIT job is cancelled at once. A RUNNING job is asked to stop
(CANCEL_REQUESTED): its handler learns it at its next ``ctx.checkpoint()`` and
the worker acknowledges (CANCELLED); if the worker died, the sweeper cancels it
when the lease expires. A job that already finished is left as it is: the
command says so and exits 0 (the job is not running, which is what was asked).
An unknown id, an ambiguous prefix or a malformed one is bad input (exit 2).

The bulk form cancels every job the filters match (in QUEUED, RETRY_WAIT or
RUNNING, or the ``--state`` given among them), in bounded batches, with the same
statement as the single form. ``--reason`` is kept with the actor (the OS user at
this host, or ``--actor``) and the time, one ``rota audit`` row per job.
"""

from __future__ import annotations

import argparse
from typing import Any

from rota.cli.bulk import add_single_and_bulk_options, check_form, run_bulk
from rota.cli.common import EXIT_OK, UserError, open_database, operator_note
from rota.core.queries.job_ids import JobRefError
from rota.core.states import JobState
from rota.operations.jobs import bulk_cancel, cancel_job, cancel_states


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "cancel",
        help="request cancellation of a job, or of every job matching filters",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    add_single_and_bulk_options(
        p, "bulk form: QUEUED, RETRY_WAIT and/or RUNNING (default: all three)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    bulk = check_form(args, "cancel")
    note = operator_note(args)
    with open_database(args) as engine:
        if bulk:
            run_bulk(
                engine,
                args,
                note,
                states_of=cancel_states,
                run=lambda e, where, n, batch: bulk_cancel(e, where, n, batch=batch),
                verb="cancel",
                done="cancelled",
            )
            return EXIT_OK
        try:
            result = cancel_job(engine, args.job_id, note)
        except JobRefError as exc:
            raise UserError(str(exc)) from None
    job_id = result.job_id
    if result.changed and result.state is JobState.CANCELLED:
        print(f"{job_id}: cancelled")
    elif result.changed:
        print(f"{job_id}: cancellation requested; the running handler stops at its next checkpoint")
    elif result.state is JobState.CANCEL_REQUESTED:
        print(f"{job_id}: cancellation was already requested")
    else:
        print(f"{job_id}: already finished ({result.state.value}); nothing to cancel")
    return EXIT_OK
