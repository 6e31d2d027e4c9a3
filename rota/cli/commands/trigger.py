"""``rota trigger NAME``: one manual run of a schedule now."""

from __future__ import annotations

import argparse
from typing import Any

from rota.cli.common import (
    EXIT_OK,
    RuntimeFailure,
    UserError,
    add_config_option,
    add_db_option,
    add_note_options,
    checked_arg,
    open_database,
    operator_note,
)
from rota.operations.schedules import (
    OverlapForbidden,
    ScheduleRemoved,
    UnknownSchedule,
    trigger,
)


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "trigger",
        help="fire one manual occurrence of a schedule now",
        description=(
            'Make one job now, keyed "<name>@manual:<UTC now>Z" so it never collides '
            "with a regular occurrence. The schedule's cursor does not move. Its overlap "
            "policy applies: forbid refuses while a run is unfinished (exit 1, nothing "
            "recorded), replace asks the unfinished runs to cancel first."
        ),
    )
    p.add_argument("name", metavar="NAME", help="the schedule")
    add_note_options(p)
    add_db_option(p)
    add_config_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    name = checked_arg("NAME", args.name)
    note = operator_note(args)
    with open_database(args) as engine:
        try:
            result = trigger(engine, name, note=note)
        except (UnknownSchedule, ScheduleRemoved) as exc:
            raise UserError(str(exc)) from None
        except OverlapForbidden as exc:  # the schedule's state refuses it, for now
            raise RuntimeFailure(str(exc)) from None
    for replaced in result.replaced:
        print(f"replacing {replaced} (cancellation requested)")
    print(f"{result.job_id}  {result.dedup_key}")
    return EXIT_OK
