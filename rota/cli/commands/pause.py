"""``rota pause NAME [--reason TEXT]``: stop a schedule from making jobs.

Jobs already made are kept. The reason, the actor (the OS user at this host,
or ``--actor``) and the time are kept and shown by ``rota schedules`` and
``rota audit``.
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
from rota.operations.schedules import UnknownSchedule, pause


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "pause", help="pause a schedule: it makes no jobs until resumed"
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
            changed = pause(engine, name, note=note)
        except UnknownSchedule as exc:
            raise UserError(str(exc)) from None
    print(f"{name}: paused" if changed else f"{name}: was already paused")
    return EXIT_OK
