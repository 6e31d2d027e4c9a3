"""``rota apply FILE [--dry-run]``: make the ``schedules`` table match a schedule file."""

from __future__ import annotations

import argparse
from typing import Any

from sqlalchemy import Engine

from cli.common import EXIT_OK, BadScheduleFile, add_db_option, open_database
from scheduler.apply import ApplyResult, apply_file
from shared.config.errors import ConfigError


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


def apply_or_refuse(engine: Engine, path: str, *, dry_run: bool = False) -> ApplyResult:
    """``apply_file``, with a refused file raised as ``BadScheduleFile``."""
    try:
        return apply_file(engine, path, dry_run=dry_run)
    except ConfigError as exc:
        raise BadScheduleFile([str(p) for p in exc.problems]) from None


def run(args: argparse.Namespace) -> int:
    with open_database(args) as engine:
        result = apply_or_refuse(engine, args.file, dry_run=args.dry_run)
    print(result.render())
    return EXIT_OK
