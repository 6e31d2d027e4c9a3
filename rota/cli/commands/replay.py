"""``rota replay ID`` / ``rota replay --state FAILED --type T``: requeue FAILED jobs.

A replayed job goes back to QUEUED with a fresh attempt budget. Its attempt
history (``job_attempts``) is kept and its lease generation keeps counting up.
Only a FAILED job can be replayed: any other state, an unknown id, an
ambiguous prefix or a malformed one is bad input (exit 2).

The bulk form replays every FAILED job the filters match, in bounded batches,
with the same statement as the single form. ``--reason`` is kept with the actor
(the OS user at this host, or ``--actor``) and the time, one ``rota audit`` row
per job.
"""

from __future__ import annotations

import argparse
from typing import Any

from rota.cli.bulk import add_single_and_bulk_options, check_form, run_bulk
from rota.cli.common import EXIT_OK, UserError, open_database, operator_note
from rota.core.queries.job_ids import JobRefError
from rota.operations.jobs import bulk_replay, replay_job, replay_states


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "replay",
        help="requeue a FAILED job (or every FAILED job matching filters) with a fresh "
        "attempt budget, keeping its history",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    add_single_and_bulk_options(p, "bulk form: FAILED (the default; no other state replays)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    bulk = check_form(args, "replay")
    note = operator_note(args)
    with open_database(args) as engine:
        if bulk:
            run_bulk(
                engine,
                args,
                note,
                states_of=replay_states,
                run=lambda e, where, n, batch: bulk_replay(e, where, n, batch=batch),
                verb="replay",
                done="queued again",
            )
            return EXIT_OK
        try:
            result = replay_job(engine, args.job_id, note)
        except JobRefError as exc:
            raise UserError(str(exc)) from None
    if not result.changed:
        raise UserError(
            f"job {result.job_id} is {result.state.value}: only a FAILED job can be replayed"
        )
    print(f"{result.job_id}: queued again with a fresh attempt budget")
    return EXIT_OK
