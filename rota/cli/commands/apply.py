"""``rota apply FILE [--dry-run] [--detailed-exitcode]``: make the ``schedules`` table match a file.

Every changed field of a schedule or job type is printed with its old and new
value. ``--detailed-exitcode`` (for CI): exit 3 when there are changes (pending
in a dry run, applied otherwise), 0 when there are none; 2 and 1 keep their
meaning (bad input, runtime failure).
"""

from __future__ import annotations

import argparse
from typing import Any

from rota.cli.common import EXIT_OK, add_db_option, open_database
from rota.scheduler.apply import apply_file

EXIT_CHANGES = 3


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "apply",
        help="make the schedules table match a schedule file",
        description=(
            "Validate FILE, then in one transaction store its job types and make the "
            "schedules table match it: added, changed (a new rule starts from its next "
            "occurrence; each changed field shown old -> new), removed (kept, marked "
            "removed, no longer fires)."
        ),
    )
    p.add_argument("file", metavar="FILE", help="the schedule file (YAML)")
    p.add_argument("--dry-run", action="store_true", help="print the changes, apply nothing")
    p.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help=f"exit {EXIT_CHANGES} when there are changes (pending or applied), 0 when none",
    )
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with open_database(args) as engine:
        result = apply_file(engine, args.file, dry_run=args.dry_run)
    print(result.render())
    if args.detailed_exitcode and result.has_changes:
        return EXIT_CHANGES
    return EXIT_OK
