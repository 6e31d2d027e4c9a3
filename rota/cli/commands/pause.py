"""``rota pause NAME [--reason TEXT]``: stop a schedule from making jobs.

Jobs already made are kept. The reason, the OS user and the time are kept
and shown by ``rota schedules``.
"""

from __future__ import annotations

import argparse
from typing import Any

from rota.cli.common import (
    EXIT_OK,
    UserError,
    add_config_option,
    add_db_option,
    add_reason_option,
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
    add_reason_option(p)
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
