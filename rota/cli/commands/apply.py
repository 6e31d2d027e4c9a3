"""``rota apply FILE [--dry-run]``: make the ``schedules`` table match a schedule file."""

from __future__ import annotations

import argparse
from typing import Any

from rota.cli.common import EXIT_OK, add_db_option, open_database
from rota.scheduler.apply import apply_file


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "apply",
        help="make the schedules table match a schedule file",
        description=(
            "Validate FILE, then in one transaction store its job types and make the "
            "schedules table match it: added, changed (a new rule starts from its next "
            "occurrence), removed (kept, marked removed, no longer fires)."
        ),
    )
    p.add_argument("file", metavar="FILE", help="the schedule file (YAML)")
    p.add_argument("--dry-run", action="store_true", help="print the changes, apply nothing")
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with open_database(args) as engine:
        result = apply_file(engine, args.file, dry_run=args.dry_run)
    print(result.render())
    return EXIT_OK
