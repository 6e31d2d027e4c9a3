"""``rota resume NAME``: resume a paused schedule.

What fell due during the pause is handled by the schedule's misfire policy;
skipped occurrences are recorded with reason ``paused``.
"""

from __future__ import annotations

import argparse
from typing import Any

from rota.cli.common import (
    EXIT_OK,
    UserError,
    add_config_option,
    add_db_option,
    add_note_options,
    checked_arg,
    open_database,
    operator_note,
)
from rota.operations.schedules import UnknownSchedule, resume


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "resume",
        help="resume a paused schedule (its misfire policy decides what the pause missed)",
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
            result = resume(engine, name, note=note)
        except UnknownSchedule as exc:
            raise UserError(str(exc)) from None
    if not result.was_paused:
        print(f"{args.name}: was not paused")
        return EXIT_OK
    t = result.tick
    print(
        f"{args.name}: resumed; missed while paused: {t.created} job(s) made, "
        f"{t.skipped} skipped, {t.coalesced} coalesced"
    )
    return EXIT_OK
