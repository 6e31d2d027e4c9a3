"""``rota check FILE``: validate a schedule file; no database needed.

Exit 0 with ``ok: N schedules, M job types``, or 2 with one ``file:line: message``
line per problem on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rota.cli.common import EXIT_BAD_INPUT, EXIT_OK, add_db_option
from rota.scheduler.schedule_file.errors import ConfigError
from rota.scheduler.schedule_file.loader import load_schedule_file


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "check", help="validate a schedule file (no database needed)"
    )
    p.add_argument("file", metavar="FILE", help="the schedule file (YAML)")
    add_db_option(p)  # accepted like every command's; this one needs no database
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        loaded = load_schedule_file(args.file)
    except ConfigError as exc:
        print_problems(exc)
        return EXIT_BAD_INPUT
    print(f"ok: {len(loaded.schedules)} schedules, {len(loaded.job_types)} job types")
    return EXIT_OK


def print_problems(exc: ConfigError) -> None:
    for problem in exc.problems:
        print(problem, file=sys.stderr)
