"""``rota pause NAME``: stop a schedule from making jobs (jobs already made are kept)."""

from __future__ import annotations

import argparse
from typing import Any

from rota.cli.common import EXIT_OK, UserError, add_config_option, add_db_option, open_database
from rota.scheduler.control import UnknownSchedule, pause


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "pause", help="pause a schedule: it makes no jobs until resumed"
    )
    p.add_argument("name", metavar="NAME", help="the schedule")
    add_db_option(p)
    add_config_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with open_database(args) as engine:
        try:
            changed = pause(engine, args.name)
        except UnknownSchedule as exc:
            raise UserError(str(exc)) from None
    print(f"{args.name}: paused" if changed else f"{args.name}: was already paused")
    return EXIT_OK
